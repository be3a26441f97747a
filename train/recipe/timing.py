"""The recipe's timing of model shapes (ladder.py): a few training steps of each shape on the
run's own device, and what it shows as it goes. The timing of a vocabulary's shapes takes up to
TIMING_SHARE of the budget, minutes of a long one: each timed step is counted as shared/progress.py
shows work (redrawn on a terminal, a line at most every 30 s in logs), and a line ends it with what
each shape took (TimedShapes). Only the process that logs shows it."""

from __future__ import annotations

import math
import statistics
import time
from typing import TYPE_CHECKING, Protocol

import torch

from gptkit.model.config import ModelConfig
from gptkit.model.model import TransformerLM
from gptkit.runtime.threads import Threads
from gptkit.shared.progress import Progress

from ..optim import AdamW
from ..processes import Dist

if TYPE_CHECKING:  # ladder.py imports this module
    from .ladder import Shape

TIMED_STEPS = 2  # per shape, after one warm-up step
TIMING_SHARE = 0.05  # of the budget: the most the timing may take; the climb stops when it is spent
SETTLE_STEPS = 12  # at most, on the smallest shape, while the thread count settles (runtime/threads.py)


class StepTimer(Protocol):
    """choose()'s `seconds_per_step(shape, dropout)`: the time of one training step of `shape` with
    `dropout`, or None where it could not be timed."""

    def __call__(self, shape: Shape, dropout: float = 0.0) -> float | None: ...


def step_timer(
    vocab_size: int, dist: Dist, threads: Threads, budget_seconds: float, shown: TimedShapes | None = None
) -> StepTimer:
    """seconds_per_step(shape) for choose(): the median of TIMED_STEPS training steps of a
    randomly initialized model on random tokens (forward, backward, clipping, AdamW), on this
    process's device (`dist`) with `threads`. Before the first shape is timed its steps let the
    thread count settle, so the shapes are timed with the threads the run will have. Each of the
    run's processes times its share of the batch, and takes the largest time among them
    (Dist.largest), so that all of them take the same shape. `shown`: where each step and each
    shape's time are shown."""
    device, agree, world = dist.device, dist.largest, dist.world
    autocast = torch.autocast("cuda", torch.bfloat16) if device.type == "cuda" else torch.autocast("cpu", enabled=False)
    deadline = time.monotonic() + TIMING_SHARE * budget_seconds
    settled, last = False, None

    def seconds_per_step(shape: Shape, dropout: float = 0.0) -> float | None:
        nonlocal settled, last
        # the smallest shape is always timed, and a shape timed once again with dropout
        if settled and shape != last and agree(float(time.monotonic() > deadline)):
            return None
        last = shape
        if shown is not None:
            shown.timing(shape, dropout)
        try:
            model = TransformerLM(ModelConfig(**shape.model(vocab_size, dropout))).to(device)
            optimizer = AdamW([(list(model.named_parameters()), 0.0)], lr=1e-4, fused=device.type == "cuda")
            batch = torch.randint(vocab_size, (max(1, shape.batch // world), shape.context + 1), device=device)

            def step() -> float:
                started = time.perf_counter()
                with autocast:
                    _, loss = model(batch[:, :-1], batch[:, 1:])
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                model.zero_grad(set_to_none=True)
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                if shown is not None:
                    shown.step()
                return time.perf_counter() - started

            for _ in range(SETTLE_STEPS if not settled else 0):
                threads.record(step())
                if threads.settled:
                    break
            settled = True
            step()
            seconds = statistics.median(step() for _ in range(TIMED_STEPS))
        except torch.OutOfMemoryError:
            seconds = math.inf
        finally:
            model = optimizer = batch = None  # type: ignore[assignment]  # dropped, so that empty_cache frees them

            if device.type == "cuda":
                torch.cuda.empty_cache()
        seconds = agree(seconds)
        if not math.isfinite(seconds):
            return None
        if shown is not None:
            shown.took(seconds)
        return seconds

    return seconds_per_step


def shape_name(shape: Shape, dropout: float = 0.0) -> str:
    return f"d {shape.d_model} x {shape.n_layers}{' with dropout' if dropout else ''}"


class TimedShapes:
    """The timing of one vocabulary's shapes (step_timer): each timed step counted as it goes, then
    one line of what a step of each shape took and the shape chosen (close)."""

    def __init__(self, vocabulary: str, quiet: bool = False) -> None:
        self.vocabulary = vocabulary
        # short, to be redrawn within a terminal's 80 columns: `recipe: timing 1,024: 12 steps, d 96 x 3, ...`
        self.progress = Progress(f"recipe: timing {vocabulary}", "steps", quiet=quiet)
        self.shape, self.dropout = "", 0.0  # the one being timed
        self.timed: list[str] = []

    def timing(self, shape: Shape, dropout: float) -> None:
        self.shape, self.dropout = shape_name(shape), dropout

    def step(self) -> None:
        self.progress.update(self.progress.done + 1, self.shape + (" + dropout" if self.dropout else ""))

    def took(self, seconds: float) -> None:
        if self.dropout and self.timed:  # a shape is timed with dropout right after it is timed without
            self.timed[-1] += f" ({1000 * seconds:,.0f} with dropout)"
        else:
            self.timed.append(f"{self.shape} {1000 * seconds:,.0f}")

    def close(self, chosen: Shape, dropout: float) -> None:
        self.progress.close(
            f"recipe: vocabulary {self.vocabulary}, ms a step: {', '.join(self.timed)}; "
            f"takes {shape_name(chosen, dropout)}"
        )
