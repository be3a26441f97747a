"""One owner: a directory that a long command writes over time (a run, a shard directory) is
locked by the process writing it (`output_lock`), so that a second one is refused instead of
mixing its files in. The rest of the rules for outputs are shared/files.py's."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from .errors import SettingError
from .files import StrPath, cause, looked_up

LOCK_FILE = ".lock"  # a dot-file: the checks for other files in a directory pass it by


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
            raise SettingError("out", f"{directory}: cannot write there ({cause(e)})") from None
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


def _lock_holder(fd: int) -> str:
    """`process PID (COMMAND)` from a lock file, as its owner wrote it."""
    line = os.pread(fd, 4096, 0).decode(errors="replace").split("\n", 1)[0]
    pid, _, owner = line.partition(" ")
    return f"process {pid} ({owner})" if pid.isdigit() else "another process"
