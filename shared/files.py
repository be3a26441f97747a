"""Atomic file writes: a killed process leaves either the old file or the new one."""
import contextlib
import glob
import os
from pathlib import Path


class AtomicFile:
    """A temporary file beside `path` that `commit()` fsyncs and renames over `path`.

    For files written over a long time, several at once (token shards); `atomic_write`
    is the same thing as a `with` block. The temporary name starts with a dot and ends
    in `.tmp-PID`, so nothing that lists a directory's shards mistakes it for one.
    """

    def __init__(self, path, mode="wb", **open_kwargs):
        self.path = Path(path)
        remove_stale_temporaries(self.path)
        self.tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        self.file = open(self.tmp, mode, **open_kwargs)

    def close(self):
        """Flush the temporary file to disk; `commit()` will rename it."""
        if not self.file.closed:
            try:
                self.file.flush()
                os.fsync(self.file.fileno())
            finally:
                self.file.close()

    def commit(self):
        try:
            self.close()
            os.replace(self.tmp, self.path)
        except BaseException:
            self.discard()
            raise

    def discard(self):
        self.file.close()
        self.tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_write(path, mode="w", **open_kwargs):
    """Open a temporary file beside `path`; on success it is fsynced and renamed over `path`.

    On any exception (KeyboardInterrupt included) the temporary file is removed and
    `path` is left untouched.
    """
    atomic = AtomicFile(path, mode, **open_kwargs)
    try:
        yield atomic.file
    except BaseException:
        atomic.discard()
        raise
    atomic.commit()


def remove_stale_temporaries(path):
    """Delete the temporary files of `path` that writers killed before their rename left
    behind (`.NAME.tmp-PID` of a process that no longer runs); a live writer's stays."""
    path = Path(path)
    for tmp in path.parent.glob(f".{glob.escape(path.name)}.tmp-*"):
        pid = tmp.name.rsplit("-", 1)[1]
        if pid.isdigit() and not _running(int(pid)):
            tmp.unlink(missing_ok=True)


def _running(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
