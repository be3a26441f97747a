"""Checkpoint directories: what the model, sample and train stages pass each other.

    DIR/model.safetensors   the weights (tied weights stored once, under the embedding's name)
    DIR/config.json         {"format", "version", "model": {...ModelConfig...}, "tokenizer": {fingerprint, vocab_size}}
    DIR/tokenizer.json      a copy of the tokenizer, so the directory is self-contained

The trainer adds its own files beside these. Nothing is pickled: tensors are safetensors,
everything else JSON. A directory is written under a temporary name and renamed into place.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from shared.errors import InputError

FORMAT, VERSION = "gptkit-checkpoint", 1
MODEL_FILE, CONFIG_FILE, TOKENIZER_FILE = "model.safetensors", "config.json", "tokenizer.json"


class CheckpointError(InputError):
    """A checkpoint directory that is missing, incomplete or inconsistent."""


def write_checkpoint(directory, tensors, model_config: dict, tokenizer, extra_files=None):
    """Write a checkpoint directory atomically: built beside `directory` under a temporary name,
    flushed, and renamed into place (an existing one is replaced only once the new one is whole).

    `tensors`: name -> tensor; `tokenizer`: a tokenizer.Tokenizer; `extra_files`: name -> a
    function that writes that file given its path (the trainer's state).
    """
    from safetensors.torch import save_file

    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = directory.with_name(f".{directory.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, tmp / MODEL_FILE, metadata={"format": "pt"})
        config = {"format": FORMAT, "version": VERSION, "model": model_config,
                  "tokenizer": {"fingerprint": tokenizer.fingerprint, "vocab_size": tokenizer.vocab_size}}
        (tmp / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
        tokenizer.save(tmp / TOKENIZER_FILE)
        for name, write in (extra_files or {}).items():
            write(tmp / name)
        for path in tmp.iterdir():
            with open(path, "rb") as f:
                os.fsync(f.fileno())
        _replace_dir(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _replace_dir(new, target):
    """Rename `new` to `target`; an old `target` is moved aside first (and back if the rename
    fails) and deleted after. (A directory cannot be renamed over a non-empty one.)"""
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    if target.exists():
        os.replace(target, old)
    try:
        os.replace(new, target)
    except BaseException:
        if old.exists():
            os.replace(old, target)
        raise
    shutil.rmtree(old, ignore_errors=True)


def read_checkpoint_config(directory) -> dict:
    """The checked config.json of a checkpoint directory whose three files are all present."""
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(f"{directory}: no such checkpoint directory")
    for name in (MODEL_FILE, CONFIG_FILE, TOKENIZER_FILE):
        if not (directory / name).is_file():
            raise CheckpointError(f"{directory}: incomplete checkpoint, no {name} (expected {MODEL_FILE}, {CONFIG_FILE}, {TOKENIZER_FILE})")
    try:
        config = json.loads((directory / CONFIG_FILE).read_text())
    except ValueError as e:
        raise CheckpointError(f"{directory / CONFIG_FILE}: not valid JSON ({e})") from None
    if not isinstance(config, dict) or config.get("format") != FORMAT or not isinstance(config.get("model"), dict):
        raise CheckpointError(f"{directory / CONFIG_FILE}: not a checkpoint config (expected \"format\": \"{FORMAT}\" and a \"model\" object)")
    return config


def read_tensors(directory) -> dict:
    """The weights of a checkpoint (safetensors: no code runs while loading)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(directory) / MODEL_FILE
    try:
        return load_file(path)
    except (SafetensorError, OSError) as e:
        raise CheckpointError(f"{path}: not a readable safetensors file ({e})") from None
