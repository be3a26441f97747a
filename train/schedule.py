"""The learning rate of each step, as a fraction of the peak: cosine_lr or wsd_lr, with a warmup, and
the Schedule a run keeps of them (budget.py's Planner plans it; a checkpoint holds it)."""

from __future__ import annotations

import math
from typing import Any

from .sections import LRSchedule

WARMUP_FRACTION = 0.05  # of the planned steps, where warmup_steps is not given


def cosine_lr(t: int, lr_max: float, lr_min: float, warmup_iters: int, cosine_cycle_iters: int) -> float:
    """The learning rate at iteration `t` of a cosine schedule with warmup, as used in LLaMA:
    lr_max * t / warmup_iters while t < warmup_iters; from lr_max down to lr_min along half a
    cosine for warmup_iters <= t <= cosine_cycle_iters; lr_min after."""
    if t < warmup_iters:
        return t / warmup_iters * lr_max
    if t > cosine_cycle_iters or cosine_cycle_iters <= warmup_iters:  # (a cycle of no length ends at once)
        return lr_min
    progress = (t - warmup_iters) / (cosine_cycle_iters - warmup_iters)
    return lr_min + 0.5 * (1 + math.cos(math.pi * progress)) * (lr_max - lr_min)


def wsd_lr(t: int, lr_max: float, lr_min: float, warmup_iters: int, cooldown_start: int, last_iter: int) -> float:
    """Warmup-stable-decay: the same warmup, lr_max until `cooldown_start`, then a straight line
    to lr_min at `last_iter`."""
    if t < warmup_iters:
        return t / warmup_iters * lr_max
    if t < cooldown_start:
        return lr_max
    return lr_max + (lr_min - lr_max) * min((t - cooldown_start + 1) / max(last_iter - cooldown_start + 1, 1), 1.0)


def warmup_steps(settings: LRSchedule, total_steps: int) -> int:
    """The warmup of a run of `total_steps`: warmup_steps as given, else WARMUP_FRACTION of the steps."""
    return round(WARMUP_FRACTION * total_steps) if settings.warmup_steps is None else settings.warmup_steps


class Schedule:
    """The learning rate of every step, as a fraction of the peak, for a run that ends after
    `total_steps`: cosine_lr (to min_lr at decay_steps, by default the last step) or wsd_lr
    (cooling down over the last cooldown_fraction of the steps), with the warmup of warmup_steps().

    A run's length can change on the way: `--resume --max-steps N` extends or shortens it, and
    `--max-time` plans it from the measured throughput. `replan(step, total_steps)` goes on from
    `step` towards the new end without a jump: the fresh plan for the new length where it takes
    the same value at `step`; else, if the run was still warming up, a straight line from the
    current value up to the peak where the new warmup ends (one step on, if that is past), and
    the new plan's decay from there; else from the current value down to min_lr along the
    schedule's own curve (half a cosine, or wsd's straight line) over the remaining steps.
    """

    def __init__(
        self,
        settings: LRSchedule,
        floor: float,
        total_steps: int,
        replanned_at: int | None = None,
        scale_then: float | None = None,
        rising: bool = False,
        warmup: int | None = None,
    ) -> None:
        """`floor`: min_lr as a fraction of the peak; `warmup`: the steps of warmup of a schedule saved
        (state()); None: warmup_steps()."""
        self.settings, self.total_steps = settings, total_steps
        self.replanned_at, self.scale_then, self.rising = replanned_at, scale_then, rising
        self.warmup = warmup_steps(settings, total_steps) if warmup is None else warmup
        if rising:  # the warmup goes on from the re-plan to the peak
            assert replanned_at is not None
            self.warmup = max(self.warmup, replanned_at + 1)
        self.floor = floor

    def _plan(self, step: int) -> float:
        c, last = self.settings, self.total_steps - 1
        if c.schedule == "cosine":
            return cosine_lr(step, 1.0, self.floor, self.warmup, last if c.decay_steps is None else c.decay_steps)
        return wsd_lr(
            step, 1.0, self.floor, self.warmup, self.total_steps - int(c.cooldown_fraction * self.total_steps), last
        )

    def __call__(self, step: int) -> float:
        at, then = self.replanned_at, self.scale_then
        if at is None or step < at:
            return self._plan(step)
        assert then is not None  # a re-plan records both (replan)
        if self.rising:
            return then + (1.0 - then) * (step - at) / (self.warmup - at) if step < self.warmup else self._plan(step)
        ratio = min((step - at) / max(self.total_steps - 1 - at, 1), 1.0)
        shape = 0.5 * (1.0 + math.cos(math.pi * ratio)) if self.settings.schedule == "cosine" else 1.0 - ratio
        return self.floor + shape * (then - self.floor)

    def warming_up(self, step: int) -> bool:
        """Whether `step` rises towards the peak (a re-planned decay never rises again)."""
        decaying = self.replanned_at is not None and not self.rising and step >= self.replanned_at
        return step < self.warmup and not decaying

    def replan(self, step: int, total_steps: int) -> Schedule:
        fresh = Schedule(self.settings, self.floor, total_steps)
        now = self(step)
        if fresh(step) == now:
            return fresh
        return Schedule(self.settings, self.floor, total_steps, step, now, rising=self.warming_up(step))

    def state(self) -> dict[str, Any]:
        return {
            "total_steps": self.total_steps,
            "replanned_at": self.replanned_at,
            "scale_then": self.scale_then,
            "rising": self.rising,
            "warmup": self.warmup,
        }
