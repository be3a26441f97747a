"""The model as the run's processes train it: built within the memory settle.py checked, at random
(--init-from's weights, or a resume's, are put in by checkpointing.py's Checkpoints); whole in every
process with its gradients averaged by DDP, or sharded across them (FSDP2, fsdp.py); compiled where
asked; with its optimizers over the parameters a process holds (optim.py)."""

from __future__ import annotations

import contextlib
import inspect
from contextlib import AbstractContextManager
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from gptkit.model.config import ModelConfig
from gptkit.model.lora import LoraConfig, add_adapters
from gptkit.model.model import Block, TransformerLM
from gptkit.runtime.device import Memory

from .fsdp import local, shard
from .optim import build_optimizers
from .processes import Dist
from .sections import Optim, Parallelism

# No buffer sync in DDP's forward: torch 2.13 names it forward_sync_buffers and deprecates the
# older broadcast_buffers, which is all that torch before 2.13 accepts.
NO_FORWARD_SYNC: dict[str, Any] = (
    {"forward_sync_buffers": False}
    if "forward_sync_buffers" in inspect.signature(DistributedDataParallel).parameters
    else {"broadcast_buffers": False}
)


class ParallelModel:
    """`model`: the TransformerLM whose parameters train (sharded in place under FSDP2), which
    evaluations, samples and checkpoints use; `forward`: what a training step calls (the model
    compiled, and wrapped by DDP where the processes hold it whole); `optimizers`."""

    def __init__(
        self,
        model: ModelConfig,
        settings: Parallelism,
        optim: Optim,
        seed: int,
        memory: Memory,
        lora: LoraConfig | None,
        dist: Dist,
    ) -> None:
        """It receives the `model` to build, initialized from `seed`, with the adapters of `lora` (None:
        none); the parallelism and optimizer sections (`settings`, `optim`); the `memory` the run checked
        it needs (its guard makes an allocator's failure one line); and this process's place `dist`."""
        device = dist.device
        self.dist = dist
        torch.manual_seed(seed)
        with memory.guard():
            # A model to shard is made whole in host memory and reaches the device one shard at a time.
            self.model = TransformerLM(model).to("cpu" if dist.sharded else device)
            if lora is not None:
                add_adapters(self.model, lora)
            for block in self.model.layers:
                assert isinstance(block, Block)
                block.activation_checkpointing = settings.activation_checkpointing
            if dist.sharded:
                shard(self.model, device)
            self.optimizers = build_optimizers(self.model, optim, dist.rank, dist.world)
        self.compiled = device.type == "cuda" if settings.compile is None else settings.compile
        # the model compiled (a plain callable to the stubs), or as it is; wrapped by DDP below (no_sync)
        self.forward: Any = torch.compile(self.model) if self.compiled else self.model
        if dist.distributed and not dist.sharded:
            # DDP around the compiled model (nanoGPT's order): dynamo compiles the model's frame
            # inside DDP's forward, where it finds the active DDP module and splits the graph at
            # DDP's bucket boundaries (DDPOptimizer, torch/_dynamo/convert_frame.py), so each
            # bucket's all-reduce overlaps the rest of the backward. No buffer broadcast: the RoPE
            # tables, the only buffers, are the same in every process by construction.
            self.forward = DistributedDataParallel(
                self.forward,
                device_ids=[device.index] if device.type == "cuda" else None,
                gradient_as_bucket_view=True,
                **NO_FORWARD_SYNC,
            )

    def describe(self) -> str:
        """How the processes run the model, for the run's first line."""
        if not self.dist.distributed:
            return "one process"
        return f"torch.distributed {dist.get_backend()}, {'FSDP2' if self.dist.sharded else 'DDP'}"

    def gradient_sync(self, last_micro_step: bool) -> AbstractContextManager[None]:
        """Where the gradients of a micro-step's backward are reduced among the processes. DDP: on
        the last micro-step only, the others accumulate whole gradients locally, as DDP holds them
        anyway. FSDP2: on every micro-step, each reduce-scattered into the shards at once; without
        sync it would keep every block's whole float32 gradient until the last micro-step
        (torch's _fsdp_param_group.py), memory model/info.py's training_memory does not count."""
        if self.dist.distributed and not self.dist.sharded and not last_micro_step:
            return self.forward.no_sync()
        return contextlib.nullcontext()

    def clip(self, max_norm: float) -> torch.Tensor:
        """Clip the gradients to a global L2 norm of `max_norm`; their norm before, a plain tensor."""
        return local(torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm))
