"""Atomic file writes: a killed process leaves either the old file or the new one."""
import contextlib
import os
from pathlib import Path


@contextlib.contextmanager
def atomic_write(path, mode="w", **open_kwargs):
    """Open a temporary file beside `path`; on success it is fsynced and renamed over `path`.

    On any exception (KeyboardInterrupt included) the temporary file is removed and
    `path` is left untouched.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, mode, **open_kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
