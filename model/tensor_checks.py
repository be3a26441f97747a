"""What a checkpoint's readers refuse (CheckpointError), and the checks of the tensors they read: each
one the model needs, of its shape and of a dtype it takes, and no other (check_tensors), every value
finite (check_finite). model/checkpoint.py reads gptkit's checkpoints with them, model/hf/load.py
Hugging Face models."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from gptkit.shared.errors import InputError
from gptkit.shared.files import StrPath

# The dtypes a checkpoint (and a Hugging Face model import-hf reads) may hold, by their safetensors names.
DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}


class CheckpointError(InputError):
    """A checkpoint directory that is missing, incomplete or inconsistent."""


def check_tensors(
    tensors: Mapping[str, torch.Tensor],
    expected: Mapping[str, torch.Tensor],
    path: StrPath,
    file_of: Mapping[str, StrPath] | None = None,
) -> None:
    """Refuse, in one line naming the file, `tensors` (name -> tensor) that are not the `expected`
    ones (name -> a tensor of the shape the config gives it, on any device): one missing, of
    another shape or of a dtype not in DTYPES, or one more. `path`: the file they were read from;
    `file_of`: name -> file, where they were read from several."""

    def where(name):
        return (file_of or {}).get(name, path)

    for name, tensor in expected.items():
        if name not in tensors:
            raise CheckpointError(f"{path}: no tensor {name!r}, which the config needs")
        if tensors[name].shape != tensor.shape:
            raise CheckpointError(
                f"{where(name)}: tensor {name!r} has shape {tuple(tensors[name].shape)}, the config "
                f"needs {tuple(tensor.shape)}"
            )
        if tensors[name].dtype not in DTYPES.values():
            raise CheckpointError(
                f"{where(name)}: tensor {name!r} is {tensors[name].dtype}; expected float32, bfloat16 or "
                "float16 (quantized weights are not supported)"
            )
    extra = sorted(set(tensors) - set(expected))
    if extra:
        raise CheckpointError(f"{where(extra[0])}: tensor {extra[0]!r} is not part of the model the config describes")


def check_finite(
    tensors: Mapping[str, torch.Tensor], path: StrPath, file_of: Mapping[str, StrPath] | None = None
) -> None:
    """Refuse, in one line naming the file, a tensor of `tensors` (name -> tensor) that holds a NaN
    or an infinity. `path`: the file they were read from; `file_of`: name -> file, where they were
    read from several."""
    for name, tensor in tensors.items():
        if not torch.isfinite(tensor).all():
            raise CheckpointError(
                f"{(file_of or {}).get(name, path)}: tensor {name!r} holds NaN or infinite values; "
                "expected finite numbers"
            )
