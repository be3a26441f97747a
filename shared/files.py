"""Outputs: atomic changes to files and directories, what an output may replace, and who owns it.

Atomic: a process killed at any instant leaves the old version or the new one, never a mix and
never nothing. Everything new is written under a temporary name beside its target,
`.NAME.tmp-PID`, flushed to disk and renamed into place. The temporary name starts with a dot,
so nothing that lists a directory's shards or checkpoints mistakes it for one, and carries the
writer's process id, so that a later writer removes what a killed one left and leaves a live
one's alone.

One rule for outputs (`check_output`): a command replaces what it wrote before (a tokenizer.json,
a checkpoint: what it can recognize as its own kind), never anything else unless --overwrite; and
never its input, even with --overwrite (`check_apart`).

One owner (`output_lock`): a directory that a long command writes over time (a run, a shard
directory) is locked by the process writing it, so that a second one is refused instead of
mixing its files in.

Paths a user gives are looked up through one check (`looked_up`, `resolved`): one that cannot be
followed (a loop of symbolic links, a directory this user may not search, a name too long) is
one line naming the setting, not a traceback from deep inside a command.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

from .errors import SettingError, named

# A path as callers give one: a str or any os.PathLike (a Path).
StrPath = str | os.PathLike[str]
_P = TypeVar("_P", bound=StrPath)

LOCK_FILE = ".lock"  # a dot-file: the checks for other files in a directory pass it by


_CANNOT_LOOK_UP: dict[int | None, str] = {  # by OSError.errno, which may be None
    errno.ELOOP: "a loop of symbolic links (or too many in a row); fix the link, or give another path",
    errno.EACCES: "permission denied on the way to it; give a path this user may reach",
    errno.ENAMETOOLONG: "a name too long for the file system; give a shorter path",
}


def looked_up(path: StrPath, setting: str) -> Path:
    """`path` as a Path, after checking that it can be looked up, its links followed: it is there,
    or it is not (the caller says what is missing). Anything else (a loop of symbolic links, a
    directory on the way that this user may not search, a name too long) is a SettingError of
    `setting`, the setting that gave the path, which a command line shows as its flag; Path's own
    checks would raise it from wherever the path is next touched (Path.resolve: a RuntimeError for
    a loop; exists(): an OSError for the others), or call it missing."""
    path = Path(path)
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        pass
    except OSError as e:
        problem = _CANNOT_LOOK_UP.get(e.errno, f"cannot look it up ({e.strerror}); give another path")
        raise SettingError(setting, f"{path}: {problem}") from None
    return path


def resolved(path: StrPath, setting: str) -> Path:
    """The absolute path `path` names, its links followed (what a command records of a path, or
    compares with another); looked up first (looked_up), a failure a SettingError of `setting`."""
    return Path(os.path.realpath(looked_up(path, setting)))


def temporary(path: StrPath) -> Path:
    """The temporary name of this process's new version of `path`."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


class AtomicFile:
    """A temporary file beside `path` that `commit()` fsyncs and renames over `path`.

    For files written over a long time, several at once (token shards); `atomic_write`
    is the same thing as a `with` block.
    """

    def __init__(self, path: StrPath, mode: str = "wb", **open_kwargs: Any) -> None:
        self.path = Path(path)
        remove_stale_temporaries(self.path)
        self.tmp = temporary(self.path)
        self.file: IO[Any] = open(self.tmp, mode, **open_kwargs)

    def close(self) -> None:
        """Flush the temporary file to disk; `commit()` will rename it."""
        if not self.file.closed:
            try:
                self.file.flush()
                os.fsync(self.file.fileno())
            finally:
                self.file.close()

    def commit(self) -> None:
        try:
            self.close()
            os.replace(self.tmp, self.path)
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        self.file.close()
        self.tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_write(path: StrPath, mode: str = "w", **open_kwargs: Any) -> Iterator[IO[Any]]:
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
def atomic_path(path: StrPath) -> Iterator[Path]:
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
def atomic_directory(path: StrPath) -> Iterator[Path]:
    """A new temporary directory beside `path`, filled in the block; then its files are fsynced
    and it replaces `path`.

    A directory cannot be renamed over a non-empty one, so an old `path` is swapped out in two
    renames: aside to `.NAME.old-PID`, then the new one in; the old one is then deleted (renamed
    to the temporary name first, so that `.NAME.old-PID` is only ever whole). A failed second
    rename puts the old one back. A kill between the two leaves no `path`, only the whole old one
    aside: `settle_directory`, which this and every writer's check (check_output) call first, puts
    it back (a kill after the swap leaves the old one aside beside the new `path`: it deletes it);
    a reader meanwhile reads the old one where it lies (`settled`), changing nothing.
    renameat2's RENAME_EXCHANGE would swap in one step, but not every filesystem has it, and the
    fallback would need this recovery all the same.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    settle_directory(path)
    remove_stale_temporaries(path)
    tmp = temporary(path)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
        for file in tmp.iterdir():
            _fsync(file)
        old = _aside(path)
        if path.exists() or path.is_symlink():
            os.replace(path, old)
        try:
            os.replace(tmp, path)
        except BaseException:
            if old.exists() or old.is_symlink():
                os.replace(old, path)
            raise
        if old.exists() or old.is_symlink():
            os.replace(old, tmp)  # the name is free again; deleted from under it, a kill leaves a temporary
            _remove(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def settle_directory(path: StrPath) -> None:
    """Finish what a writer killed inside atomic_directory's swap left at `path`: its old version,
    aside as `.NAME.old-PID`, goes back where no `path` is (the new one never got in), and is
    deleted where `path` is (the swap was done). A live writer's is left alone; so is all of it
    where this process may not write. For writers only: a reader reads `settled(path)`."""
    path = Path(path)
    for old in _left_by_dead(path, "old"):
        with contextlib.suppress(OSError):
            if path.exists() or path.is_symlink():
                doomed = temporary(path)
                _remove(doomed)
                os.replace(old, doomed)
                _remove(doomed)
            else:
                os.replace(old, path)


def settled(path: StrPath) -> Path:
    """Where a reader finds `path` as settle_directory would leave it, changing nothing: `path`,
    or where a writer killed inside atomic_directory's swap left none (the new one never got in),
    the whole old one it left aside, `.NAME.old-PID`; through a link, beside the link's target (a
    run's `latest`). Readers never rename or delete: the directory may be another user's, or
    read while a writer works; the next writer settles it."""
    path = Path(path)
    if path.exists():
        return path
    # realpath, which never fails: a path that cannot be followed is its reader's to name (looked_up)
    return min(_left_by_dead(Path(os.path.realpath(path)), "old"), default=path)


def _aside(path: Path) -> Path:
    return path.with_name(f".{path.name}.old-{os.getpid()}")


LATEST = "latest"  # the link a training run's directory keeps to its newest checkpoint (atomic_symlink)


def atomic_symlink(link: StrPath, target: StrPath) -> None:
    """Point the symbolic link `link` at `target` (relative to the link's directory), replacing
    what it pointed at in one rename: a reader follows the old target or the new one."""
    link = Path(link)
    tmp = temporary(link)
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target)
    os.replace(tmp, link)


def remove_directory(path: StrPath) -> None:
    """Delete a directory tree, first renamed to a temporary name: a kill while deleting leaves
    a temporary for the next writer to remove, never a half-deleted tree under its own name."""
    path = Path(path)
    doomed = temporary(path)
    os.replace(path, doomed)
    shutil.rmtree(doomed)


def sync_directory(directory: StrPath) -> None:
    """Make the renames in `directory` reach the disk (before a file that relies on them)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_stale_temporaries(path: StrPath) -> None:
    """Delete the temporaries of `path` that writers killed before their rename left behind
    (`.NAME.tmp-PID` of a process that no longer runs, file or directory); a live writer's stays."""
    for tmp in _left_by_dead(Path(path), "tmp"):
        _remove(tmp)


def _left_by_dead(path: Path, kind: str) -> Iterator[Path]:
    """The `.NAME.KIND-PID` beside `path` of processes that no longer run."""
    for left in path.parent.glob(f".{glob.escape(path.name)}.{kind}-*"):
        pid = left.name.rsplit("-", 1)[1]
        if pid.isdigit() and not _running(int(pid)):
            yield left


def check_output(
    path: StrPath,
    ours: Callable[[Path], Any] | None,
    what: str,
    overwrite: bool = False,
    *,
    directory: bool = False,
) -> None:
    """Refuse to replace an existing `path` that the command did not write, unless `overwrite`.

    `ours(path)` says whether it is of the kind the command writes (a tokenizer.json, a
    checkpoint), which it replaces; `ours` None: the command cannot tell its own output (a text
    corpus), so only `overwrite` replaces it. `what`: that kind, for the message. `directory`:
    the output is a directory, and an empty one is replaced (nothing is lost); a file output is
    never written over a directory, even with `overwrite`. A directory output is settled first
    (settle_directory: what a killed writer left aside is put back), so that the check sees what
    a reader would. The error is a SettingError of the setting `out`, which a command line shows
    as its flag (`--out`)."""
    path = looked_up(path, "out")
    if directory:
        settle_directory(path)
    if not (path.exists() or path.is_symlink()):
        return
    if path.is_dir() and not directory:
        raise SettingError("out", f"{path}: is a directory; expected the path of {what} to write")
    if overwrite or (ours is not None and ours(path)):
        return
    if path.is_dir():
        try:
            names = sorted(p.name for p in path.iterdir())
        except OSError as e:
            raise SettingError(
                "out", f"{path}: exists and cannot be read ({e.strerror}); choose another path"
            ) from None
        if not names:
            return
        found = f"a directory of other files ({names[0]}{', ...' if len(names) > 1 else ''})"
    else:
        found = "a file"
    kind = f", not {what}" if ours is not None else ""
    raise SettingError(
        "out", f"{path}: exists and is {found}{kind}; choose another path, or pass {named('overwrite')} to replace it"
    )


def check_apart(out: StrPath, source: StrPath, source_flag: str) -> None:
    """Refuse an output that is its command's input, holds it or lies inside it, even with
    --overwrite: replacing it would delete the input, or change it while it is read. A
    SettingError of the setting `out`; `source_flag`: the input's flag (`--copy-from`), for the
    message, whose setting (`copy_from`) names a source that cannot be looked up."""
    out_path = resolved(out, "out")
    source_path = resolved(source, source_flag.removeprefix("--").replace("-", "_"))
    if out_path == source_path:
        relation = "is"
    elif source_path.is_relative_to(out_path):
        relation = "holds"
    elif out_path.is_relative_to(source_path):
        relation = "lies inside"
    else:
        return
    raise SettingError(
        "out",
        f"{out}: {relation} {source_flag} {source}, the input; choose a path apart from it ({named('overwrite')} or not)",
    )


class NotRegularFile(OSError):
    """A path that is not a regular file where one is read; shown as its reason alone."""

    def __str__(self) -> str:
        return str(self.strerror)


def regular_file(path: _P) -> _P:
    """`path`, after checking that it is a regular file (links followed): reading a named pipe
    would wait for a writer, forever if none comes, and a device (/dev/zero) may never end.
    NotRegularFile (an OSError) where it is something else; FileNotFoundError where it is missing."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        kind = (
            "a directory"
            if stat.S_ISDIR(mode)
            else "a named pipe"
            if stat.S_ISFIFO(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "a device"
        )
        raise NotRegularFile(errno.EINVAL, f"not a regular file but {kind}")
    return path


@contextlib.contextmanager
def output_lock(directory: StrPath, owner: str) -> Iterator[None]:
    """Own `directory` (made if missing) while the block runs: a second process is refused,
    its message naming this one (`owner`: the command, as `gptkit train`).

    The lock is flock(2) on `directory/.lock`, which the kernel drops when the process ends,
    kill -9 included: a lock a dead process left is free, so the next one takes it over. The
    file holds the owner's process id and command, only for the message. It is deleted when the
    block ends (while still locked); a process that locked a file deleted meanwhile sees that
    the name is no longer its file and locks the new one. A directory this made and left empty
    (the command failed before writing) is removed, as if never made. Under torchrun only the
    rank that writes takes it."""
    directory, lock = looked_up(directory, "out"), Path(directory) / LOCK_FILE
    if directory.exists() and not directory.is_dir():
        raise SettingError("out", f"{directory}: exists and is not a directory")
    while True:
        try:
            made = not directory.is_dir()
            directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:  # removed by a process that made it and is done: make it again
            continue
        except OSError as e:
            raise SettingError("out", f"{directory}: cannot write there ({e.strerror})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _lock_holder(fd)
            os.close(fd)
            raise SettingError(
                "out", f"{directory}: in use by {holder}; wait for it or choose another directory"
            ) from None
        try:
            mine = os.path.samestat(os.fstat(fd), os.stat(lock))
        except FileNotFoundError:
            mine = False
        if mine:
            break
        os.close(fd)
    try:
        record = f"{os.getpid()} {owner}\n".encode()
        os.pwrite(fd, record, 0)  # over a dead owner's: a reader meanwhile sees the new line first
        os.ftruncate(fd, len(record))
        yield
    finally:
        lock.unlink(missing_ok=True)
        os.close(fd)
        if made:
            with contextlib.suppress(OSError):  # not empty: the command wrote something, which stays
                directory.rmdir()


def _lock_holder(fd):
    """`process PID (COMMAND)` from a lock file, as its owner wrote it."""
    line = os.pread(fd, 4096, 0).decode(errors="replace").split("\n", 1)[0]
    pid, _, owner = line.partition(" ")
    return f"process {pid} ({owner})" if pid.isdigit() else "another process"


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
