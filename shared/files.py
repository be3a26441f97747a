"""Outputs: atomic changes to files and directories, what an output may replace, and who owns it.

Atomic: a process killed at any instant leaves the old version or the new one, never a mix and
never nothing. Everything new is written under a temporary name beside its target,
`.NAME.tmp-PID`, flushed to disk and renamed into place. The temporary name starts with a dot,
so nothing that lists a directory's shards or checkpoints mistakes it for one, and carries the
writer's process id, so that a later writer removes what a killed one left and leaves a live
one's alone.

One rule for outputs (`check_output`): a command replaces what it wrote before (a tokenizer.json,
a checkpoint: what it can recognize as its own kind), never anything else unless --overwrite; never
what is not a regular file or a directory (a device, a named pipe, a socket), and never what it
reads, nor a place inside it, even with --overwrite (`check_apart`: its inputs, and what they lead
to, a LoRA checkpoint's base). What it writes gets the mode the umask gives (`_shareable`), and a
failed write names its cause (`cause`).

One owner: a directory a long command writes is locked by its writer (shared/lock.py).

Paths a user gives are looked up through one check (`looked_up`, `resolved`): one that cannot be
followed (a loop of symbolic links, a directory this user may not search, a name too long) is
one line naming the setting, not a traceback from deep inside a command.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import shutil
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

from .errors import SettingError, named

# A path as callers give one: a str or any os.PathLike (a Path).
StrPath = str | os.PathLike[str]
_P = TypeVar("_P", bound=StrPath)

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
        problem = _CANNOT_LOOK_UP.get(e.errno, f"cannot look it up ({cause(e)}); give another path")
        raise SettingError(setting, f"{path}: {problem}") from None
    return path


def resolved(path: StrPath, setting: str) -> Path:
    """The absolute path `path` names, its links followed (what a command records of a path, or
    compares with another); looked up first (looked_up), a failure a SettingError of `setting`."""
    return Path(os.path.realpath(looked_up(path, setting)))


def cause(error: OSError) -> str:
    """What a one-line message shows of an OS error: its strerror ("File too large"), else the name
    of its errno (EFBIG), else its own words (numpy's "76800 requested and 47184 written")."""
    if error.strerror:
        return str(error.strerror)
    if error.errno is not None:
        return errno.errorcode.get(error.errno, f"error {error.errno}")
    return str(error) or type(error).__name__


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
        try:
            yield tmp
        except OSError as e:
            raise _with_cause(e, tmp) from None
        _fsync(tmp)
        _shareable(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _with_cause(error: OSError, path: Path) -> OSError:
    """`error`, or where it has no errno (a short write of numpy's tofile, the GGUF writer's), the
    error one more byte at the end of `path` meets: File too large, No space left on device."""
    if error.errno is not None:
        return error
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, b"\0")
        finally:
            os.close(fd)
    except OSError as e:
        if e.errno is not None:
            return OSError(e.errno, e.strerror, str(path))
    return error


def _shareable(path: StrPath) -> None:
    """Give the file `path` the mode open() gives, what the umask leaves of rw-rw-rw-: a writer that
    makes its files private (safetensors' save_file: 0600) keeps other users from the weights."""
    os.chmod(path, 0o666 & ~_umask())


def _umask() -> int:
    # read only by setting it: 077 meanwhile, so that a file another thread makes is never more open
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


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
            _shareable(file)
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
CHECKPOINTS = "checkpoints"  # the directory of a training run's checkpoints, where LATEST points


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
    inputs: Iterable[Input] = (),
) -> None:
    """Refuse to replace an existing `path` that the command did not write, unless `overwrite`.

    `ours(path)` says whether it is of the kind the command writes (a tokenizer.json, a
    checkpoint), which it replaces; `ours` None: the command cannot tell its own output (a text
    corpus), so only `overwrite` replaces it. `what`: that kind, for the message. `directory`:
    the output is a directory, and an empty one is replaced (nothing is lost). Even with
    `overwrite`, a file output never replaces a directory, and no output a device, a named pipe, a
    socket, or one of the command's `inputs` (check_apart). A directory output is settled first
    (settle_directory: what a killed writer left aside is put back), so that the check sees what a
    reader would. The error is a SettingError of `out`, which a command line shows as `--out`."""
    path = looked_up(path, "out")
    check_apart(path, inputs)
    if directory:
        settle_directory(path)
    if not (path.exists() or path.is_symlink()):
        return
    node = _kind(os.stat(path).st_mode) if path.exists() else None  # None: a link to nothing
    if node not in (None, "a regular file", "a directory"):
        raise SettingError(
            "out", f"{path}: is {node}, not a file to replace; choose another path ({named('overwrite')} or not)"
        )
    if path.is_dir() and not directory:
        raise SettingError("out", f"{path}: is a directory; expected the path of {what} to write")
    if overwrite or (ours is not None and ours(path)):
        return
    if path.is_dir():
        try:
            names = sorted(p.name for p in path.iterdir())
        except OSError as e:
            raise SettingError("out", f"{path}: exists and cannot be read ({cause(e)}); choose another path") from None
        if not names:
            return
        found = f"a directory of other files ({names[0]}{', ...' if len(names) > 1 else ''})"
    else:
        found = "a file"
    kind = f", not {what}" if ours is not None else ""
    raise SettingError(
        "out", f"{path}: exists and is {found}{kind}; choose another path, or pass {named('overwrite')} to replace it"
    )


@dataclass(frozen=True)
class Input:
    """A path a command reads, which its output may not be, hold or lie inside (check_apart), how a
    message names it (`shown`), and the setting that gave it (named if it cannot be looked up)."""

    path: StrPath
    shown: str
    setting: str | None = None

    @classmethod
    def given(cls, setting: str, path: StrPath) -> Input:
        """The path a setting gives (`copy_from`: a command line shows `--copy-from`)."""
        return cls(path, f"{named(setting)} {path}, the input", setting)


def check_apart(out: StrPath, inputs: Iterable[Input]) -> None:
    """Refuse an output that is one of its command's `inputs`, holds one or lies inside one, even
    with --overwrite: replacing it would delete the input, or change it while it is read, and
    writing into it would change an input that a run or a checkpoint depends on. A SettingError of
    the setting `out`, before anything is written."""
    out_path = resolved(out, "out")
    for source in inputs:
        path = resolved(source.path, source.setting) if source.setting else Path(os.path.realpath(source.path))
        if path.is_relative_to(out_path) or out_path.is_relative_to(path):
            relation = "is" if path == out_path else "holds" if path.is_relative_to(out_path) else "lies inside"
            raise SettingError(
                "out",
                f"{out}: {relation} {source.shown}; choose a path apart from it (nothing is written over or into an input)",
            )


class NotRegularFile(OSError):
    """A path that is not a regular file where one is read; shown as its reason alone."""

    def __str__(self) -> str:
        return str(self.strerror)


def regular_file(path: _P) -> _P:
    """`path`, after checking that it is a regular file (links followed): reading a named pipe
    would wait for a writer, forever if none comes, and a device (/dev/zero) may never end.
    NotRegularFile (an OSError) where it is something else; FileNotFoundError where it is missing."""
    kind = _kind(os.stat(path).st_mode)
    if kind != "a regular file":
        raise NotRegularFile(errno.EINVAL, f"not a regular file but {kind}")
    return path


def _kind(mode: int) -> str:
    """What a file of st_mode `mode` is, for a message."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "a named pipe" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _fsync(path: StrPath) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
