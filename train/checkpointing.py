"""A run's checkpoints: the one owner of what a checkpoint holds, written whole or not at all
(save_checkpoint), the newest few kept, put back into the run on a resume (Checkpoints).

    checkpoints/step-000500_tokens-2048000/   a model checkpoint (model/checkpoint.py, the directory
                       format: what `sample` needs) + optimizer.safetensors + trainer_state.json
                       (+ chat_template.jinja and tokenizer_config.json, where the data carries them)
    latest             a symlink to the newest checkpoint, moved only once that one is whole

A checkpoint holds the state of each of the run's Parts, its state_dict(), which a resume puts
back with load_state_dict():

    progress    step, tokens                      trainer_state.json
    model       the weights (whole, gathered      model.safetensors
                from the shards where sharded);   (adapters.safetensors, and
                a LoRA run's adapters alone       config.json's "lora")
    optimizers  each one's step count             trainer_state.json "optimizer_steps"
                and state tensors                 optimizer.safetensors ("adamw/...", "muon/...")
    schedule    the Planner's schedule            trainer_state.json "schedule"
    threads     torch's CPU threads, where the    trainer_state.json "threads"
                run records them (--deterministic
                on the CPU: runtime/threads.py)
    rng         torch's CPU generator             trainer_state.json "rng"

and beside them the run's Stamp: what makes the checkpoint the run's, which a resume checks
(resume.py): the settings' digest ("config_digest") and what the data holds ("data"). The loader
has no state: its batches are a function of (seed, step, rank) alone; nor do the CUDA generators,
which nothing in training draws from. Checkpoints that hold them ("loader", "rng.cuda") resume all
the same. A checkpoint is read back checked by checkpoint_read.py.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import numpy as np
import torch

from gptkit.model.checkpoint import CheckpointError, CheckpointReader, model_tensors, save_model, save_tensors
from gptkit.model.lora import LoraConfig, adapters_of, initial_rows
from gptkit.model.model import TransformerLM
from gptkit.shared.errors import GptkitError
from gptkit.shared.files import (
    CHECKPOINTS,
    LATEST,
    atomic_symlink,
    cause,
    remove_directory,
    remove_stale_temporaries,
    settle_directory,
    sync_directory,
)
from gptkit.tokenizer import Tokenizer

from .checkpoint_read import (
    OPTIMIZER_FILE,
    STATE_FILE,
    intact_note,
    read_optimizer_tensors,
    read_trainer_state,
)
from .fsdp import placed, whole
from .optim import Optimizers
from .processes import Dist

# While the master writes a checkpoint the other processes wait for it (Checkpoints.save), in a
# gloo barrier of its own timeout: NCCL's collectives time out after 10 minutes, which writing a
# large model's checkpoint may take. The timeout is the write at a slow network disk's rate,
# checksums included, and a margin for the gathering, fsync, renames and a busy host.
WRITE_RATE, WRITE_MARGIN_S = 20e6, 600  # bytes a second, seconds


def save_timeout(nbytes: int) -> timedelta:
    """How long the other processes wait for the master to write a checkpoint of `nbytes`."""
    return timedelta(seconds=WRITE_MARGIN_S + nbytes / WRITE_RATE)


class Rng:
    """torch's CPU generator: what dropout draws from, so that a resumed run draws what an
    uninterrupted one would."""

    def state_dict(self) -> dict[str, str]:
        return {"torch": torch.get_rng_state().numpy().tobytes().hex()}

    def load_state_dict(self, state: dict[str, str]) -> None:
        torch.set_rng_state(torch.from_numpy(np.frombuffer(bytes.fromhex(state["torch"]), np.uint8).copy()))


class Stateful(Protocol):
    def state_dict(self) -> Any: ...

    def load_state_dict(self, state: Any) -> None: ...


class Parts(NamedTuple):
    """What a checkpoint saves and restores, each by its state_dict() and load_state_dict()."""

    progress: Stateful  # trainer.Progress: step and tokens
    model: TransformerLM
    optimizers: Optimizers
    schedule: Stateful  # budget.Planner
    threads: Stateful  # runtime.threads.Threads
    rng: Rng = Rng()


@dataclass(frozen=True)
class Stamp:
    """What every checkpoint of a run holds beside its parts' state: what reading the weights back needs
    (the tokenizer, the data's end-of-text id, a LoRA run's record of its adapters, chat data's template
    files), and what a resume checks (`identity`: the settings' digest and what the data holds)."""

    tokenizer: Tokenizer
    eot_id: int | None
    identity: dict[str, Any]
    lora: dict[str, Any] | None = None  # model/lora/'s record_of(): a LoRA run saves its adapters alone
    texts: dict[str, str] = field(default_factory=dict)  # file name -> text


def save_checkpoint(
    model: TransformerLM,
    optimizer_tensors: dict[str, torch.Tensor],
    state: dict[str, Any],
    out: Path,
    tokenizer: Tokenizer,
    *,
    weights: dict[str, torch.Tensor] | None = None,
    eot_id: int | None = None,
    lora: dict[str, Any] | None = None,
    texts: dict[str, str] | None = None,
) -> None:
    """Write the training checkpoint `out`, whole or not at all (model/checkpoint.py's save_model): the
    `model` with its `tokenizer` and the data's `eot_id`; `optimizer_tensors` (name -> tensor) in
    optimizer.safetensors; the trainer's `state` in trainer_state.json; `texts` (file name -> text).
    `weights`: the model's tensors whole, where it holds shards of them, or a LoRA run's adapters alone,
    which its `lora` record names."""
    save_model(
        model,
        tokenizer,
        out,
        eot_id=eot_id,
        tensors=weights,
        lora=lora,
        extra_files={
            OPTIMIZER_FILE: lambda path: save_tensors({k: v.contiguous() for k, v in optimizer_tensors.items()}, path),
            STATE_FILE: lambda path: path.write_text(json.dumps(state, indent=2) + "\n"),
            **{name: functools.partial(_write_text, text=text) for name, text in (texts or {}).items()},
        },
    )


class Checkpoints:
    def __init__(self, out: str, keep_last: int, parts: Parts, stamp: Stamp, dist: Dist) -> None:
        """The checkpoints of the run directory `out`, the newest `keep_last` kept (the checkpoint
        section's), each of the `parts` and `stamp`. Every process of `dist` takes part in gathering
        sharded tensors; the master alone writes."""
        self.run_dir, self.keep_last, self.parts, self.stamp, self.master = (
            Path(out),
            keep_last,
            parts,
            stamp,
            dist.master,
        )
        self.directory, self.latest = self.run_dir / CHECKPOINTS, self.run_dir / LATEST
        # the weights and at most two float32 optimizer tensors of each (AdamW's moments)
        nbytes = 3 * sum(t.numel() * t.element_size() for t in model_tensors(parts.model).values())
        self.written = (
            torch.distributed.new_group(backend="gloo", timeout=save_timeout(nbytes)) if dist.distributed else None
        )

    def save(self) -> Path | None:
        """Write a checkpoint of the parts, point `latest` at it, and delete the oldest beyond
        keep_last. A checkpoint that cannot be written (a full disk) is an error naming it and the
        last one, which `latest` still points at, and leaves nothing under its name. Every process
        calls it (the tensors of a sharded model are gathered from all of them); the master writes,
        and returns the checkpoint's directory, the others wait for it (save_timeout) and return None."""
        parts = self.parts
        optimizers = parts.optimizers.state_dict()
        weights = whole(self._saved(model_tensors(parts.model)), self.master)
        tensors = whole({f"{k}/{n}": t for k, o in optimizers.items() for n, t in o["tensors"].items()}, self.master)
        directory = self._write(optimizers, weights, tensors) if self.master else None
        if self.written is not None:
            torch.distributed.barrier(group=self.written)
        return directory

    def _write(
        self, optimizers: dict[str, dict[str, Any]], weights: dict[str, torch.Tensor], tensors: dict[str, torch.Tensor]
    ) -> Path:
        parts = self.parts
        trainer = parts.progress.state_dict()
        name = f"step-{trainer['step']:06d}_tokens-{trainer['tokens']}"
        directory = self.directory / name
        threads = parts.threads.state_dict()  # empty where the run does not record its count: then no key
        state = {
            **trainer,
            **self.stamp.identity,
            "schedule": parts.schedule.state_dict(),
            "optimizer_steps": {k: o["steps"] for k, o in optimizers.items()},
            "rng": parts.rng.state_dict(),
            **({"threads": threads} if threads else {}),
        }
        for old in self.directory.glob(".step-*.old-*"):  # a checkpoint a killed writer left aside, put back
            settle_directory(self.directory / old.name[1:].rsplit(".old-", 1)[0])
        stamp = self.stamp
        try:
            save_checkpoint(
                parts.model,
                tensors,
                state,
                directory,
                stamp.tokenizer,
                weights=weights,
                eot_id=stamp.eot_id,
                lora=stamp.lora,
                texts=stamp.texts,
            )
            sync_directory(self.directory)  # the checkpoint reaches the disk under its name before the pointer to it
            atomic_symlink(self.latest, Path(CHECKPOINTS) / name)
        except OSError as e:
            raise GptkitError(f"{directory}: cannot write ({cause(e)}); {self.full_disk_note()}") from None
        for old in sorted(self.directory.glob("step-*"))[: -self.keep_last]:
            remove_directory(old)
        for stale in self.directory.glob(".step-*.tmp-*"):  # of a process killed while saving or deleting
            remove_stale_temporaries(self.directory / stale.name[1:].rsplit(".tmp-", 1)[0])
        return directory

    def load(self, saved: CheckpointReader) -> None:
        """Put the state of `saved` (a resume's checkpoint, opened and its settings checked by
        read_state, in resume.py) back into every part, every file checked before any is applied:
        each tensor whole, or as the shard of it this process holds where the model is sharded."""
        optimizers, model = self.parts.optimizers, self.parts.model
        try:
            state = read_trainer_state(saved, optimizers)
            saved.tokenizer(
                model.config.vocab_size
            )  # checked as load_model checks it: a damaged checkpoint is refused whole
            weights = saved.weights(model, merged_in=False)
            tensors = read_optimizer_tensors(saved, optimizers)
        except CheckpointError as e:
            raise CheckpointError(f"{e}; {intact_note(saved.directory, self.directory, optimizers)}") from None
        self.put_weights(weights)
        now = optimizers.state_dict()
        optimizers.load_state_dict(
            {
                k: {
                    "steps": state["optimizer_steps"][k],
                    "tensors": {n: placed(tensors[f"{k}/{n}"], t) for n, t in o["tensors"].items()},
                }
                for k, o in now.items()
            }
        )
        self.parts.progress.load_state_dict(state)
        self.parts.schedule.load_state_dict(state.get("schedule"))
        self.parts.threads.load_state_dict(state.get("threads"))
        self.parts.rng.load_state_dict(state["rng"])

    def _saved(self, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """What of the model's `tensors` a checkpoint holds: all, or a LoRA run's adapters."""
        return tensors if self.stamp.lora is None else adapters_of(tensors)

    def start_from(self, saved: CheckpointReader, lora: LoraConfig | None = None) -> None:
        """Put the weights of `saved` (--init-from's checkpoint, opened and its tokenizer checked by
        initial_model, in settle.py: a new run, whose model is the checkpoint's) into the model, each
        tensor checked, read once, and widened to the model's float32 (exactly, as load_model does).
        A LoRA run's checkpoint gives its base's weights with its adapters merged in; new adapters
        keep their initialization, and the rows a LoRA run trains (`lora`) start as the weights' own."""
        weights = saved.weights(self.parts.model)
        rows = initial_rows(weights, lora) if lora is not None else {}
        self.put_weights({**weights, **rows})

    def put_weights(self, weights: dict[str, torch.Tensor]) -> None:
        """Copy the whole tensors `weights` (name -> tensor) into the model: each one, or the shard
        of it this process holds where the model is sharded. A tied LM head absent from `weights` is
        the embedding, put in with it. A new run starts from a checkpoint's (start_from), or from the
        recipe's trials' winner."""
        with torch.no_grad():
            for name, tensor in self.parts.model.state_dict().items():
                if name in weights:
                    tensor.copy_(placed(weights[name], tensor))

    def last_note(self) -> str:
        """Which checkpoint a run that cannot go on leaves, for its error."""
        if self.latest.exists():
            return f"the last checkpoint, {self.latest.resolve().name} in {self.run_dir}, is intact"
        return f"no checkpoint was written to {self.run_dir}"

    def full_disk_note(self) -> str:
        """What a run stopped by a full disk leaves, and how to go on."""
        then = (
            f"resume with: gptkit train --out {self.run_dir} --resume"
            if self.latest.exists()
            else "run the same command again"
        )
        return f"{self.last_note()}; make room, then {then}"


def _write_text(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
