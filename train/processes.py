"""This process's place among the run's processes: `processes(settings)` starts the process group
where there is one and gives the Dist, one frozen value for the distributed state (as
torchtitan's ParallelDims, for the one dimension gptkit parallelizes on)."""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from gptkit.runtime.device import resolve_device

from .sections import Parallelism


@dataclass(frozen=True)
class Dist:
    """This process's place among the run's processes. `distributed`: a process group runs the
    collectives (under torchrun, even of one process, so that one GPU runs what eight would; or
    --parallel fsdp in one process, a group of itself); `sharded`: the model is sharded across
    the group (FSDP2, fsdp.py), where otherwise every process holds it whole (DDP). Without a group
    every collective here is a no-op."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    distributed: bool = False
    sharded: bool = False

    @property
    def master(self) -> bool:
        """The process that writes the run's files and logs: rank 0."""
        return self.rank == 0

    def all_reduce(self, tensor: torch.Tensor) -> None:
        """Sum `tensor` over the processes, in place (gloo has no average)."""
        if self.distributed:
            dist.all_reduce(tensor)

    def largest(self, value: float) -> float:
        """The largest `value` among the processes: the recipe's timings, so that all take one shape."""
        if not self.distributed:
            return float(value)
        shared = torch.tensor(float(value), device=self.device)
        dist.all_reduce(shared, op=dist.ReduceOp.MAX)
        return shared.item()

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()


@contextlib.contextmanager
def processes(settings: Parallelism) -> Iterator[Dist]:
    """This process's Dist (from torchrun's RANK, WORLD_SIZE and LOCAL_RANK, and the settings' device
    and parallel), its process group started where it has one and destroyed when the block ends."""
    distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    rank, world = (int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])) if distributed else (0, 1)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = resolve_device(settings.device, local_rank)
    backend: dict[str, Any] = {
        "backend": "nccl" if device.type == "cuda" else "gloo",
        "device_id": device if device.type == "cuda" else None,
    }
    if distributed:
        dist.init_process_group(**backend)
    elif settings.parallel == "fsdp":  # shards over a group of this process alone, as asked
        dist.init_process_group(**backend, store=dist.HashStore(), rank=0, world_size=1)
        distributed = True
    try:
        yield Dist(rank, world, local_rank, device, distributed, distributed and settings.parallel == "fsdp")
    finally:
        if distributed:
            # The Trainer first, while the interpreter is whole: its batch generator refers back to
            # it, so only the garbage collector frees it and its DDP wrapper, and freed at Python's
            # shutdown, gloo's work objects can abort the process (torch's c10d notes the hazard;
            # a worker died of SIGABRT at exit in 1 of 4 runs of the suite, likely this).
            gc.collect()
            dist.destroy_process_group()
