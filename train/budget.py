"""How long a --max-time run trains: its steps planned from the throughput it measures.

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

FIRST_PLAN_STEPS = 3  # timed steps before the first plan
# A run whose steps take this many times what the recipe timed, found in the first RECHOOSE_WITHIN
# of its budget, is better served by a shape chosen for the machine as it is now.
RECHOOSE_SLOWDOWN, RECHOOSE_WITHIN = 3.0, 0.25
PLAN_AT = (0.05, 0.1, 0.25, 0.5, 0.75, 0.9)  # fractions of the budget where the length is planned again
CHECKS = 100  # syncs the budget asks for over a run: it is checked about every 1% of it


class TimeBudget:
    def __init__(self, seconds, text, first_step):
        self.seconds, self.text, self.first_step = seconds, text, first_step
        self.started = time.perf_counter()
        self.clock_pending = None  # this process's clock at its last sync (rank 0's is shared at the next)
        self.timed_from = self.timed_last = None  # (rank 0's clock, step) at the first sync timed and the last
        self.timed_before = None  # ... and at the one before the last
        self.planned = 0  # plans made: the first, then one per PLAN_AT fraction passed
        self.check_every = 1

    def start(self):
        """The loop starts now."""
        self.started = time.perf_counter()

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
