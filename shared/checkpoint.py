"""Checkpoint directories: what the model, sample and train stages pass each other.

    DIR/model.safetensors   the weights (tied weights stored once, under the embedding's name)
    DIR/config.json         {"format", "version", "model": {...ModelConfig...}, "tokenizer": {fingerprint, vocab_size},
                             "crc32": {file: CRC-32 of every other file of the directory}}
    DIR/tokenizer.json      a copy of the tokenizer, so the directory is self-contained

The trainer adds its own files beside these. Nothing is pickled: tensors are safetensors,
everything else JSON. safetensors has no checksum of its own, so config.json, written last,
carries a CRC-32 of every other file, checked when a file is read. A directory is written
under a temporary name and renamed into place; it replaces only a checkpoint (an existing
path that is anything else is refused unless `overwrite`).
"""
from __future__ import annotations

import json
import os
import shutil
import zlib
from pathlib import Path

from gptkit.shared.errors import InputError

FORMAT, VERSION = "gptkit-checkpoint", 1
MODEL_FILE, CONFIG_FILE, TOKENIZER_FILE = "model.safetensors", "config.json", "tokenizer.json"


class CheckpointError(InputError):
    """A checkpoint directory that is missing, incomplete or inconsistent."""


def write_checkpoint(directory, tensors, model_config: dict, tokenizer, extra_files=None, overwrite=False):
    """Write a checkpoint directory atomically: built beside `directory` under a temporary name,
    flushed, and renamed into place (an existing one is replaced only once the new one is whole).

    `tensors`: name -> tensor; `tokenizer`: a tokenizer.Tokenizer; `extra_files`: name -> a
    function that writes that file given its path (the trainer's state). An existing
    `directory` that is not a checkpoint is refused unless `overwrite`.
    """
    from safetensors.torch import save_file

    directory = Path(directory)
    check_target(directory, overwrite)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = directory.with_name(f".{directory.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, tmp / MODEL_FILE, metadata={"format": "pt"})
        tokenizer.save(tmp / TOKENIZER_FILE)
        for name, write in (extra_files or {}).items():
            write(tmp / name)
        config = {"format": FORMAT, "version": VERSION, "model": model_config,
                  "tokenizer": {"fingerprint": tokenizer.fingerprint, "vocab_size": tokenizer.vocab_size},
                  "crc32": {path.name: file_crc32(path) for path in sorted(tmp.iterdir())}}
        (tmp / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
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
    if target.exists() or target.is_symlink():
        os.replace(target, old)
    try:
        os.replace(new, target)
    except BaseException:
        if old.exists() or old.is_symlink():
            os.replace(old, target)
        raise
    if old.is_dir() and not old.is_symlink():
        shutil.rmtree(old, ignore_errors=True)
    else:
        old.unlink(missing_ok=True)


def check_target(directory, overwrite=False):
    """Refuse to write a checkpoint over an existing path that is not a checkpoint (a user's
    directory or file), unless `overwrite`."""
    directory = Path(directory)
    if (directory.exists() or directory.is_symlink()) and not overwrite and not is_checkpoint(directory):
        what = "a directory that is not a checkpoint" if directory.is_dir() else "a file"
        raise CheckpointError(f"{directory}: exists and is {what}; choose another path, or pass --overwrite to replace it")


def is_checkpoint(directory) -> bool:
    """Whether `directory` holds a checkpoint's config.json (ours to replace)."""
    try:
        return json.loads((Path(directory) / CONFIG_FILE).read_text()).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def file_crc32(path) -> int:
    crc = 0
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            crc = zlib.crc32(block, crc)
    return crc


def check_file(directory, name, config=None):
    """The path of file `name` of a checkpoint, after checking its CRC-32 against the one
    config.json records (checkpoints written before checksums were recorded pass)."""
    path = Path(directory) / name
    if not path.is_file():
        raise CheckpointError(f"{path}: missing")
    expected = (config if config is not None else read_checkpoint_config(directory)).get("crc32", {}).get(name)
    if expected is not None and file_crc32(path) != expected:
        raise CheckpointError(f"{path}: corrupted (its CRC-32 differs from the one {CONFIG_FILE} records)")
    return path


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


def read_tensors(directory, name=MODEL_FILE, config=None, device="cpu") -> dict:
    """The tensors of a checkpoint's safetensors file, checksum checked (safetensors: no code
    runs while loading)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = check_file(directory, name, config)
    try:
        return load_file(path, device=str(device))
    except (SafetensorError, OSError) as e:
        raise CheckpointError(f"{path}: not a readable safetensors file ({e})") from None
