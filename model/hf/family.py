"""What a model family's adapter is: one table naming each of our modules in the Hugging Face
layout (with how its tensors are held there), the Hugging Face architectures it reads, and its
config.json both ways. llama.py and gpt2.py are the two families."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from gptkit.shared.errors import InputError, SettingError

from ..config import ModelConfig
from .files import HFConfig

_LAYER = re.compile(r"layers\.(\d+)\.")


@dataclass(frozen=True)
class Theirs:
    """Where one of our modules lies in the Hugging Face model: its name there ("{}": the layer's
    number) and how its tensors are held."""

    name: str
    conv1d: bool = False  # GPT-2's Conv1D: a Linear's weight held transposed, (in, out), for y = x @ W + b
    third: int | None = None  # that third of the module's outputs (GPT-2's c_attn: the queries, keys, values)


class Family:
    """An adapter. `names`: our module ("layers.{}." for every layer's) -> Theirs;
    `architectures`: the Hugging Face architectures read -> (model_type, what its config class
    takes for a field config.json leaves out, for the fields that change what the model computes;
    tests/integration/test_import_hf.py checks them against transformers); `config_names`: ModelConfig's
    fields -> config.json's, for messages; `ignored`: buffers some files hold beside the weights,
    skipped as transformers skips them."""

    names: dict
    architectures: dict
    config_names: dict
    ignored: tuple = ()
    vocab_files = False  # the tokenizer may be GPT-2's vocab.json and merges.txt instead of a tokenizer.json
    bos_token_starts = False  # a text starts after config.json's bos_token_id where the tokenizer adds none

    def architecture(self, config: ModelConfig) -> str:
        """The Hugging Face architecture that computes what `config` does."""
        raise NotImplementedError

    def hf_config(self, config: ModelConfig, model_type: str) -> dict[str, Any]:
        """config.json's fields of this family (export_hf's hf_config adds those every family has)."""
        raise NotImplementedError

    def fields(self, hf: HFConfig, architecture: str) -> dict[str, Any]:
        """ModelConfig's fields of config.json, or the one-line refusal of what is not computed here."""
        raise NotImplementedError

    def stored_name(self, name: str) -> str:
        """A tensor's name as transformers reads it from a file that holds it under `name`."""
        return name

    def model_config(self, hf: HFConfig, architecture: str) -> ModelConfig:
        fields, names = self.fields(hf, architecture), self.config_names_of(hf)
        try:
            return ModelConfig(
                vocab_size=hf.get("vocab_size", int),
                tie_embeddings=hf.get("tie_word_embeddings", bool),
                init_std=hf.data.get("initializer_range") or 0.02,
                **fields,
            )
        except SettingError as e:  # it names our fields: name config.json's
            problem = re.sub(rf"\b({'|'.join(names)})\b", lambda m: names[m[1]], e.problem)
            raise InputError(f"{hf.path}: {names.get(e.setting, e.setting)} {problem}") from None

    def config_names_of(self, hf: HFConfig) -> dict:
        """config_names, for the config.json `hf`."""
        return self.config_names

    def locate(self, name: str) -> tuple[str, int | None, bool]:
        """(the Hugging Face name of our tensor `name`, its third or None, whether it is transposed)."""
        module, param = name.rsplit(".", 1)
        layer = _LAYER.match(module)
        theirs = self.names[module if layer is None else f"layers.{{}}.{module[layer.end() :]}"]
        hf = theirs.name if layer is None else theirs.name.format(layer[1])
        return f"{hf}.{param}", theirs.third, theirs.conv1d and param == "weight"

    def to_hf(self, tensors: dict) -> dict:
        """Our tensors (model_tensors) under their Hugging Face names, in Hugging Face's layout."""
        parts: dict[str, dict[int | None, Any]] = {}
        for name, tensor in tensors.items():
            hf, third, transposed = self.locate(name)
            parts.setdefault(hf, {})[third] = tensor.T if transposed else tensor
        return {
            hf: (pieces[None] if None in pieces else torch.cat([pieces[i] for i in range(3)], dim=-1)).contiguous()
            for hf, pieces in parts.items()
        }

    def from_hf(self, hf_tensors: dict, names: Iterable[str]) -> dict:
        """Our tensors `names` out of Hugging Face's (to_hf's inverse)."""
        tensors = {}
        for name in names:
            hf, third, transposed = self.locate(name)
            tensor = hf_tensors[hf] if third is None else hf_tensors[hf].chunk(3, dim=-1)[third]
            tensors[name] = (tensor.T if transposed else tensor).contiguous()
        return tensors
