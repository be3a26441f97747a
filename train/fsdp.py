"""`--parallel fsdp`: the model's weights, gradients and optimizer state sharded across the
processes with FSDP2 (torch.distributed.fsdp.fully_shard), as torchtitan does, and the whole
tensors a checkpoint holds gathered from the shards and put back into them.

Each transformer block is a unit, and the root (embedding, final norm, LM head) another: a
block's weights are gathered just before its forward and backward and freed after, and its
gradients are reduce-scattered as soon as they are made, so a process holds its 1/N shard of
everything plus the whole weights of about one block at a time. A parameter is a DTensor
sharded along its first dimension (uneven sizes as torch.chunk splits them); AdamW's moments,
made with zeros_like, are sharded the same way, and its elementwise arithmetic on the shards is
the arithmetic on the whole tensors.

Checkpoints keep one format (model/checkpoint.py): a tensor is gathered whole, one at a time,
and rank 0 keeps it in host memory to write; a resume puts each whole tensor back as the shard
of it a process holds, so it may resume on another number of processes, or without FSDP. The
GPU never holds the whole model; host memory does, in every process while the model is built
(the trainer shards a model made on the CPU) and in rank 0 while a checkpoint is written.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard, register_fsdp_forward_method
from torch.distributed.tensor import DTensor, distribute_tensor

from gptkit.model.model import TransformerLM


def shard(model: TransformerLM, device: torch.device) -> None:
    """Shard `model` (a TransformerLM, in host memory) in place across the process group, onto
    `device`: each block, then the root; FSDP moves each unit's weights to the device as it shards
    them, so the device never holds the whole model."""
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    for block in model.layers:
        fully_shard(block, mesh=mesh, mp_policy=precision(device))
    fully_shard(model, mesh=mesh, mp_policy=precision(device))
    # Validation calls token_losses, not forward: it too must gather the root's weights first.
    register_fsdp_forward_method(model, "token_losses")


def precision(device: torch.device) -> MixedPrecisionPolicy:
    """On CUDA the blocks compute in bf16 from gathered bf16 copies of the float32 weights, and
    gradients are reduced in float32, where DDP's autocast computes the same matrix products in
    bf16. A block's inputs are not cast (as torchtitan): the RoPE tables stay float32 and rotate
    in float32, as under DDP; the activations are bf16 already, from the root's bf16 embedding."""
    if device.type != "cuda":
        return MixedPrecisionPolicy()
    return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, cast_forward_inputs=False)


def whole(tensors: dict, keep: bool) -> dict:
    """`tensors` (name -> tensor) whole on the CPU where `keep` (the process that writes), else
    {}. A sharded tensor is gathered from every process, one tensor at a time: every process
    must call this, in the same order."""
    gathered = {}
    for name, tensor in tensors.items():
        if isinstance(tensor, DTensor):
            tensor = tensor.full_tensor()
        if keep:
            gathered[name] = tensor.detach().cpu()
    return gathered


def placed(tensor: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A whole `tensor` as `like` holds it: this process's shard where `like` is sharded, else
    `tensor` itself (copy_ moves it to the device)."""
    if isinstance(like, DTensor):
        return distribute_tensor(
            tensor.to(like.device, like.dtype), like.device_mesh, like.placements, src_data_rank=None
        )
    return tensor


def local(value: torch.Tensor) -> torch.Tensor:
    """A value a sharded step computed (the gradient norm) as a plain tensor."""
    return value.full_tensor() if isinstance(value, DTensor) else value
