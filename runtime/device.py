"""Which device a stage runs on, and whether a model fits its memory."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

from gptkit.shared.errors import SettingError

DEVICES = ("auto", "cpu", "cuda")
MEMINFO = Path("/proc/meminfo")
# What torch says of an op without a deterministic kernel, under torch.use_deterministic_algorithms(True).
NONDETERMINISTIC = re.compile(r"(\S+) does not have a deterministic implementation")
# What torch's CPU allocator says when malloc fails (a RuntimeError, not torch.OutOfMemoryError):
# "can't allocate memory" on Linux, "not enough memory" on Windows.
CPU_OUT_OF_MEMORY = ("DefaultCPUAllocator: can't allocate memory", "DefaultCPUAllocator: not enough memory")


def size(n_bytes: int) -> str:
    """Bytes for a message, in binary units: 512.0 MiB, 1.50 GiB, 24.00 TiB."""
    for unit, scale in (("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.2f} {unit}"
    return f"{n_bytes / 2**20:.1f} MiB"


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


@contextlib.contextmanager
def deterministic(on: bool) -> Iterator[None]:
    """Where `on`, what runs inside computes with deterministic algorithms only, and the process's
    settings come back after it.

    torch's own flag, strict (warn_only off): the attention kernels (flash, memory-efficient,
    cuDNN) take their deterministic backward only then, and with warn_only they keep the one that
    adds with atomics and only warn; an op with no deterministic kernel at all stops the run as a
    SettingError naming it, rather than running on and breaking the promise. cuBLAS needs a fixed
    workspace, read when its handle is made, so the variable stays set after. Inductor, where this
    torch has the switch, picks its kernels by rule instead of timing them, and falls back to aten
    where it would add with atomics (it reads torch's flag). None of these fixes the order in which
    CPU kernels add, which depends on the thread count: a deterministic training run fixes the
    count (runtime/threads.py)."""
    if not on:
        yield
        return
    import torch._inductor.config as inductor  # here: the import costs a second, and a run that compiles pays it anyway

    before = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    inductor_before = getattr(inductor, "deterministic", None)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    if inductor_before is not None:
        inductor.deterministic = True
    try:
        yield
    except RuntimeError as e:  # torch.compile's errors are RuntimeErrors that quote the op's
        op = NONDETERMINISTIC.search(str(e))
        if op is None:
            raise
        raise SettingError(
            "deterministic",
            f"cannot hold here: {op[1]} has no deterministic implementation in torch {torch.__version__}; "
            "train without it",
        ) from None
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
        if inductor_before is not None:
            inductor.deterministic = inductor_before


def available_memory(device: torch.device) -> int | None:
    """Bytes that new tensors on `device` can take: the CUDA device's free memory, or the
    MemAvailable of /proc/meminfo (what the kernel can give without swapping); None where it
    cannot be told (no /proc/meminfo: not Linux)."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open(MEMINFO) as f:
            line = next((line for line in f if line.startswith("MemAvailable:")), None)
        return int(line.split()[1]) * 1024 if line else None  # "MemAvailable:   24295540 kB"
    except (OSError, ValueError, IndexError):
        return None


def out_of_memory(error: BaseException) -> bool:
    """Whether `error` is an allocation that failed for want of memory."""
    return isinstance(error, (torch.OutOfMemoryError, MemoryError)) or (
        isinstance(error, RuntimeError) and any(message in str(error) for message in CPU_OUT_OF_MEMORY)
    )


class Memory:
    """What a model needs on a device against what the device has, so that one too large for it
    is refused in one line instead of an allocator's traceback or the kernel's OOM kill.

    `needed`: bytes by what they hold (model/info.py's estimate); `setting`: the setting that
    decides the size, which the SettingError names; `what`: the model, as the message starts
    (`tiny: d_model 512 x 4 layers, 17.6M parameters`); `advice`: how to make it fit.
    """

    def __init__(self, needed: dict[str, int], device: torch.device, setting: str, what: str, advice: str) -> None:
        self.needed, self.device, self.setting, self.what, self.advice = needed, device, setting, what, advice
        self.available = available_memory(device)  # before anything is allocated
        total = sum(needed.values())
        parts = (
            f"({', '.join(f'{k} {size(v)}' for k, v in needed.items())})"
            if len(needed) > 1
            else f"of {next(iter(needed))}"
        )
        self.estimate = f"~{size(total)} {parts}"

    def check(self) -> None:
        """Refuse a model whose estimate is more than the memory available (where it is known):
        only what surely cannot fit, the estimate leaving out the allocator's own overhead."""
        if self.available is not None and sum(self.needed.values()) > self.available:
            raise SettingError(
                self.setting,
                f"{self.what}: needs {self.estimate}, more than the {size(self.available)} "
                f"available on {self.device.type}; {self.advice}",
            )

    @contextlib.contextmanager
    def guard(self, note: Callable[[], str] | None = None) -> Iterator[None]:
        """Torch's out-of-memory errors in the block as one line naming the estimate; `note()`:
        what the line adds (which checkpoint is intact)."""
        try:
            yield
        except (RuntimeError, MemoryError) as e:  # torch.OutOfMemoryError is a RuntimeError
            if not out_of_memory(e):
                raise
            available = "" if self.available is None else f", {size(self.available)} were available"
            line = f"{self.what}: out of memory on {self.device.type} (the estimate is {self.estimate}{available}); {self.advice}"
            raise SettingError(self.setting, f"{line}; {note()}" if note else line) from None
