"""Atomic changes to files and directories: a process killed at any instant leaves the old
version or the new one, never a mix and never nothing.

Everything new is written under a temporary name beside its target, `.NAME.tmp-PID`, flushed
to disk and renamed into place. The temporary name starts with a dot, so nothing that lists a
directory's shards or checkpoints mistakes it for one, and carries the writer's process id,
so that a later writer removes what a killed one left and leaves a live one's alone.
"""
import contextlib
import glob
import os
import shutil
from pathlib import Path


def temporary(path) -> Path:
    """The temporary name of this process's new version of `path`."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


class AtomicFile:
    """A temporary file beside `path` that `commit()` fsyncs and renames over `path`.

    For files written over a long time, several at once (token shards); `atomic_write`
    is the same thing as a `with` block.
    """

    def __init__(self, path, mode="wb", **open_kwargs):
        self.path = Path(path)
        remove_stale_temporaries(self.path)
        self.tmp = temporary(self.path)
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


@contextlib.contextmanager
def atomic_path(path):
    """A temporary path beside `path` for a writer that wants a path (safetensors' save_file):
    fsynced and renamed over `path` when the block ends, removed if it fails."""
    path = Path(path)
    remove_stale_temporaries(path)
    tmp = temporary(path)
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_directory(path):
    """A new temporary directory beside `path`, filled in the block; then its files are fsynced
    and it replaces `path` (an old `path` is moved aside first, and back if the rename fails, and
    deleted after: a directory cannot be renamed over a non-empty one)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary(path)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
        for file in tmp.iterdir():
            _fsync(file)
        old = path.with_name(f".{path.name}.old-{os.getpid()}")
        if path.exists() or path.is_symlink():
            os.replace(path, old)
        try:
            os.replace(tmp, path)
        except BaseException:
            if old.exists() or old.is_symlink():
                os.replace(old, path)
            raise
        _remove(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def atomic_symlink(link, target):
    """Point the symbolic link `link` at `target` (relative to the link's directory), replacing
    what it pointed at in one rename: a reader follows the old target or the new one."""
    link = Path(link)
    tmp = temporary(link)
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target)
    os.replace(tmp, link)


def remove_directory(path):
    """Delete a directory tree, first renamed to a temporary name: a kill while deleting leaves
    a temporary for the next writer to remove, never a half-deleted tree under its own name."""
    path = Path(path)
    doomed = temporary(path)
    os.replace(path, doomed)
    shutil.rmtree(doomed)


def sync_directory(directory):
    """Make the renames in `directory` reach the disk (before a file that relies on them)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_stale_temporaries(path):
    """Delete the temporaries of `path` that writers killed before their rename left behind
    (`.NAME.tmp-PID` of a process that no longer runs, file or directory); a live writer's stays."""
    path = Path(path)
    for tmp in path.parent.glob(f".{glob.escape(path.name)}.tmp-*"):
        pid = tmp.name.rsplit("-", 1)[1]
        if pid.isdigit() and not _running(int(pid)):
            _remove(tmp)


def _remove(path):
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _fsync(path):
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def _running(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
