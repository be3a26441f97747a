"""How long a run trains: the steps --max-steps or --max-tokens ask for, or under --max-time
steps planned from the throughput the run measures. The Planner keeps the run's length and its
learning-rate schedule beside the loop, which asks it when to sync and, after a sync, whether
the length changes; a TimeBudget plans a --max-time run.

A step's time is known only once steps have run, and it changes on the way (a machine that gets
busy, evaluations). So a timed run starts without a length, measures its first steps (after the
first one, which pays for warm-ups and compilation), and plans its length early, then plans it
again at fixed fractions of the budget from all the steps it has timed; each plan re-plans the
schedule (train/optim.py), warmup included, so the run always has a complete schedule ending at
min_lr on time. Between plans a run that finds its budget spent (a machine that got much slower)
ends at once, in the two steps the schedule needs to reach min_lr. Plans add no evaluation and
no checkpoint: the loop decides those after the plan.

The clock is rank 0's, taken at a sync once the device had finished, and it travels to every
rank in the next sync's all-reduce, so that all of them plan the same length.
"""
from __future__ import annotations

import time

from .config import parse_duration
from .optim import Schedule

UNPLANNED = 10**12  # the length of a --max-time run until its throughput is measured
FIRST_PLAN_STEPS = 3  # timed steps before the first plan
# A run whose steps take this many times what the recipe timed, found in the first RECHOOSE_WITHIN
# of its budget, is better served by a shape chosen for the machine as it is now.
RECHOOSE_SLOWDOWN, RECHOOSE_WITHIN = 3.0, 0.25
PLAN_AT = (0.05, 0.1, 0.25, 0.5, 0.75, 0.9)  # fractions of the budget where the length is planned again
CHECKS = 100  # syncs the budget asks for over a run: it is checked about every 1% of it


def steps_asked(config, tokens_per_step) -> int | None:
    """The steps of a run's length: max_steps, or the steps that train on max_tokens (the last one
    whole); None where the length is --max-time's, planned while the run trains."""
    if config.max_tokens:
        return -(-config.max_tokens // tokens_per_step)
    return None if config.max_time else config.max_steps


class Planner:
    """The run's length and its learning-rate schedule (train/optim.py): fixed by the settings, or
    planned by a TimeBudget while a --max-time run trains. `master`: rank 0, whose clock every rank
    plans by."""

    def __init__(self, config, tokens_per_step, master, new_length=False):
        """`new_length`: a resume gives the run a length other than its own (prepare.Run)."""
        self.config, self.master, self.new_length = config, master, new_length
        # the --max-time budget; None where the length is fixed (or, on a resume, already planned)
        self.seconds = parse_duration(config.max_time) if config.max_time else None
        self.steps_asked = steps_asked(config, tokens_per_step) or UNPLANNED
        self.schedule = Schedule(config, self.steps_asked)
        self.budget = None  # a TimeBudget, from the loop's start, where the length is planned by time

    @property
    def total_steps(self):
        return self.schedule.total_steps

    @property
    def planned(self):
        """Whether the length is known: a --max-time run's is not until its steps are timed."""
        return self.total_steps != UNPLANNED

    def state_dict(self):
        """The schedule, which a checkpoint keeps (checkpointing.py)."""
        return self.schedule.state()

    def load_state_dict(self, state):
        """Go on with the run's own schedule (`state`: state_dict(); None from a checkpoint older
        than it). A timed run goes on with the plan it made, unless the resume gives it a new
        length (the trainer plans that one: a new --max-time from this session's throughput)."""
        if state is None or "warmup" not in state:  # a checkpoint of before: a given warmup was cut to a tenth of the steps
            state = {"total_steps": self.steps_asked, **(state or {})}
            if self.config.warmup_steps is not None:
                state["warmup"] = min(self.config.warmup_steps, state["total_steps"] // 10)
        self.schedule = Schedule(self.config, **state)
        if self.planned and not self.new_length:
            self.seconds = None

    def replan(self, step, total_steps):
        self.schedule = self.schedule.replan(step, total_steps)

    def start(self, step):
        """The loop starts from `step`: a timed run's clock starts now."""
        if self.seconds:
            self.budget = TimeBudget(self.seconds, self.config.max_time, step)

    def sync_due(self, step):
        """Whether the budget needs a sync after `step` (steps done)."""
        return bool(self.budget) and self.budget.due(step)

    def clock_to_share(self):
        """What this rank adds to the sync's all-reduce: rank 0's clock, 0 from the others."""
        return self.budget.clock_to_share() if self.budget and self.master else 0.0

    def synced(self, shared_clock, step):
        if self.budget:
            self.budget.synced(shared_clock, step)

    def too_slow(self, timed_by_recipe):
        """TimeBudget.too_slow; None where the run is not timed."""
        return self.budget.too_slow(timed_by_recipe) if self.budget else None

    def remaining(self):
        return self.budget.remaining()

    def plan(self, step):
        """(a new length, its reason) when a timed run plans one after `step`; else None."""
        return self.budget.plan(step, self.total_steps) if self.budget else None


class TimeBudget:
    def __init__(self, seconds, text, first_step):
        self.seconds, self.text, self.first_step = seconds, text, first_step
        self.started = time.perf_counter()
        self.clock_pending = None  # this process's clock at its last sync (rank 0's is shared at the next)
        self.timed_from = self.timed_last = None  # (rank 0's clock, step) at the first sync timed and the last
        self.timed_before = None  # ... and at the one before the last
        self.planned = 0  # plans made: the first, then one per PLAN_AT fraction passed
        self.check_every = 1

    def due(self, step):
        """Whether the budget needs a sync after `step` (steps done)."""
        done = step - self.first_step
        return done <= FIRST_PLAN_STEPS + 2 or step % self.check_every == 0

    def clock_to_share(self):
        return self.clock_pending or 0.0

    def synced(self, shared_clock, step):
        """A sync after `step`; `shared_clock`: rank 0's clock at the previous sync."""
        if self.clock_pending is not None:
            point = (shared_clock, self.pending_step)
            if self.timed_from is None:
                self.timed_from = point
            else:
                self.timed_before, self.timed_last = self.timed_last or self.timed_from, point
        self.clock_pending, self.pending_step = time.perf_counter() - self.started, step

    def seconds_per_step(self):
        """The time of a step, from the steps timed so far; None before FIRST_PLAN_STEPS are."""
        if self.timed_last is None or self.timed_last[1] - self.timed_from[1] < FIRST_PLAN_STEPS:
            return None
        (start_clock, start_step), (clock, step) = self.timed_from, self.timed_last
        return (clock - start_clock) / (step - start_step)

    def too_slow(self, timed_by_recipe):
        """The time of a step where it is RECHOOSE_SLOWDOWN times `timed_by_recipe` or more, early
        in the budget (RECHOOSE_WITHIN); else None."""
        seconds = self.seconds_per_step()
        if seconds is None or self.timed_last[0] > RECHOOSE_WITHIN * self.seconds:
            return None
        return seconds if seconds >= RECHOOSE_SLOWDOWN * timed_by_recipe else None

    def remaining(self):
        """Seconds of the budget left, by this process's clock."""
        return self.seconds - (time.perf_counter() - self.started)

    def plan(self, step, total_steps):
        """A new length for the run, with its reason, when one is due after `step`; else None."""
        seconds_per_step = self.seconds_per_step()
        if seconds_per_step is None or step + 2 >= total_steps:  # too few steps timed, or the run ends anyway
            return None
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
