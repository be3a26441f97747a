"""What a run reports: each line it logs beside the record metrics.jsonl keeps of it (run_dir.py),
for a training step, an evaluation, a sample and a re-planned schedule, as (record, line) pairs
that the trainer writes."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from gptkit.runtime.threads import Threads

from .budget import Planner
from .processes import Dist

# Dense bf16 FLOP/s of one GPU, by what its name (torch.cuda.get_device_name) contains, the first
# match. NVIDIA's H100 and H200 datasheets give bf16 with sparsity, twice the dense figure: H100
# SXM ("NVIDIA H100 80GB HBM3") 1,979 -> 989 TFLOP/s, PCIe 1,513 -> 756, NVL 1,671 -> 835; H200
# SXM 989, NVL 835. The A100's (SXM and PCIe): 312 dense.
PEAK_BF16_FLOPS = (
    ("H100 PCIe", 756e12),
    ("H100 NVL", 835e12),
    ("H200 NVL", 835e12),
    ("H100", 989e12),
    ("H200", 989e12),
    ("A100", 312e12),
)


class StepReport:
    """A logged training step: its loss, learning rate and throughput (MFU on CUDA, the threads
    on a CPU), and how far the run is (`planner`: train/budget.py) since the loop started."""

    def __init__(self, planner: Planner, threads: Threads, flops_per_token: float, dist: Dist) -> None:
        """`dist`: this process's place, on its device among `dist.world` processes."""
        self.planner, self.threads, self.flops_per_token = planner, threads, flops_per_token
        self.device, self.world = dist.device, dist.world
        self.peak_flops = _peak_flops(dist.device)  # per GPU; None on a CPU or an unlisted GPU: no MFU

    def __call__(
        self, step: int, tokens: int, loss: float, grad_norm: float, lr: float, tokens_per_s: float, elapsed: float
    ) -> tuple[dict[str, Any], str]:
        record: dict[str, Any] = {
            "step": step,
            "tokens": tokens,
            "loss": loss,
            "ppl": math.exp(min(loss, 50)),
            "lr": lr,
            "grad_norm": grad_norm,
            "tokens_per_s": tokens_per_s,
            "elapsed_s": elapsed,
        }
        mfu = self._mfu(tokens_per_s)
        total, planned = self.planner.total_steps, self.planner.planned
        progress = f"{total} ({100 * step / total:.1f}%)" if planned else "? (timing the steps)"
        line = (
            f"step {step}/{progress} | loss {loss:.4f} | ppl {record['ppl']:.2f} | lr {lr:.2e} | "
            f"grad norm {grad_norm:.3f} | tokens {tokens:,} | {tokens_per_s:,.0f} tok/s"
        )
        if mfu is not None:
            record["mfu"] = mfu
            line += f" | MFU {100 * mfu:.1f}%"
        if self.device.type == "cpu":  # what a user looks at first when the throughput seems wrong
            record["threads"] = self.threads.count
            line += f" | {self.threads.count} thread{'s' if self.threads.count > 1 else ''}"
        eta = elapsed / max(step - self.planner.first_step, 1) * (total - step)
        line += f" | {_hms(elapsed)} elapsed, ETA {_hms(eta) if planned else '?'}"
        return record, line

    def _mfu(self, tokens_per_s: float) -> float | None:
        return None if self.peak_flops is None else self.flops_per_token * tokens_per_s / (self.peak_flops * self.world)


class LogWindow:
    """The seconds the training steps between two log lines took: the `clock` since the window
    began, less the time `paused` within it (the evaluations, samples and checkpoints after a
    line), which would otherwise lower the next line's tokens/s and MFU. `tokens`: the run's tokens
    when the window began; `began`: when the loop began."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.began = clock()
        self.restart()

    def begin(self, tokens: int) -> None:
        """The loop begins, at `tokens` seen."""
        self.began = self.clock()
        self.restart(tokens)

    def restart(self, tokens: int = 0) -> None:
        self.start, self.excluded, self.tokens = self.clock(), 0.0, tokens

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        start = self.clock()
        try:
            yield
        finally:
            self.excluded += self.clock() - start

    def seconds(self) -> float:
        return self.clock() - self.start - self.excluded


def _peak_flops(device: torch.device) -> float | None:
    return peak_bf16_flops(torch.cuda.get_device_name(device)) if device.type == "cuda" else None


def peak_bf16_flops(name: str) -> float | None:
    """The dense bf16 FLOP/s of the GPU `name`d (PEAK_BF16_FLOPS); None for one not listed."""
    return next((flops for key, flops in PEAK_BF16_FLOPS if key in name), None)


def validation_report(
    step: int,
    tokens: int,
    val_loss: float,
    val_bpb: float,
    count: int,
    hellaswag: tuple[float, float, int] | None = None,
) -> tuple[dict[str, Any], str]:
    """An evaluation: `count` tokens of the val split; `hellaswag`: (acc, acc_norm, items) with
    --eval-hellaswag."""
    val_ppl = math.exp(min(val_loss, 50))
    record = {"step": step, "tokens": tokens, "val_loss": val_loss, "val_ppl": val_ppl, "val_bpb": val_bpb}
    line = f"step {step} | val loss {val_loss:.4f} | val ppl {val_ppl:.2f} | val bpb {val_bpb:.4f} ({count:,} tokens)"
    if hellaswag:
        acc, acc_norm, items = hellaswag
        record.update(hellaswag_acc=acc, hellaswag_acc_norm=acc_norm)
        line += f" | hellaswag acc {acc:.4f} acc_norm {acc_norm:.4f} ({items:,} items)"
    return record, line


def sample_report(step: int, text: str) -> tuple[dict[str, Any], str]:
    return {"step": step, "sample": text}, f"step {step} | sample: {text!r}"


def replan_report(
    step: int, tokens: int, before: int | str, total: int, lr: float, reason: str
) -> tuple[dict[str, Any], str]:
    """The schedule re-planned from `step` to end after `total` steps, going on from `lr`;
    `before`: the length it had ("?": none yet)."""
    return (
        {"step": step, "tokens": tokens, "replan": {"total_steps": total, "lr": lr, "reason": reason}},
        f"step {step} | schedule re-planned: {before} -> {total} steps ({reason}); the learning rate goes on from {lr:.2e}",
    )


def _hms(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
