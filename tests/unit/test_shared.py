"""shared/: atomic writes, progress display, worker pools, errors and what every command shares."""

import errno
import io
import logging
import multiprocessing
import os
import signal
import time
import types

import click
import pytest
from click.testing import CliRunner

import gptkit.shared.progress
from gptkit.shared.cli import Command
from gptkit.shared.errors import GptkitError, InputError, SettingError
from gptkit.shared.files import atomic_write, cause
from gptkit.shared.progress import Progress
from gptkit.shared.text import counted
from gptkit.shared.workers import process_pool

# -- atomic_write ----------------------------------------------------------------------------


def test_atomic_write_creates_and_replaces(tmp_path):
    path = tmp_path / "out.txt"
    with atomic_write(path) as f:
        f.write("first version, rather long\n")
    assert path.read_text() == "first version, rather long\n"
    with atomic_write(path, encoding="utf-8") as f:
        f.write("é\n")
    assert path.read_bytes() == "é\n".encode()  # replaced, not appended or overlaid
    assert os.listdir(tmp_path) == ["out.txt"]


def test_atomic_write_target_untouched_until_the_block_ends(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old")
    with atomic_write(path) as f:
        f.write("new")
        f.flush()
        assert path.read_text() == "old"
        temps = [n for n in os.listdir(tmp_path) if n != "out.txt"]
        assert len(temps) == 1 and temps[0].startswith(".out.txt.tmp-")
    assert path.read_text() == "new"
    assert os.listdir(tmp_path) == ["out.txt"]


class Boom(Exception):
    pass


@pytest.mark.parametrize("error", [Boom, KeyboardInterrupt])
def test_atomic_write_exception_keeps_old_file(tmp_path, error):
    path = tmp_path / "out.bin"
    path.write_bytes(b"old contents")
    with pytest.raises(error):
        with atomic_write(path, "wb") as f:
            f.write(b"partial new contents")
            f.flush()
            raise error
    assert path.read_bytes() == b"old contents"
    assert os.listdir(tmp_path) == ["out.bin"]


@pytest.mark.parametrize("error", [Boom, KeyboardInterrupt])
def test_atomic_write_exception_creates_nothing(tmp_path, error):
    with pytest.raises(error):
        with atomic_write(tmp_path / "out.txt") as f:
            f.write("partial")
            raise error
    assert os.listdir(tmp_path) == []


def test_atomic_write_binary(tmp_path):
    path = tmp_path / "data.bin"
    payload = bytes(range(256)) * 3 + b"\r\n\x00"
    with atomic_write(path, "wb") as f:
        f.write(payload)
    assert path.read_bytes() == payload
    with pytest.raises(TypeError):
        with atomic_write(path, "wb") as f:
            f.write("text into a binary file")
    assert path.read_bytes() == payload
    assert os.listdir(tmp_path) == ["data.bin"]


@pytest.mark.parametrize(
    "error, shown",
    [
        (OSError(errno.EFBIG, os.strerror(errno.EFBIG)), "File too large"),
        (OSError(errno.EFBIG, None), "EFBIG"),  # no strerror: its errno's name, never "None"
        (OSError("76800 requested and 47184 written"), "76800 requested and 47184 written"),  # numpy's tofile
        (OSError(), "OSError"),
    ],
)
def test_an_os_errors_cause_is_shown_whatever_it_carries(error, shown):
    assert cause(error) == shown


def test_atomic_write_into_missing_directory_fails_cleanly(tmp_path):
    with pytest.raises(FileNotFoundError):
        with atomic_write(tmp_path / "no" / "such" / "dir.txt") as f:
            f.write("x")
    assert os.listdir(tmp_path) == []


# -- Progress --------------------------------------------------------------------------------


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(gptkit.shared.progress, "time", types.SimpleNamespace(perf_counter=c))
    return c


def test_progress_quiet_prints_nothing(capsys, clock):
    p = Progress("counting", "items", total=100, quiet=True, log_interval=0)
    for i in range(100):
        clock.now += 1
        p.update(i + 1)
    p.close()
    out, err = capsys.readouterr()
    assert out == err == ""


def test_progress_in_logs_prints_a_few_lines(capsys, clock):
    p = Progress("counting", "items", total=10_000, log_interval=30)
    for i in range(10_000):
        clock.now += 0.01  # 100 s in all: a line at 30, 60 and 90 s
        p.update(i + 1)
    mid_run = capsys.readouterr()
    assert mid_run.out == ""
    assert len(mid_run.err.splitlines()) == 3
    assert "\r" not in mid_run.err
    p.update(5_000)
    p.close()
    final = capsys.readouterr().err
    assert final.endswith("\n") and final.count("\n") == 1
    assert final.startswith("counting: 5,000 items / 10,000 (50%)")
    assert "s\n" in final


def test_progress_many_fast_updates_large_interval(capsys):
    p = Progress("merging", "merges", total=1234, log_interval=3600)
    for i in range(1234):
        p.update(i + 1)
    p.close()
    lines = capsys.readouterr().err.splitlines()
    assert 1 <= len(lines) <= 2
    assert "1,234" in lines[-1] and "(100%)" in lines[-1]


def test_progress_scale_and_no_total(capsys, clock):
    p = Progress("reading", "MB", total=4_000_000, scale=1e6, log_interval=1)
    clock.now += 2
    p.update(1_000_000)
    p.close()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2
    assert lines[-1].startswith("reading: 1.0 MB / 4.0 (25%), 0.5 MB/s, 2.0 s")
    p = Progress("reading", "docs", log_interval=1)
    clock.now += 4
    p.update(20)
    p.close()
    line = capsys.readouterr().err.splitlines()[-1]
    assert line.startswith("reading: 20 docs, 5 docs/s") and "%" not in line


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_on_a_terminal_redraws_in_place(monkeypatch, clock):
    terminal = FakeTerminal()
    monkeypatch.setattr("sys.stderr", terminal)
    p = Progress("counting", "items", total=1000, log_interval=3600)
    for i in range(1000):
        clock.now += 0.001  # 1 s in all: redrawn about 10 times, not 1000
        p.update(i + 1)
    p.close()
    text = terminal.getvalue()
    assert 8 <= text.count("\r") <= 11
    assert text.count("\n") == 1 and text.endswith("\n")
    last = text.rsplit("\r", 1)[-1]
    assert last.startswith("counting: 1,000 items / 1,000 (100%)")
    assert len(last.rstrip("\n")) >= 79


def test_progress_closed_with_a_line_of_what_the_work_found(monkeypatch, capsys, clock):
    """In logs the line alone; on a terminal over the line redrawn; quiet, nothing."""
    p = Progress("timing", "steps", log_interval=3600)
    p.update(3, "d 64 x 2")
    p.close("timing: d 64 x 2 12 ms a step")
    assert capsys.readouterr().err == "timing: d 64 x 2 12 ms a step\n"
    terminal = FakeTerminal()
    monkeypatch.setattr("sys.stderr", terminal)
    p = Progress("timing", "steps", log_interval=3600)
    clock.now += 1
    p.update(3, "d 64 x 2")
    p.close("timing: done")
    drawn, last = terminal.getvalue().rsplit("\r", 1)
    assert drawn.startswith("timing: 3 steps, d 64 x 2") and last.rstrip() == "timing: done" and last.endswith("\n")
    assert len(last) == 80  # as wide as the line it draws over
    Progress("timing", "steps", quiet=True).close("timing: done")
    assert terminal.getvalue().endswith("timing: done".ljust(79) + "\n")


def test_counted_says_one_thing_and_many_things():
    assert [counted(n, "document") for n in (0, 1, 2, 1200)] == [
        "0 documents",
        "1 document",
        "2 documents",
        "1,200 documents",
    ]
    assert counted(1, "process", "processes") == "1 process" and counted(3, "process", "processes") == "3 processes"


# -- process_pool ----------------------------------------------------------------------------


def square(x):
    return x * x


def sigint_ignored():
    return signal.getsignal(signal.SIGINT) == signal.SIG_IGN


_barrier = None


def _set_barrier(barrier):
    global _barrier
    _barrier = barrier


def meet():
    """Wait until both workers are here: the two calls run in two different processes."""
    _barrier.wait(timeout=10)
    return os.getpid(), sigint_ignored()


def test_process_pool_runs_in_two_workers():
    barrier = multiprocessing.get_context("fork").Barrier(2)
    with process_pool(2, _set_barrier, (barrier,)) as pool:
        assert list(pool.map(square, range(20))) == [x * x for x in range(20)]
        met = [f.result(timeout=20) for f in [pool.submit(meet), pool.submit(meet)]]
    pids = {pid for pid, _ in met}
    assert len(pids) == 2 and os.getpid() not in pids
    assert all(ignored for _, ignored in met)


def test_process_pool_workers_ignore_sigint_parent_does_not():
    before = signal.getsignal(signal.SIGINT)
    with process_pool(2) as pool:
        assert all(pool.submit(sigint_ignored).result(timeout=20) for _ in range(4))
        pids = {pool.submit(os.getpid).result(timeout=20) for _ in range(8)}
        for pid in pids:
            os.kill(pid, signal.SIGINT)
        time.sleep(0.2)
        # The workers survived the interrupt and still take work.
        assert list(pool.map(square, range(10))) == [x * x for x in range(10)]
    assert signal.getsignal(signal.SIGINT) is before
    assert not sigint_ignored()


# -- InputError ------------------------------------------------------------------------------


def test_library_errors_are_plain_exceptions():
    """A library caller catches them like any exception: no click in them."""
    e = InputError("corpus.txt: no such file")
    assert not isinstance(e, click.ClickException) and isinstance(e, GptkitError)
    assert (InputError.exit_code, GptkitError.exit_code) == (2, 1)
    assert str(e) == "corpus.txt: no such file"
    setting = SettingError("batch_size", "0: expected a whole number, 1 or more")
    assert str(setting) == "batch_size 0: expected a whole number, 1 or more"  # the library's name


@pytest.mark.parametrize(
    "error, status, line",
    [
        (InputError("data.txt: cannot read"), 2, "Error: data.txt: cannot read"),
        (SettingError("batch_size", "0: expected 1 or more"), 2, "Error: --batch-size 0: expected 1 or more"),
        (GptkitError("step 3: the loss is nan; stopping"), 1, "Error: step 3: the loss is nan; stopping"),
    ],
)
def test_a_library_error_in_a_command_is_one_line_with_its_status(error, status, line):
    @click.command(cls=Command)
    @click.argument("path")
    def command(path):
        raise error

    res = CliRunner().invoke(command, ["data.txt"])
    assert res.exit_code == status
    assert res.stdout == ""
    assert res.stderr == line + "\n"
    with pytest.raises(click.ClickException) as info:
        command.main(["data.txt"], standalone_mode=False)
    assert info.value.exit_code == status


def test_warnings_go_through_logging_on_rank_0_only(monkeypatch):
    @click.command(cls=Command)
    def command():
        logging.getLogger("gptkit.anything").warning("3 bytes replaced")

    assert CliRunner().invoke(command, []).stderr == "warning: 3 bytes replaced\n"
    monkeypatch.setenv("RANK", "1")
    assert CliRunner().invoke(command, []).stderr == ""


def test_progress_note_and_eta(capsys, clock):
    p = Progress("encoding", "MB", total=4_000_000, scale=1e6, log_interval=1)
    clock.now += 2
    p.update(1_000_000, "10 docs, 300 tokens")
    line = capsys.readouterr().err.strip()
    assert line == "encoding: 1.0 MB / 4.0 (25%), 10 docs, 300 tokens, 0.5 MB/s, 2.0 s, ETA 6 s"
    p.update(4_000_000)
    p.close()
    assert "ETA" not in capsys.readouterr().err  # nothing left to wait for
