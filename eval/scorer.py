"""A model ready to score with, as `gptkit eval` and training validation run it: in eval mode, on
its device, under bf16 autocast on CUDA, with torch's CPU threads measured batch by batch
(runtime/threads.py). Every scoring function of the eval library takes a checkpoint directory or
a Scorer: load one once to score a checkpoint several ways.

    from gptkit.eval import Scorer, hellaswag_accuracy, text_loss

    scorer = Scorer.load("runs/demo/latest", device="cpu")
    print(text_loss(scorer, ["book.txt"]).bpb, hellaswag_accuracy(scorer).acc_norm)
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from os import PathLike

import torch

from gptkit.model.checkpoint import bos_id as checkpoint_bos_id
from gptkit.model.checkpoint import load_model
from gptkit.model.model import TransformerLM
from gptkit.runtime.device import resolve_device
from gptkit.runtime.threads import torch_threads
from gptkit.shared.errors import InputError, SettingError
from gptkit.shared.progress import Progress
from gptkit.tokenizer import Tokenizer

StrPath = str | PathLike[str]  # a path as a caller gives it


class Scorer:
    """`model` and its `tokenizer`, set to score: `bos_id` is the id a text starts with (None:
    none; model/checkpoint.py, bos_id: a gptkit checkpoint's end-of-text id), `threads` fixes
    torch's CPU threads (None: measured under load), `checkpoint` names the model in messages.
    The model is put in eval mode and stays on its device."""

    def __init__(
        self,
        model: TransformerLM,
        tokenizer: Tokenizer,
        bos_id: int | None,
        *,
        threads: int | None = None,
        checkpoint: StrPath | None = None,
    ):
        self.model, self.tokenizer, self.bos_id, self.checkpoint = model.eval(), tokenizer, bos_id, checkpoint
        self.device = next(model.parameters()).device
        self.threads = torch_threads(threads, self.device)
        # as training validation runs: its losses and these are then the same numbers
        on_cuda = self.device.type == "cuda"
        self.autocast = torch.autocast("cuda", torch.bfloat16) if on_cuda else contextlib.nullcontext()

    @classmethod
    def load(cls, checkpoint: StrPath, device: str = "auto", threads: int | None = None) -> Scorer:
        """The checkpoint directory `checkpoint` loaded on `device` ("auto", "cpu" or "cuda")."""
        model, tokenizer = load_model(checkpoint, resolve_device(device))
        return cls(model, tokenizer, checkpoint_bos_id(checkpoint, tokenizer), threads=threads, checkpoint=checkpoint)

    @property
    def context_length(self) -> int:
        return self.model.config.context_length

    def refusal(self, problem: str) -> InputError:
        """The error that the model cannot be scored because of `problem`: a SettingError of the
        setting `checkpoint` where the model came from one."""
        if self.checkpoint is None:
            return InputError(f"the model: {problem}")
        return SettingError("checkpoint", f"{self.checkpoint}: {problem}")

    def each_batch(self, progress: Progress, before: int = 0) -> Callable[[int], None]:
        """What follows each batch: its time, to the thread count, and the count done (`before` +
        the batch's own count), to the progress line."""
        last = time.perf_counter()

        def done(count):
            nonlocal last
            now = time.perf_counter()
            self.threads.record(now - last)
            last = now
            progress.update(before + count)

        return done


Checkpoint = StrPath | Scorer  # what every scoring function scores: a checkpoint directory, or one loaded


def scorer_of(checkpoint: Checkpoint, device: str, threads: int | None) -> Scorer:
    """`checkpoint` loaded (Scorer.load), or the Scorer it is; a Scorer is loaded already, so a
    `device` or `threads` given with one is refused."""
    if not isinstance(checkpoint, Scorer):
        return Scorer.load(checkpoint, device, threads)
    if device != "auto":
        raise SettingError("device", f"{device!r}: not with a Scorer, which is on its model's device already")
    if threads is not None:
        raise SettingError("threads", f"{threads!r}: not with a Scorer, which has its threads already")
    return checkpoint


def checkpoint_path(checkpoint: Checkpoint) -> StrPath | None:
    """The directory `checkpoint` was loaded from (None: a model made in memory)."""
    return checkpoint.checkpoint if isinstance(checkpoint, Scorer) else checkpoint


def check_count(setting: str, value: int | None) -> None:
    """Refuse a count (a batch size, a limit) that is not a whole number, 1 or more; None passes."""
    if value is not None and not (type(value) is int and value >= 1):
        raise SettingError(setting, f"{value!r}: expected a whole number, 1 or more")
