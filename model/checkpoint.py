"""Checkpoint directories: a TransformerLM, its tokenizer and its config, which the model, train
and sample stages pass each other. This module is the one place that knows the layout
(DIR/model.safetensors, DIR/config.json, DIR/tokenizer.json, and the trainer's `extra_files`),
specified with config.json's fields and how a text is framed (`eot_id`, `bos_id`) in
docs/formats.md#checkpoints.

A LoRA run's checkpoint holds its adapters (DIR/adapters.safetensors) instead of the weights, and
config.json's "lora" names the checkpoint they adapt ("base", a directory) with the SHA-256 of that
one's config.json ("base_digest"), which lists the CRC-32 of its weights: readers get the base's
weights with the adapters merged in, or, for a resume, both apart. model/lora/ owns the adapters,
their record and their merge; this module reads and writes them with it.

Nothing is pickled. A directory is written under a temporary name and renamed into place
(shared/files.py, atomic_directory); config.json, written last, carries a CRC-32 of every other
file, checked when a file is read.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import zlib
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path

import torch

from gptkit.shared.errors import InputError, named
from gptkit.shared.files import LATEST, Input, StrPath, atomic_directory, check_output, looked_up, settled
from gptkit.shared.jsonfile import parse_json, read_json
from gptkit.shared.text import EOT
from gptkit.tokenizer import Tokenizer

from .config import ModelConfig
from .lora import LoraConfig, adapters_of, add_adapters, base_of, is_adapter, merge, read_record
from .model import TransformerLM
from .tensor_checks import DTYPES, CheckpointError, check_finite, check_tensors

FORMAT, VERSION = "gptkit-checkpoint", 1
MODEL_FILE, CONFIG_FILE, TOKENIZER_FILE = "model.safetensors", "config.json", "tokenizer.json"
ADAPTER_FILE = "adapters.safetensors"  # a LoRA run's checkpoint holds this instead of MODEL_FILE
EOT_FIRST = "eot_id"  # save_model's default bos_id: a text starts after the end-of-text token, as in gptkit's data


def model_tensors(model: TransformerLM) -> dict[str, torch.Tensor]:
    """The weights to save: a tied LM head is the embedding, stored once under its name (and so are
    the rows a LoRA run trains of both, model/lora/)."""
    state = model.state_dict()
    if model.config.tie_embeddings:
        del state["lm_head.weight"]
        state.pop("lm_head.token_rows", None)
    return state


def save_model(
    model: TransformerLM,
    tokenizer: Tokenizer,
    directory: StrPath,
    *,
    eot_id: int | None = None,
    bos_id: int | str | None = EOT_FIRST,
    extra_files: Mapping[str, Callable[[Path], object]] | None = None,
    overwrite: bool = False,
    tensors: Mapping[str, torch.Tensor] | None = None,
    lora: Mapping[str, object] | None = None,
) -> None:
    """Write a checkpoint directory atomically (see the module's docstring).

    `tokenizer`: a gptkit.tokenizer.Tokenizer; `eot_id`: the end-of-text id of its training data
    (None: none); `bos_id`: the id put before a text (None: none), by default `eot_id`;
    `extra_files`: name -> a function that writes that file given its path (the trainer's
    state); `tensors`: the weights to write where the model holds only shards of them
    (model_tensors(model) gathered whole); `lora`: a LoRA run's record (model/lora/record.py),
    where `tensors` are the adapters alone. Tensors are written in their own dtype. An existing
    `directory` that is not a checkpoint is refused unless `overwrite`.
    """
    directory = Path(directory)
    check_target(directory, overwrite, extra_files or ())
    tensors = model_tensors(model) if tensors is None else tensors
    with atomic_directory(directory) as tmp:
        save_tensors(
            {k: v.detach().contiguous().cpu() for k, v in tensors.items()},
            tmp / (MODEL_FILE if lora is None else ADAPTER_FILE),
            metadata={"format": "pt"},
        )
        tokenizer.save(tmp / TOKENIZER_FILE)
        for name, write in (extra_files or {}).items():
            write(tmp / name)
        framing = {"eot_id": eot_id, **({} if bos_id is EOT_FIRST or bos_id == eot_id else {"bos_id": bos_id})}
        config = {
            "format": FORMAT,
            "version": VERSION,
            "model": model.config.to_dict(),
            "tokenizer": {"fingerprint": tokenizer.fingerprint, "vocab_size": tokenizer.vocab_size, **framing},
            **({} if lora is None else {"lora": dict(lora)}),
            "crc32": {path.name: file_crc32(path) for path in sorted(tmp.iterdir())},
        }
        (tmp / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")


def save_tensors(tensors: dict[str, torch.Tensor], path: StrPath, metadata: dict[str, str] | None = None) -> None:
    """safetensors' save_file, a failed write raised as the OSError it is: safetensors reports
    one as a SafetensorError ("I/O error: No space left on device (os error 28)"), which the
    callers, who tell a full disk in one line, would not know as one."""
    from safetensors import SafetensorError
    from safetensors.torch import save_file

    try:
        save_file(tensors, path, metadata=metadata)
    except SafetensorError as e:
        code = re.search(r"\(os error (\d+)\)", str(e))
        if code is None:
            raise
        raise OSError(int(code[1]), os.strerror(int(code[1])), str(path)) from None


def load_model(directory: StrPath, device: str | torch.device = "cpu") -> tuple[TransformerLM, Tokenizer]:
    """(model, tokenizer) of a checkpoint (a LoRA run's: its base with the adapters merged in), after
    checking that the config, the weights and the tokenizer agree; the first disagreement is an
    error naming it. The model is float32 whatever
    dtype the file holds (an imported bf16 model is widened, exactly): CPUs have no fast bf16
    kernels, and decoding and training keep float32 weights."""
    checkpoint = CheckpointReader(directory)
    model_config = ModelConfig.from_dict(checkpoint.config["model"], source=f"{checkpoint.directory}/{CONFIG_FILE}")
    tokenizer = checkpoint.tokenizer(model_config.vocab_size)
    try:
        model = TransformerLM(model_config)
    except (RuntimeError, MemoryError) as e:  # torch's CPU allocator fails with a RuntimeError: an edited size
        raise CheckpointError(
            f"{checkpoint.directory}/{CONFIG_FILE}: the model it describes cannot be built here "
            f"({str(e).splitlines()[0]})"
        ) from None
    model.load_state_dict(
        checkpoint.weights(model), strict=False
    )  # strict would miss a tied head, which is the embedding
    return model.to(device).eval(), tokenizer  # for inference: no dropout (training sets train mode itself)


def checkpoint_directory(path: StrPath, setting: str = "checkpoint") -> Path:
    """Where a reader finds the checkpoint `path` names: `path` as a writer killed while swapping it
    for a new one may have left it (shared/files.py, settled), or, given a training run's directory,
    its newest checkpoint (LATEST). A path or a LATEST that cannot be followed (a loop of links) is
    a SettingError of `setting`, the flag that gave it (shared/files.py, looked_up)."""
    directory = settled(looked_up(path, setting))
    holds_weights = any(looked_up(directory / name, setting).exists() for name in (MODEL_FILE, ADAPTER_FILE))
    if not holds_weights and looked_up(directory / LATEST, setting).is_dir():
        return settled(directory / LATEST)
    return directory


class CheckpointReader:
    """A checkpoint directory (or a training run's directory: its newest checkpoint, LATEST) opened
    for reading, in one pass: found where a writer killed mid-swap may have left it
    (shared/files.py, settled), its three files checked present and its config.json read and
    checked, once; every file read through it then comes from that one version, its CRC-32
    checked against the one config.json records (checkpoints written before checksums were
    recorded pass). `setting`: the flag that gave the directory, named where it cannot be followed."""

    def __init__(self, directory: StrPath, setting: str = "checkpoint") -> None:
        directory = checkpoint_directory(directory, setting)
        if not directory.is_dir():
            raise CheckpointError(f"{directory}: no such checkpoint directory; `gptkit train` (make train) writes one")
        # A run's LATEST moves to each new checkpoint: every file is read from the one it named when
        # opened (`real`), and messages name the path as given.
        real, path = directory.resolve(), directory / CONFIG_FILE
        if not path.is_file():  # a run directory with no checkpoint yet: its weights are named missing
            weights = ADAPTER_FILE if (directory / ADAPTER_FILE).is_file() else MODEL_FILE
            missing = weights if not (directory / weights).is_file() else CONFIG_FILE
            raise CheckpointError(
                f"{directory}: incomplete checkpoint, no {missing} (expected {MODEL_FILE}, {CONFIG_FILE}, "
                f"{TOKENIZER_FILE})"
            )
        try:  # a regular file, checked above: parsed as read_json would, without checking that again
            config = parse_json((real / CONFIG_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise CheckpointError(f"{path}: not valid JSON ({e})") from None
        if not isinstance(config, dict) or config.get("format") != FORMAT or not isinstance(config.get("model"), dict):
            raise CheckpointError(
                f'{path}: not a checkpoint config (expected "format": "{FORMAT}" and a "model" object)'
            )
        self.weights_file = MODEL_FILE if config.get("lora") is None else ADAPTER_FILE
        for name in (self.weights_file, TOKENIZER_FILE):
            if not (directory / name).is_file():
                raise CheckpointError(
                    f"{directory}: incomplete checkpoint, no {name} (expected {self.weights_file}, {CONFIG_FILE}, "
                    f"{TOKENIZER_FILE})"
                )
        self.directory, self.real, self.config = directory, real, config

    def file(self, name: str) -> Path:
        """The path of the checkpoint's file `name`, its CRC-32 checked: in the checkpoint opened,
        wherever a run's LATEST has moved since."""
        path, shown = self.real / name, self.directory / name
        if not path.is_file():
            raise CheckpointError(f"{shown}: missing")
        expected = self.config.get("crc32", {}).get(name)
        if expected is not None and file_crc32(path) != expected:
            raise CheckpointError(f"{shown}: corrupted (its CRC-32 differs from the one {CONFIG_FILE} records)")
        return path

    def tensors(self, name: str = MODEL_FILE) -> dict[str, torch.Tensor]:
        """The tensors of the checkpoint's safetensors file `name`, in host memory, checksum checked
        (safetensors: no code runs while loading), each one finite: a NaN or an infinity, which the
        file's own checks pass, would make every output NaN (sample would print the token of id 0,
        an export would write it on)."""
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        path = self.file(name)
        try:
            tensors = load_file(path)
        except (SafetensorError, OSError) as e:
            raise CheckpointError(f"{path}: not a readable safetensors file ({e})") from None
        check_finite(tensors, path)  # here, where every tensor a checkpoint holds is read for use
        return tensors

    def weights(self, model: TransformerLM, merged_in: bool = True) -> dict[str, torch.Tensor]:
        """The weights of the checkpoint, checked to be those of `model` (a TransformerLM of the
        checkpoint's config, on any device, whole or sharded, with or without adapters): each one
        there, of its shape. A LoRA run's are its base's (read the same way) with its adapters
        merged in, or where not `merged_in` (a resume of the run) the two apart. Where `merged_in`,
        the adapters `model` carries are not among them: new ones keep their initialization."""
        expected = {name: t for name, t in model_tensors(model).items() if not (merged_in and is_adapter(name))}
        lora = self.lora
        if lora is None:
            tensors = self.tensors()
        else:
            adapters, base = self.adapters(), self.base().weights(_meta(model.config))
            tensors = merge(base, adapters, lora, self.directory / ADAPTER_FILE) if merged_in else {**base, **adapters}
        check_tensors(tensors, expected, self.directory / self.weights_file)
        return tensors

    def adapters(self) -> dict[str, torch.Tensor]:
        """The tensors of a LoRA run's adapters.safetensors, checked to be the adapters its "lora"
        puts on its model: each one there, of its shape, and nothing else (a base weight there would
        replace the base's)."""
        lora = self.lora
        assert lora is not None  # a LoRA run's checkpoint
        tensors = self.tensors(ADAPTER_FILE)
        config = ModelConfig.from_dict(self.config["model"], str(self.directory / CONFIG_FILE))
        expected = adapters_of(model_tensors(_meta(config, lora)))
        check_tensors(tensors, expected, self.directory / ADAPTER_FILE)
        return tensors

    @property
    def lora(self) -> LoraConfig | None:
        """The adapters of a LoRA run's checkpoint (None: a checkpoint of the weights), checked
        against its model."""
        return read_record(self.config, self.directory / CONFIG_FILE)

    def base(self) -> CheckpointReader:
        """The checkpoint a LoRA run's adapters adapt, opened, and checked to be the one they were
        trained on (its config.json, which lists the CRC-32 of its weights, as the run recorded it)."""
        path = self.directory / CONFIG_FILE
        base, digest = base_of(self.config["lora"], path)
        try:
            reader = CheckpointReader(base, "lora base")
        except InputError as e:
            raise CheckpointError(f"{path}: its adapters need the checkpoint they adapt, {base}: {e}") from None
        now = config_digest(reader.real)
        if now != digest:
            raise CheckpointError(
                f"{path}: its adapters were trained on the checkpoint {base} with config.json "
                f"{digest[:12]}, which is now {now[:12]} (another checkpoint is there); put that one back"
            )
        return reader

    def tokenizer(self, vocab_size: int) -> Tokenizer:
        """tokenizer.json, checked: its CRC-32, its vocabulary the model's (`vocab_size`) and its
        fingerprint the one config.json records."""
        tokenizer = Tokenizer.from_file(self.file(TOKENIZER_FILE))
        path = self.directory / TOKENIZER_FILE
        if tokenizer.vocab_size != vocab_size:
            raise CheckpointError(f"{path}: {tokenizer.vocab_size:,} tokens, the model's vocabulary has {vocab_size:,}")
        expected_fp = self.config.get("tokenizer", {}).get("fingerprint")
        if expected_fp and tokenizer.fingerprint != expected_fp:
            raise CheckpointError(f"{path}: tokenizer {tokenizer.fingerprint}, the model was made for {expected_fp}")
        return tokenizer


def eot_id(directory: StrPath, tokenizer: Tokenizer) -> int | None:
    """The end-of-text id a checkpoint records, which decoding stops at (None: its data had none)."""
    reader = CheckpointReader(directory)
    recorded = reader.config.get("tokenizer", {})
    if "eot_id" in recorded:
        return _token_id(reader.directory, recorded, "eot_id", tokenizer)
    return tokenizer.special_tokens.get(EOT)  # written before the id was recorded


def bos_id(directory: StrPath, tokenizer: Tokenizer) -> int | None:
    """The id a checkpoint puts before a text (generate.prompt_ids; None: none): the bos_id it
    records (an imported model's), else its end-of-text id."""
    reader = CheckpointReader(directory)
    recorded = reader.config.get("tokenizer", {})
    if "bos_id" in recorded:
        return _token_id(reader.directory, recorded, "bos_id", tokenizer)
    return eot_id(directory, tokenizer)


def _token_id(directory, recorded, key, tokenizer):
    value = recorded[key]
    if value is not None and not (type(value) is int and 0 <= value < tokenizer.vocab_size):
        raise CheckpointError(f"{directory / CONFIG_FILE}: tokenizer.{key} is {value!r}, expected a token id or null")
    return value


def stored_dtypes(directory: StrPath) -> dict[str, torch.dtype]:
    """The dtype of each tensor as a checkpoint's file holds it (load_model widens every one to
    float32), read from the file's header alone (no checksum: load_model checks the file); a LoRA
    run's are its base's, which its adapters are merged into."""
    from safetensors import safe_open

    reader = CheckpointReader(directory)
    if reader.lora is not None:
        return stored_dtypes(reader.base().directory)
    with safe_open(reader.directory / MODEL_FILE, framework="pt") as f:
        return {name: DTYPES[f.get_slice(name).get_dtype()] for name in f.keys()}


def check_target(
    directory: StrPath,
    overwrite: bool = False,
    extra_files: Collection[str] = (),
    what: str | None = None,
    sources: Iterable[Input] = (),
) -> None:
    """Refuse to write a checkpoint over an existing path that is not a checkpoint holding only
    what the new one will hold (its three files and `extra_files`, the trainer's), unless
    `overwrite`: a user's directory or file is refused, and so is a training checkpoint under
    `model init` or `import-hf`, whose optimizer and trainer state would be lost. `what`: the
    kind of checkpoint the refusal names; `sources`: what the command reads, which it is never
    written over or into (shared/files.py, check_apart)."""
    names = {MODEL_FILE, ADAPTER_FILE, CONFIG_FILE, TOKENIZER_FILE, *extra_files}

    def ours(path):
        try:
            return is_checkpoint(path) and {p.name for p in path.iterdir()} <= names
        except OSError:  # unreadable: not known to be ours
            return False

    what = what or ("a checkpoint" if extra_files else "a checkpoint of a model alone (without training state)")
    check_output(directory, ours, what, overwrite, directory=True, inputs=sources)


def is_checkpoint(directory: StrPath) -> bool:
    """Whether `directory` holds a checkpoint's config.json (ours to replace)."""
    try:
        return read_json(Path(directory) / CONFIG_FILE).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def inputs_of(checkpoint: StrPath, setting: str = "checkpoint") -> list[Input]:
    """What a command reading `checkpoint` (given by `setting`) reads, which its output may not be,
    hold or lie inside (shared/files.py, check_apart): the checkpoint and, for a LoRA run's, the
    checkpoint its adapters adapt, and so on down the chain. A checkpoint that cannot be read is
    named by the command's reading of it, later."""
    found, path = [Input.given(setting, checkpoint)], checkpoint
    while True:
        try:
            record = CheckpointReader(path, setting).config.get("lora")
        except InputError:
            return found
        base = record.get("base") if isinstance(record, dict) else None
        if not isinstance(base, str) or any(os.path.realpath(base) == os.path.realpath(i.path) for i in found):
            return found
        found.append(Input(base, f"{base}, the checkpoint whose weights {named(setting)} {checkpoint} adapts"))
        path = base


def config_digest(directory: StrPath) -> str:
    """The SHA-256 of a checkpoint's config.json: what a LoRA run records of the checkpoint it adapts."""
    return hashlib.sha256((Path(directory) / CONFIG_FILE).read_bytes()).hexdigest()


def _meta(config: ModelConfig, lora: LoraConfig | None = None) -> TransformerLM:
    """A model of `config` (with `lora`'s adapters) on the meta device: its tensors' names and shapes
    alone, which a checkpoint's tensors are checked against."""
    with torch.device("meta"):
        model = TransformerLM(config)
        if lora is not None:
            add_adapters(model, lora)
    return model


def file_crc32(path: StrPath) -> int:
    crc = 0
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            crc = zlib.crc32(block, crc)
    return crc
