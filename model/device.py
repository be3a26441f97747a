"""Which device a stage runs on."""
from __future__ import annotations

import torch

from gptkit.shared.errors import SettingError

DEVICES = ("auto", "cpu", "cuda")


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    """`auto`: the CUDA device of this process (torchrun's LOCAL_RANK) if there is one, else the
    CPU; `cuda` without a CUDA device is an error naming the setting."""
    if name not in DEVICES:
        raise SettingError("device", f"{name!r}: expected one of {', '.join(DEVICES)}")
    if name == "cuda" or (name == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise SettingError("device", "cuda: no CUDA device is available")
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")
