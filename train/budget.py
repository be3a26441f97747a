"""How long a run trains: the steps --max-steps or --max-tokens ask for, or under --max-time
steps planned from the throughput the run measures. The Planner keeps the run's length and its
learning-rate schedule beside the loop, which asks it when to sync and, after a sync, whether
the length changes; a TimeBudget plans a --max-time run.

A step's time is known only once steps have run, and it changes on the way (a machine that gets
busy, evaluations). So a timed run starts without a length, measures its first steps (after the
first one, which pays for warm-ups and compilation), and plans its length early, then plans it
again at fixed fractions of the budget from all the steps it has timed; each plan re-plans the
schedule (train/schedule.py), warmup included, so the run always has a complete schedule ending at
min_lr on time. Between plans a run that finds its budget spent (a machine that got much slower)
ends at once, in the two steps the schedule needs to reach min_lr. Plans add no evaluation and
no checkpoint: the loop decides those after the plan.

The clock is rank 0's, taken at a sync once the device had finished, and it travels to every
rank in the next sync's all-reduce, so that all of them plan the same length.
"""

from __future__ import annotations

import time

from .schedule import Schedule
from .sections import Length, LRSchedule, parse_duration

UNPLANNED = 10**12  # the length of a --max-time run until its throughput is measured
FIRST_PLAN_STEPS = 3  # timed steps before the first plan
# A run whose steps take this many times what the recipe timed, found in the first RECHOOSE_WITHIN
# of its budget, is better served by a shape chosen for the machine as it is now.
RECHOOSE_SLOWDOWN, RECHOOSE_WITHIN = 3.0, 0.25
PLAN_AT = (0.05, 0.1, 0.25, 0.5, 0.75, 0.9)  # fractions of the budget where the length is planned again
CHECKS = 100  # syncs the budget asks for over a run: it is checked about every 1% of it
MIN_LEFT = 0.5  # of the budget, left to the loop however long the recipe took (it takes a fifth at most)


class TooSlow(Exception):
    """A run of the recipe's finds its steps far slower than the recipe timed them, early: it ends
    before its first checkpoint, so that the recipe can choose again for the time left (train/run.py)."""

    def __init__(self, remaining: float, line: str) -> None:
        super().__init__(line)
        self.remaining, self.line = remaining, line


def steps_asked(length: Length, tokens_per_step: int) -> int | None:
    """The steps of a run's length: max_steps, or the steps that train on max_tokens (the last one
    whole); None where the length is max_time's, planned while the run trains."""
    if length.max_tokens:
        return -(-length.max_tokens // tokens_per_step)
    return None if length.max_time else length.max_steps


class Planner:
    """The run's length and its learning-rate schedule (train/schedule.py): fixed by the settings, or
    planned by a TimeBudget while a timed run trains. The loop consults it through three calls:
    sync_due(step), clock_to_share() and synced(clock, step), which gives a new length when one is
    planned and raises TooSlow where the run is held to the recipe's timing (hold_to). `master`:
    rank 0, whose clock every rank plans by. `new_length`: a resume gives the run a length other
    than its own."""

    def __init__(
        self,
        length: Length,
        settings: LRSchedule,
        peak_lr: float,
        tokens_per_step: int,
        master: bool = True,
        new_length: bool = False,
    ) -> None:
        """It receives the run's `length` and `settings` (the schedule's sections, settled), the optimizer's
        `peak_lr`, and the run's `tokens_per_step`."""
        self.length, self.settings, self.master, self.new_length = length, settings, master, new_length
        min_lr = settings.min_lr
        assert min_lr is not None  # settled
        self.peak_lr, self.floor = peak_lr, min_lr / peak_lr if peak_lr else 0.0
        self.timed: float | None = None  # the recipe's seconds per step, which the run is held to
        self.first_step = 0  # where the loop started
        # the max_time budget; None where the length is fixed (or, on a resume, already planned)
        self.seconds = parse_duration(self.length.max_time) if self.length.max_time else None
        self.steps_asked = steps_asked(self.length, tokens_per_step) or UNPLANNED
        self.schedule = Schedule(self.settings, self.floor, self.steps_asked)
        self.budget: TimeBudget | None = None  # from the loop's start, where the length is planned by time

    @property
    def total_steps(self) -> int:
        return self.schedule.total_steps

    @property
    def planned(self) -> bool:
        """Whether the length is known: a timed run's is not until its steps are timed."""
        return self.total_steps != UNPLANNED

    def lr(self, step: int) -> float:
        """The learning rate of `step`."""
        return self.peak_lr * self.schedule(step)

    def state_dict(self) -> dict:
        """The schedule, which a checkpoint keeps (checkpointing.py)."""
        return self.schedule.state()

    def load_state_dict(self, state: dict | None) -> None:
        """Go on with the run's own schedule (`state`: state_dict(); None from a checkpoint older than
        it). A timed run goes on with the plan it made, unless the resume gives it a new length (the
        trainer plans that one: a new max_time from this session's throughput)."""
        if (
            state is None or "warmup" not in state
        ):  # a checkpoint of before: a given warmup was cut to a tenth of the steps
            state = {"total_steps": self.steps_asked, **(state or {})}
            if self.settings.warmup_steps is not None:
                state["warmup"] = min(self.settings.warmup_steps, state["total_steps"] // 10)
        self.schedule = Schedule(self.settings, self.floor, **state)
        if self.planned and not self.new_length:
            self.seconds = None

    def replan(self, step: int, total_steps: int) -> None:
        self.schedule = self.schedule.replan(step, total_steps)

    def hold_to(self, seconds_per_step: float) -> None:
        """Raise TooSlow where the steps take far longer than `seconds_per_step` (the recipe's timing),
        early in the budget and until the run has a checkpoint (keep)."""
        self.timed = seconds_per_step

    def spend(self, seconds: float) -> None:
        """`seconds` of a timed run's budget went before its loop (the recipe's timing and trials): the
        loop plans for the rest, so that the run ends when the budget does."""
        if self.seconds:
            self.seconds = max(self.seconds - seconds, MIN_LEFT * self.seconds)

    def start(self, step: int) -> None:
        """The loop starts from `step`: a timed run's clock starts now."""
        self.first_step = step
        if self.seconds:
            self.budget = TimeBudget(self.seconds, self.length.max_time, step)

    def keep(self) -> None:
        """The run has a checkpoint: it is kept, however slow."""
        self.timed = None

    def sync_due(self, step: int) -> bool:
        """Whether the budget needs a sync after `step` (steps done)."""
        return self.budget is not None and self.budget.due(step)

    def clock_to_share(self) -> float:
        """What this rank adds to the sync's all-reduce: rank 0's clock, 0 from the others."""
        return self.budget.clock_to_share() if self.budget and self.master else 0.0

    def synced(self, shared_clock: float, step: int) -> tuple[int, str] | None:
        """A sync after `step`; `shared_clock`: rank 0's clock at the previous sync. Returns (a new
        length, its reason) when the budget plans one, else None."""
        if not self.budget:
            return None
        self.budget.synced(shared_clock, step)
        seconds = None if self.timed is None else self.budget.too_slow(self.timed)
        if seconds is not None:
            remaining = self.budget.remaining()
            assert self.timed is not None  # seconds is too_slow(self.timed)
            raise TooSlow(
                remaining,
                f"step {step} | {1000 * seconds:.0f} ms a step, {seconds / self.timed:.1f}x what the "
                f"recipe timed: the machine got slower; choosing again for the {remaining:.0f} s left",
            )
        return self.budget.plan(step, self.total_steps)


class TimeBudget:
    clock_pending: float | None
    pending_step: int  # the step of clock_pending
    timed_from: tuple[float, int] | None
    timed_last: tuple[float, int] | None
    timed_before: tuple[float, int] | None

    def __init__(self, seconds: float, text: str | None, first_step: int) -> None:
        self.seconds, self.text, self.first_step = seconds, text, first_step
        self.started = time.perf_counter()
        self.clock_pending = None  # this process's clock at its last sync (rank 0's is shared at the next)
        self.timed_from = self.timed_last = None  # (rank 0's clock, step) at the first sync timed and the last
        self.timed_before = None  # ... and at the one before the last
        self.planned = 0  # plans made: the first, then one per PLAN_AT fraction passed
        self.check_every = 1

    def due(self, step: int) -> bool:
        """Whether the budget needs a sync after `step` (steps done)."""
        done = step - self.first_step
        return done <= FIRST_PLAN_STEPS + 2 or step % self.check_every == 0

    def clock_to_share(self) -> float:
        return self.clock_pending or 0.0

    def synced(self, shared_clock: float, step: int) -> None:
        """A sync after `step`; `shared_clock`: rank 0's clock at the previous sync."""
        if self.clock_pending is not None:
            point = (shared_clock, self.pending_step)
            if self.timed_from is None:
                self.timed_from = point
            else:
                self.timed_before, self.timed_last = self.timed_last or self.timed_from, point
        self.clock_pending, self.pending_step = time.perf_counter() - self.started, step

    def seconds_per_step(self) -> float | None:
        """The time of a step, from the steps timed so far; None before FIRST_PLAN_STEPS are."""
        # timed_last is set only once timed_from is
        if self.timed_last is None or self.timed_last[1] - self.timed_from[1] < FIRST_PLAN_STEPS:  # type: ignore[index]
            return None
        assert self.timed_from is not None  # set before timed_last
        (start_clock, start_step), (clock, step) = self.timed_from, self.timed_last
        return (clock - start_clock) / (step - start_step)

    def too_slow(self, timed_by_recipe: float) -> float | None:
        """The time of a step where it is RECHOOSE_SLOWDOWN times `timed_by_recipe` or more, early
        in the budget (RECHOOSE_WITHIN); else None."""
        seconds = self.seconds_per_step()
        # seconds_per_step() is None until timed_last is set
        if seconds is None or self.timed_last[0] > RECHOOSE_WITHIN * self.seconds:  # type: ignore[index]
            return None
        return seconds if seconds >= RECHOOSE_SLOWDOWN * timed_by_recipe else None

    def remaining(self) -> float:
        """Seconds of the budget left, by this process's clock."""
        return self.seconds - (time.perf_counter() - self.started)

    def plan(self, step: int, total_steps: int) -> tuple[int, str] | None:
        """A new length for the run, with its reason, when one is due after `step`; else None."""
        seconds_per_step = self.seconds_per_step()
        if seconds_per_step is None or step + 2 >= total_steps:  # too few steps timed, or the run ends anyway
            return None
        assert self.timed_last is not None  # seconds_per_step() is None until it is set
        assert self.timed_before is not None  # set with timed_last
        clock, timed_step = self.timed_last
        # Whether the budget is spent, and how often to look again, go by the slower of the run's
        # average and its latest steps: a machine that just got slower is seen at once.
        (clock_before, step_before), latest = self.timed_before, seconds_per_step
        if timed_step > step_before:
            latest = max(seconds_per_step, (clock - clock_before) / (timed_step - step_before))
        self.check_every = max(1, int(self.seconds / CHECKS / latest))
        reason = f"--max-time {self.text}: {1000 * seconds_per_step:.1f} ms per step so far"
        if clock + latest * (step - timed_step + 1) >= self.seconds:
            return step + 2, f"--max-time {self.text}: {1000 * latest:.1f} ms per step now; the budget is spent"
        due = self.planned == 0 or (self.planned <= len(PLAN_AT) and clock >= PLAN_AT[self.planned - 1] * self.seconds)
        if not due:
            return None
        self.planned += 1
        return max(step + 2, timed_step + int((self.seconds - clock) / seconds_per_step)), reason
