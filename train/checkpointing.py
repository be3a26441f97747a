"""A run's checkpoints: written whole or not at all, the newest few kept, read back checked.

    checkpoints/step-000500_tokens-2048000/   a model checkpoint (model/checkpoint.py: what `sample`
                       needs) + optimizer.safetensors (every optimizer's state tensors, under
                       "adamw/..." and "muon/...") + trainer_state.json (step, tokens, settings
                       digest, optimizer step counts, schedule, random-number state)
    latest             a symlink to the newest checkpoint, moved only once that one is whole

A resume reads a checkpoint back with every file checked (its CRC-32, and every field and
tensor the resume needs); a damaged one is an error that names the newest intact checkpoint
to resume from instead.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from gptkit.model.checkpoint import (CheckpointError, check_file, load_model, model_tensors, read_checkpoint_config,
                                     read_tensors, save_model, save_tensors)
from gptkit.model.config import ModelConfig
from gptkit.model.model import TransformerLM
from gptkit.shared.errors import GptkitError, SettingError
from gptkit.shared.files import atomic_symlink, remove_directory, remove_stale_temporaries, sync_directory
from gptkit.shared.jsonfile import is_count, read_json

from .fsdp import placed, whole
from .run_dir import CHECKPOINTS, LATEST

OPTIMIZER_FILE, STATE_FILE = "optimizer.safetensors", "trainer_state.json"


class Checkpoints:
    def __init__(self, run_dir, keep_last, master=True):
        """`master`: this process writes (rank 0); the others only take part in gathering sharded tensors."""
        self.run_dir, self.keep_last, self.master = Path(run_dir), keep_last, master
        self.directory, self.latest = self.run_dir / CHECKPOINTS, self.run_dir / LATEST

    def save(self, model, tokenizer, eot_id, optimizers, state) -> Path | None:
        """Write a checkpoint of `model` and `optimizers` with the trainer's `state` (step, tokens,
        config_digest, schedule), point `latest` at it, and delete the oldest beyond keep_last. A
        checkpoint that cannot be written (a full disk) is an error naming it and the last one,
        which `latest` still points at, and leaves nothing under its name. Every process calls it
        (the tensors of a sharded model are gathered from all of them); the master writes, and
        returns the checkpoint's directory (the others: None)."""
        weights = whole(model_tensors(model), self.master)
        tensors = whole({f"{k}/{n}": t for k, o in optimizers.items() for n, t in o.state_tensors().items()}, self.master)
        if not self.master:
            return None
        name = f"step-{state['step']:06d}_tokens-{state['tokens']}"
        directory = self.directory / name
        # Of the random-number state only torch's CPU generator is saved, and a resume restores it.
        # The CUDA generators are not (nothing in training draws from them), nor is the loader,
        # whose batches are a function of (seed, step, rank) alone. Checkpoints that hold them
        # ("rng.cuda", "loader") resume all the same: the resume never read them.
        state = {**state, "optimizer_steps": {k: getattr(o, "steps", state["step"]) for k, o in optimizers.items()},
                 "rng": {"torch": torch.get_rng_state().numpy().tobytes().hex()}}
        try:
            save_model(model, tokenizer, directory, eot_id=eot_id, tensors=weights, extra_files={
                OPTIMIZER_FILE: lambda path: save_tensors({k: v.contiguous() for k, v in tensors.items()}, path),
                STATE_FILE: lambda path: path.write_text(json.dumps(state, indent=2) + "\n"),
            })
            sync_directory(self.directory)  # the checkpoint reaches the disk under its name before the pointer to it
            atomic_symlink(self.latest, Path(CHECKPOINTS) / name)
        except OSError as e:
            raise GptkitError(f"{directory}: cannot write ({e.strerror}); {self.full_disk_note()}") from None
        for old in sorted(self.directory.glob("step-*"))[: -self.keep_last]:
            remove_directory(old)
        for stale in self.directory.glob(".step-*.tmp-*"):  # of a process killed while saving or deleting
            remove_stale_temporaries(self.directory / stale.name[1:].rsplit(".tmp-", 1)[0])
        return directory

    def read(self, checkpoint, model_config, tokenizer, data, optimizers) -> Saved:
        """What a resume takes from `checkpoint`, every file checked, nothing applied yet. A
        checkpoint of another tokenizer than that of the run's `data`, or of another model than
        `model_config`, the run's, is refused."""
        checkpoint = Path(checkpoint)
        if not checkpoint.exists():
            raise SettingError("out", f"{self.run_dir}: no checkpoint to resume from ({checkpoint} is missing)")
        try:
            config = read_checkpoint_config(checkpoint)  # once, for every check below
            _check_tokenizer(checkpoint, config, tokenizer, data)
            _check_model(checkpoint, config, model_config)
            state = _read_state(checkpoint, config, optimizers)
            model, _ = load_model(checkpoint)  # whole, in host memory: restore() puts each tensor in place
            tensors = _read_optimizer_tensors(checkpoint, config, optimizers)
        except CheckpointError as e:
            raise CheckpointError(f"{e}; {self._intact_note(checkpoint, optimizers)}") from None
        return Saved(state, model, tensors)

    def last_note(self):
        """Which checkpoint a run that cannot go on leaves, for its error."""
        if self.latest.exists():
            return f"the last checkpoint, {self.latest.resolve().name} in {self.run_dir}, is intact"
        return f"no checkpoint was written to {self.run_dir}"

    def full_disk_note(self):
        """What a run stopped by a full disk leaves, and how to go on."""
        then = f"resume with: gptkit train --out {self.run_dir} --resume" if self.latest.exists() else "run the same command again"
        return f"{self.last_note()}; make room, then {then}"

    def _intact_note(self, damaged, optimizers):
        """Which checkpoint of the run a resume could start from instead of a damaged one."""
        for candidate in sorted(self.directory.glob("step-*"), reverse=True):
            if candidate.resolve() == damaged.resolve():
                continue
            try:
                config = read_checkpoint_config(candidate)
                for name in config.get("crc32", {}):
                    check_file(candidate, name, config)
                _read_state(candidate, config, optimizers)
            except CheckpointError:
                continue
            return f"{candidate.name} is intact: resume from it with --resume --from-checkpoint {candidate}"
        return f"no intact checkpoint in {self.directory} to resume from"


@dataclass
class Saved:
    """A checkpoint read back and checked: its trainer state, model and optimizer tensors."""

    state: dict
    model: TransformerLM
    optimizer_tensors: dict

    @torch.no_grad()
    def restore(self, model, optimizers):
        """Put the checkpoint's weights, optimizer state and random-number state in place: each
        tensor whole, or as the shard of it this process holds where the model is sharded."""
        saved = self.model.state_dict()
        for name, tensor in model.state_dict().items():
            tensor.copy_(placed(saved[name], tensor))
        for key, optimizer in optimizers.items():
            prefix = f"{key}/"
            optimizer.load_state_tensors({n: placed(self.optimizer_tensors[prefix + n], t) for n, t in optimizer.state_tensors().items()},
                                         self.state["optimizer_steps"][key])
        torch.set_rng_state(torch.from_numpy(np.frombuffer(bytes.fromhex(self.state["rng"]["torch"]), np.uint8).copy()))


def initial_model(checkpoint, tokenizer, data) -> dict:
    """The model config of the checkpoint a new run starts from (--init-from), whose tokenizer
    must be the one `data` was encoded with."""
    try:
        config = read_checkpoint_config(checkpoint)
    except CheckpointError as e:
        raise SettingError("init_from", str(e)) from None
    _check_tokenizer(checkpoint, config, tokenizer, data, "the checkpoint's model was made for",
                     f"encode the data with {Path(checkpoint) / 'tokenizer.json'}")
    return config["model"]


def load_initial_weights(model, checkpoint):
    """Put the weights of `checkpoint` (--init-from), checked, into `model`, a model of its config."""
    initial, _ = load_model(checkpoint)
    model.load_state_dict(initial.state_dict())


def _check_tokenizer(checkpoint, config, tokenizer, data, whose="the run was trained on",
                     remedy="resume with the data it was trained on, or start a new run"):
    then = config.get("tokenizer") or {}
    if then.get("fingerprint") not in (None, tokenizer.fingerprint):
        raise SettingError("data", f"{data}: encoded with tokenizer {tokenizer.fingerprint} ({tokenizer.vocab_size:,} tokens), "
                                   f"{whose} tokenizer {then['fingerprint']} ({then.get('vocab_size', 0):,} tokens) "
                                   f"in {checkpoint}; {remedy}")


def _check_model(checkpoint, config, model_config):
    then = ModelConfig.from_dict(config["model"], f"{checkpoint}/config.json").to_dict()
    now = model_config.to_dict()
    differs = [k for k in now if then[k] != now[k]]
    if differs:
        raise SettingError("resume", f"{checkpoint}: its model has {differs[0]} {then[differs[0]]!r}, the run's "
                                     f"{now[differs[0]]!r} (a checkpoint of another run, or the run's config.json was edited)")


def _read_state(checkpoint, config, optimizers):
    """A checkpoint's trainer_state.json, checked (its CRC-32 in the checkpoint's `config` and
    every field a resume reads)."""
    path = check_file(checkpoint, STATE_FILE, config)
    try:
        state = read_json(path)
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path}: damaged, not JSON ({e})") from None
    problem = _state_problem(state, optimizers)
    if problem:
        raise CheckpointError(f"{path}: damaged ({problem})")
    return state


def _state_problem(state, optimizers):
    """What a trainer_state.json lacks for a resume, or None."""
    if not isinstance(state, dict):
        return "not a JSON object"
    for key, kind in (("step", int), ("tokens", int), ("config_digest", str), ("optimizer_steps", dict), ("rng", dict)):
        if key not in state:
            return f"no {key!r}"
        if not (is_count(state[key]) if kind is int else isinstance(state[key], kind)):
            return f"{key!r} is {state[key]!r}, not a {'count' if kind is int else kind.__name__}"
    missing = [k for k in optimizers if not is_count(state["optimizer_steps"].get(k))]
    if missing:
        return f"no step count of optimizer {missing[0]!r}"
    try:
        bytes.fromhex(state["rng"]["torch"])
    except (KeyError, TypeError, ValueError):
        return "no random-number state"
    return None


def _read_optimizer_tensors(checkpoint, config, optimizers):
    path = checkpoint / OPTIMIZER_FILE
    tensors = read_tensors(checkpoint, OPTIMIZER_FILE, config)
    for key, optimizer in optimizers.items():
        for name, tensor in optimizer.state_tensors().items():
            saved = tensors.get(f"{key}/{name}")
            if saved is None or saved.shape != tensor.shape:
                raise CheckpointError(f"{path}: damaged ({'no' if saved is None else 'a wrong shape of'} tensor {key}/{name})")
    return tensors
