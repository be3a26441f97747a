"""torch's thread count (runtime/threads.py): chosen by timing the work on a simulated machine whose
speed and idle cores depend on the count and on the load beside it, and fixed where asked."""

import os

import pytest
import torch

from gptkit.runtime.threads import FIRST_LOOK, Threads, torch_threads


class Machine:
    """`cpus` cores; `busy` of them taken by other processes. A unit of work takes `work` seconds
    on one thread; more threads divide it among the free cores, and collapse (OpenMP threads
    spinning for a descheduled peer) when they and the others outnumber the cores."""

    def __init__(self, cpus=2, busy=0, work=0.1):
        self.cpus, self.busy, self.work = cpus, busy, work
        self.now, self.idle, self.total, self.counts = 0.0, 0.0, 0.0, []

    def unit(self, count):
        if count + self.busy <= self.cpus:
            seconds = self.work / count * 1.1 if count > 1 else self.work
        else:
            seconds = self.work * (1 + self.busy) * (15 if count > 1 else 1)
        self.now += seconds
        self.idle += seconds * max(0, self.cpus - self.busy - count)
        self.total += seconds * self.cpus
        return seconds

    def threads(self, **kw):
        return Threads(
            most=self.cpus,
            set_threads=self.counts.append,
            clock=lambda: self.now,
            cpu_seconds=lambda: (self.idle, self.total),
            **kw,
        )

    def run(self, threads, units):
        seen = []
        for _ in range(units):
            seen.append(threads.count)
            threads.record(self.unit(threads.count))
        return seen


@pytest.fixture(autouse=True)
def cpus(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)


def test_an_idle_machine_goes_to_every_core():
    machine = Machine(work=0.3)
    threads = machine.threads()
    seen = machine.run(threads, 200)
    assert seen[:2] == [1, 2] and set(seen[1:]) == {2}  # every other core idle in the first unit: straight up
    assert threads.settled
    machine = Machine(work=0.01)  # units too short to see idle cores in: it climbs
    seen = machine.run(machine.threads(), 200)
    assert seen.index(2) > 2 and set(seen[seen.index(2) :]) == {2}


def test_a_half_busy_machine_climbs_only_where_more_threads_are_faster(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    machine = Machine(cpus=4, busy=1)  # three free cores: 2 threads help, 4 collapse
    seen = machine.run(machine.threads(), 300)
    assert seen[0] == 1 and 2 in seen and seen[-1] == 2


def test_a_busy_machine_stays_on_one_thread_without_trying_two():
    machine = Machine(busy=2)
    assert set(machine.run(machine.threads(), 300)) == {1} and set(machine.counts) == {1}


def test_load_that_arrives_sends_it_back_to_one_thread_and_load_that_leaves_up_again():
    machine = Machine()
    threads = machine.threads()
    machine.run(threads, 50)
    assert threads.count == 2
    machine.busy = 2
    seen = machine.run(threads, 100)
    assert seen.index(1) <= 4 and set(seen[seen.index(1) :]) == {1}  # a few collapsed steps, then one thread
    machine.busy = 0
    start = machine.now
    seen = machine.run(threads, 2000)
    assert seen[-1] == 2  # after a look for idle cores
    assert machine.now - start >= FIRST_LOOK - 1 or seen.index(2) < 10


def test_a_try_that_is_slower_goes_back_and_waits_longer_each_time():
    machine = Machine(busy=1)  # one free core: two threads share it with the busy process
    threads = machine.threads()
    # the machine reports idle cores (as when the other process sleeps now and then), but two threads lose
    threads.cpu_seconds = lambda: (machine.total, machine.total)
    seen = machine.run(threads, 3000)
    tries = sum(1 for a, b in zip(seen, seen[1:]) if (a, b) == (1, 2))
    assert seen[-1] == 1 and 1 <= tries <= 8
    waits = [i for i, (a, b) in enumerate(zip(seen, seen[1:])) if (a, b) == (1, 2)]
    gaps = [b - a for a, b in zip(waits, waits[1:])]
    assert gaps == sorted(gaps)  # the waits between tries grow


def test_a_fixed_count_never_changes():
    machine = Machine(busy=2)
    threads = machine.threads(fixed=2)
    assert set(machine.run(threads, 100)) == {2} and machine.counts == [2] and threads.settled


def test_threads_flag_or_omp_num_threads_fix_the_count(monkeypatch):
    before = torch.get_num_threads()
    try:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        assert torch_threads(None).fixed is None and torch.get_num_threads() == 1  # measured: it starts on one
        assert torch_threads(2).fixed == 2 and torch.get_num_threads() == 2
        assert torch_threads(None, torch.device("cuda")).fixed is not None  # beside a GPU: not measured
        monkeypatch.setenv("OMP_NUM_THREADS", "1")
        assert torch_threads(None).fixed == 1
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize(
    "value, count",
    [("", None), ("3", 3), (" 3 ", 3), ("2,1", 2), ("4, 2", 4), ("1024", 1024)],
)
def test_omp_num_threads_is_read_as_openmp_reads_it(monkeypatch, value, count):
    """A comma-separated list, one count per nesting level: the first is this process's (torch
    takes it too: OMP_NUM_THREADS=2,1 runs torch on two threads)."""
    from gptkit.shared.workers import threads_from_environment

    monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert threads_from_environment() == count


@pytest.mark.parametrize(
    "value, needle",
    [
        ("abc", "not a thread count"),
        ("0", "not a thread count"),
        ("2,x", "not a thread count"),
        ("2,", "not a thread count"),
        ("-1", "not a thread count"),
        ("100000", "100,000 threads, more than the 1,024 gptkit runs"),
    ],
)
def test_an_omp_num_threads_openmp_would_not_take_or_too_large_is_refused(monkeypatch, value, needle):
    """libgomp ignores the first five with a warning, and torch's kernels died of SIGSEGV on the last."""
    from gptkit.shared.errors import InputError
    from gptkit.shared.workers import threads_from_environment

    monkeypatch.setenv("OMP_NUM_THREADS", value)
    with pytest.raises(InputError, match=f"OMP_NUM_THREADS={value}: {needle}"):
        threads_from_environment()
    before = torch.get_num_threads()
    try:
        assert torch_threads(1).fixed == 1  # --threads wins: the environment is not read
    finally:
        torch.set_num_threads(before)


def test_sample_and_train_measure_by_default():
    """The commands' --threads default is the measured count (None for torch_threads)."""
    from gptkit.sample.cli import cli as sample_cli
    from gptkit.train.cli import cli as train_cli

    for command, args in (
        (sample_cli, ["--checkpoint", "c", "--prompt", "p"]),
        (train_cli.commands["run"], ["--out", "o"]),
    ):
        assert command.make_context("gptkit", args).params["threads"] is None
        assert "measured" in next(p for p in command.params if p.name == "threads").help


def test_longer_units_after_a_new_loop_are_no_slowdown():
    """The recipe times small models, then training steps of a bigger one follow: the count stays."""
    machine = Machine()
    threads = machine.threads()
    machine.run(threads, 50)
    assert threads.count == 2
    threads.new_loop()
    machine.work = 1.0
    assert set(machine.run(threads, 50)) == {2}


# -- a deterministic run's count: fixed, recorded, and put back by a resume ---------------------------


def test_deterministic_fixes_the_count_on_the_cpu_and_records_it(monkeypatch):
    """--deterministic: one per physical core of the process's share, unless --threads or
    OMP_NUM_THREADS gives the count; recorded where the CPU computes, not beside a GPU."""
    import gptkit.runtime.threads as threads_module

    before = torch.get_num_threads()
    monkeypatch.setattr(threads_module, "cores_per_process", lambda: 2)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    try:
        top = torch_threads(None, torch.device("cpu"), deterministic=True)
        assert (top.fixed, top.given, top.recorded, top.state_dict()) == (2, None, True, {"count": 2})
        assert torch.get_num_threads() == 2 and top.describe() == "2 threads, fixed for --deterministic"
        flag = torch_threads(1, torch.device("cpu"), deterministic=True)
        assert (flag.fixed, flag.given, flag.state_dict()) == (1, "--threads", {"count": 1})
        measured = torch_threads(None, torch.device("cpu"))
        assert (measured.fixed, measured.recorded, measured.state_dict()) == (None, False, {})
        gpu = torch_threads(None, torch.device("cuda"), deterministic=True)
        assert (gpu.fixed, gpu.recorded, gpu.state_dict()) == (2, False, {})  # the GPU computes: nothing to record
        monkeypatch.setenv("OMP_NUM_THREADS", "1")
        environment = torch_threads(None, torch.device("cpu"), deterministic=True)
        assert (environment.fixed, environment.given, environment.state_dict()) == (1, "OMP_NUM_THREADS", {"count": 1})
    finally:
        torch.set_num_threads(before)


def test_a_recorded_count_holds_whatever_the_load_and_a_resume_puts_it_back():
    machine = Machine(busy=2)  # two threads collapse here: a measured count would go to one
    threads = machine.threads(fixed=2, recorded=True)
    assert set(machine.run(threads, 100)) == {2} and threads.state_dict() == {"count": 2}
    # the resume finds four idle cores: its own count would be 4, the run's recorded 2 goes on
    machine.cpus, machine.busy = 4, 0
    resumed = machine.threads(fixed=4, recorded=True)
    resumed.load_state_dict(threads.state_dict())
    assert set(machine.run(resumed, 100)) == {2} and machine.counts[-1] == 2 and resumed.settled
    older = machine.threads(fixed=4, recorded=True)  # a checkpoint that records no count leaves it as it is
    older.load_state_dict(None)
    assert older.count == 4 and older.state_dict() == {"count": 4}
    measured = machine.threads()  # a run that does not record its count measures it, whatever a checkpoint says
    measured.load_state_dict({"count": 2})
    assert measured.fixed is None and measured.state_dict() == {}
