"""Reading a Hugging Face model directory, whatever its family: config.json's fields, and the
weights transformers reads (model.safetensors before model.safetensors.index.json and its
shards). Every error is one line naming the file and the field."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from gptkit.shared.errors import InputError
from gptkit.shared.files import StrPath, regular_file
from gptkit.shared.jsonfile import read_json


def read_json_object(path: StrPath) -> dict[str, Any]:
    try:
        data = read_json(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file (expected a Hugging Face model directory)") from None
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: not a readable JSON file ({e})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object")
    return data


class HFConfig:
    """config.json's fields, each read with the default its architecture's config class gives it,
    type-checked; an error names the file and the field."""

    def __init__(self, path: StrPath, data: Mapping[str, Any], defaults: Mapping[str, Any]) -> None:
        self.path, self.data, self.defaults = path, data, defaults

    def get(self, field: str, kind: type | None = None, nullable: bool = False) -> Any:
        """`nullable`: null is taken (the fields whose null transformers derives from others)."""
        if field not in self.data and field not in self.defaults:
            raise InputError(f"{self.path}: {field} is missing")
        value = self.data[field] if field in self.data else self.defaults[field]
        if kind is int and not ((value is None and nullable) or (type(value) is int and value >= 1)):
            raise self.refused(field, value, "a whole number, 1 or more")
        if kind is float and not (type(value) in (int, float) and 0 < value < math.inf):
            raise self.refused(field, value, "a number above 0")
        if kind is bool and type(value) is not bool:
            raise self.refused(field, value, "true or false")
        return value

    def require(self, field: str, expected: object, why: str = "") -> None:
        value = self.get(field)
        if value != expected:
            raise self.refused(field, value, f"{json.dumps(expected)}{why}")

    def refused(self, field: str, value: object, expected: str) -> InputError:
        return InputError(
            f"{self.path}: {field} {json.dumps(value, default=str)} is not supported; expected {expected}"
        )


def weight_files(hf_dir: Path, data: Mapping[str, Any]) -> tuple[Path, dict[str, list[str] | None]]:
    """(the file that names the weights, {file: the tensors the index places there, None: all}):
    model.safetensors, else the shards model.safetensors.index.json lists. transformers' order
    (modeling_utils, _get_resolved_checkpoint_files), so that a directory holding both is what it is
    there; a config.json naming another file (transformers_weights) is refused."""
    if "transformers_weights" in data:
        raise InputError(
            f"{hf_dir / 'config.json'}: transformers_weights {json.dumps(data['transformers_weights'])} is not "
            "supported; expected no such field (the weights read are model.safetensors, else "
            "model.safetensors.index.json)"
        )
    index_path, single = hf_dir / "model.safetensors.index.json", hf_dir / "model.safetensors"
    if single.is_file():
        return single, {single.name: None}
    if index_path.is_file():
        weight_map = read_json_object(index_path).get("weight_map")
        if not (isinstance(weight_map, dict) and all(isinstance(f, str) and "/" not in f for f in weight_map.values())):
            raise InputError(f"{index_path}: weight_map is not an object of tensor name -> file of this directory")
        return index_path, {
            name: [key for key, file in weight_map.items() if file == name] for name in sorted(set(weight_map.values()))
        }
    raise InputError(
        f"{hf_dir}: no model.safetensors or model.safetensors.index.json (pickled .bin weights are not "
        "read: unpickling can run code)"
    )


def count_tensors(source: Path, files: Iterable[str]) -> int:
    """The tensors `files` (weight_files) hold, from their headers alone."""
    from safetensors import SafetensorError, safe_open

    tensors = 0
    for name in files:
        path = source.parent / name
        try:
            with safe_open(regular_file(path), framework="pt") as f:
                tensors += len(f.keys())
        except (SafetensorError, OSError) as e:
            raise InputError(f"{path}: not a readable safetensors file ({e})") from None
    return tensors


def read_weights(
    source: Path, files: Mapping[str, Sequence[str] | None], stored_name: Callable[[str], str]
) -> tuple[dict[str, torch.Tensor], dict[str, Path]]:
    """(name -> tensor, name -> the file it was read from) of `files` (weight_files), each tensor
    under the name transformers reads it by (`stored_name` of the name the file holds)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    tensors, file_of = {}, {}
    for name, listed in files.items():
        path = source.parent / name
        try:
            loaded = load_file(regular_file(path))
        except (SafetensorError, OSError) as e:
            raise InputError(f"{path}: not a readable safetensors file ({e})") from None
        if set(listed or ()) - set(loaded):
            assert listed is not None
            raise InputError(
                f"{path}: no tensor {sorted(set(listed) - set(loaded))[0]!r}, which {source.name} places there"
            )
        for key, tensor in loaded.items():
            tensors[stored_name(key)], file_of[stored_name(key)] = tensor, path
    return tensors, file_of


def dtype_name(dtype: torch.dtype) -> str:
    """config.json's name of a dtype: torch.bfloat16 -> bfloat16."""
    return str(dtype).removeprefix("torch.")
