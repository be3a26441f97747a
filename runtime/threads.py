"""How many threads torch's CPU kernels run on: chosen by timing the work itself.

torch runs its CPU kernels on an OpenMP team whose threads spin at the barrier that ends each
parallel region. On an idle machine that is the fastest way to hand work between threads. When
other processes share the cores, a thread of the team is often descheduled, and the others
spin at the barrier until it runs again, a scheduler time slice later, once per parallel region
(hundreds a training step). Measured on a 2-core machine (bench/threads.py, the recipe's d 96
shape): one thread beats two by 2.4x beside two busy Python processes and by 21x beside two
processes that run torch themselves, while on an idle machine two threads are 1.7x faster than
one. OMP_WAIT_POLICY=PASSIVE (threads sleep at the barrier) softens the collapse but costs 40%
on an idle machine, and it must be set before torch is imported. No fixed count is right for
every machine, and the load changes while a run goes on.

So the count is measured. A loop of like units of work (training steps, sampled tokens) runs
its first unit on one thread; where every other core was idle meanwhile it goes to the top
count, else it climbs the ladder 1, 2, 4, ... (up to one per physical core), taking the next
count when the machine had idle cores while it ran and the units then get faster. When the
units slow down by half, something else took the cores: the climb starts again from one
thread. While below the top, it looks for idle cores again after a wait that doubles each time
the look finds nothing better. `--threads N` (or OMP_NUM_THREADS, which torchrun sets) fixes the count.

Some of torch's CPU kernels add in an order that depends on the count: LayerNorm's backward pass
(the gradients of its gains and biases are summed per thread, then added up), a sum or mean of
more than 32,768 values into one (a partial sum per thread), and matrix products in some of MKL's
code paths. A count that changes with the load so changes the last bits of a run's numbers, and
no one setting makes all of these add in one order (torch.use_deterministic_algorithms reaches
none of them, MKL_CBWR at most MKL's own products). A training run with --deterministic
therefore fixes the count on the CPU too, and records it: the run's checkpoints hold it
(state_dict) and a resume goes on with it (load_state_dict), whatever the load or the cores it
finds. Unless given, the count is one per physical core: what an idle machine measures, and not
a function of the load, as a count measured when the run starts would be (two runs of one
command would then differ).
"""

from __future__ import annotations

import os
import statistics
import time
from collections import deque
from collections.abc import Callable

import torch

from gptkit.shared.workers import cores_per_process, threads_from_environment

PROBE_UNITS = 2  # units timed at a count before it is judged (more: surer, and longer on a worse count)
MIN_WINDOW = 0.2  # seconds: units shorter than /proc/stat's 10 ms ticks are judged over this much time
FASTER = 0.95  # a higher count is kept only when its units take at most this fraction of the time
SLOWDOWN = 1.5  # units this much slower than when the count was chosen: the cores were taken, climb again
IDLE_CORES = 0.5  # idle cores, on average, while the loop ran, that make one more thread worth a try
FIRST_LOOK, LAST_LOOK = 15.0, 240.0  # seconds between looks for idle cores: doubled after each fruitless try


def cpu_seconds() -> tuple[float, float] | None:
    """(idle, all) CPU time of the whole machine so far, in seconds summed over its CPUs; None
    where /proc/stat is not there to read (not Linux)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return (fields[3] + fields[4]) / ticks, sum(fields[:8]) / ticks  # idle + iowait; user .. steal


class Threads:
    """torch's CPU threads for a loop: `record(seconds)` after each unit of work.

    `fixed`: the count, or None to choose it by measurement among 1 .. `most` threads.
    `given`: what fixed it where a user did, for messages ("--threads", "OMP_NUM_THREADS"); else None.
    `recorded`: the count is the run's own (a deterministic training run's, on the CPU): its
    checkpoints record it (state_dict) and a resume goes on with it (load_state_dict).
    `set_threads`, `cpu_seconds` and `clock` are torch's, the machine's and time's unless a
    test gives its own."""

    def __init__(
        self,
        fixed: int | None = None,
        most: int = 1,
        set_threads: Callable[[int], object] = torch.set_num_threads,
        cpu_seconds: Callable[[], tuple[float, float] | None] = cpu_seconds,
        clock: Callable[[], float] = time.monotonic,
        given: str | None = None,
        recorded: bool = False,
    ) -> None:
        self.set_threads, self.cpu_seconds, self.clock = set_threads, cpu_seconds, clock
        self.given, self.recorded = given, recorded
        self.fixed = fixed
        if fixed is not None:
            self.ladder = [fixed]
        else:
            self.ladder = [2**i for i in range(most.bit_length()) if 2**i < most] + [most]
        self.level = 0
        self.chosen_time: float | None = None  # the median unit time at the chosen count
        self.trying_from: tuple[int, float] | None = None  # (level, its time) while a higher count is tried
        self.wait, self.warming = FIRST_LOOK, True
        self.recent: deque[float] = deque(maxlen=PROBE_UNITS)
        # Set by _use below: the times of the units at this count since window_start, when to look for
        # idle cores next, and the machine's CPU times at the window's start.
        self.window: list[float]
        self.window_start: float
        self.next_look: float
        self.cpu_mark: tuple[float, float] | None
        self._use(0)

    @property
    def count(self) -> int:
        return self.ladder[self.level]

    def describe(self) -> str:
        if self.fixed is not None:
            return f"{self.fixed} thread{'s' if self.fixed > 1 else ''}{', fixed for --deterministic' if self.recorded else ''}"
        return f"threads measured, 1 to {self.ladder[-1]}"

    def fix(self, count: int) -> None:
        """The count is `count` from now on, measured no more."""
        self.fixed, self.ladder = count, [count]
        self._use(0)

    def state_dict(self) -> dict[str, int]:
        """What a checkpoint records: a recorded count, which a resume goes on with; else nothing."""
        return {"count": self.count} if self.recorded else {}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """A resume: a recorded count goes on as the run's checkpoint has it (train/resume.py
        refused a count given otherwise); a checkpoint without one leaves the count as it is."""
        if self.recorded and state:
            self.fix(state["count"])

    @property
    def settled(self) -> bool:
        """Whether the count is chosen (for now): fixed, or timed and not being tried against another."""
        return self.fixed is not None or (
            not self.warming and self.trying_from is None and self.chosen_time is not None
        )

    def new_loop(self) -> None:
        """Units of another size follow (the recipe timed small models, training steps come next):
        the count stays, its time is measured anew from the next unit but one."""
        if self.fixed is None:
            self._use(self.trying_from[0] if self.trying_from else self.level)  # a try left unjudged: back
            self.warming, self.trying_from = True, None

    def record(self, seconds: float) -> None:
        """One unit of work took `seconds` at the current count; the count may change for the next."""
        if self.fixed is not None:
            return
        if self.warming:  # the first unit pays for allocations and warm-ups, not for the thread count
            self.warming = False
            self._use(self._top_if_idle())
            return
        self.window.append(seconds)
        self.recent.append(seconds)
        if len(self.window) < PROBE_UNITS or self.clock() - self.window_start < MIN_WINDOW:
            if self.trying_from is None or seconds <= SLOWDOWN * self.trying_from[1]:
                return
        median = statistics.median(self.window)
        if self.trying_from is not None:
            self._judge_try(median)
        elif self.chosen_time is None:
            self.chosen_time = median
            self._maybe_climb()
        elif self.level > 0 and statistics.median(self.recent) > SLOWDOWN * self.chosen_time:
            self.wait = FIRST_LOOK
            self._use(0)  # something took the cores: measure again from one thread
        elif self.clock() >= self.next_look:
            self._maybe_climb()
        else:
            self._new_window(keep_idle=True)

    def _top_if_idle(self):
        """The level to time first: the top where every other core was idle while the first unit
        ran (on one thread), measured over MIN_WINDOW at least; else the level it ran at, from
        which the count climbs. An idle machine so skips the climb's slower steps."""
        idle = self._idle_cores() if self.clock() - self.window_start >= MIN_WINDOW else None
        others = self.ladder[-1] - self.count
        return len(self.ladder) - 1 if idle is not None and others and idle >= others - IDLE_CORES / 2 else self.level

    def _maybe_climb(self):
        """One more thread where the machine had idle cores while this count ran."""
        idle = self._idle_cores()
        if self.level + 1 < len(self.ladder) and (idle is None or idle >= IDLE_CORES):
            assert self.chosen_time is not None  # a climb starts from a count that was timed
            self.trying_from = (self.level, self.chosen_time)
            self._use(self.level + 1)
        else:
            self._look_later()

    def _judge_try(self, median):
        assert self.trying_from is not None  # judged only while a try runs
        level, time_before = self.trying_from
        self.trying_from = None
        if len(self.window) >= PROBE_UNITS and median <= FASTER * time_before:
            self.chosen_time, self.wait = median, FIRST_LOOK
            self._maybe_climb()
        else:
            self.wait = min(2 * self.wait, LAST_LOOK)
            self._use(level, chosen_time=time_before)

    def _use(self, level, chosen_time=None):
        self.level, self.chosen_time = level, chosen_time
        self.set_threads(self.count)
        self.recent.clear()
        self._look_later()

    def _look_later(self):
        self.next_look = self.clock() + self.wait
        self._new_window()

    def _new_window(self, keep_idle=False):
        self.window, self.window_start = [], self.clock()
        if not keep_idle:
            self.cpu_mark = self.cpu_seconds()

    def _idle_cores(self):
        """Idle cores on average since the mark; None where the machine does not say."""
        now = self.cpu_seconds()
        if now is None or self.cpu_mark is None or now[1] <= self.cpu_mark[1]:
            return None
        cpus = os.cpu_count() or 1
        return cpus * (now[0] - self.cpu_mark[0]) / (now[1] - self.cpu_mark[1])


def torch_threads(
    threads: int | None = None, device: torch.device | None = None, deterministic: bool = False
) -> Threads:
    """The threads of a stage that runs torch on `device`: `threads` (--threads) or
    OMP_NUM_THREADS fixes them; else on the CPU they are measured, up to one per physical core
    of this process's share, and beside a GPU (which does the work) they are that many.
    `deterministic` (a training run's --deterministic): on the CPU they are fixed too, at one per
    physical core unless given, and recorded (Threads): the run computes on one count throughout."""
    environment = None if threads else threads_from_environment()  # the flag wins: the environment is not read
    fixed = threads or environment
    given = "--threads" if threads else "OMP_NUM_THREADS" if environment else None
    on_cpu = device is None or device.type == "cpu"
    if fixed is None and (deterministic or not on_cpu):
        fixed = cores_per_process()
    return Threads(fixed, cores_per_process(), given=given, recorded=deterministic and on_cpu)
