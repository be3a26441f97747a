"""The adapters' settings and their rules: which projections of a block may carry adapters
(projections), the flags' values read (target_names, train_token_names), LoraConfig (the adapters a
run trains on a model, checked against it, and told in its messages), and the rules a run's settings
keep: what the adapters' settings go with (check_settings), what a resume may not change
(check_resumed). Torch-free: the command line's option tables import it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gptkit.shared.errors import SettingError, named

from ..config import ModelConfig

# The projections of a block that can carry adapters: the attention's query, key, value and output,
# and the feed-forward's (GPT-2's MLP has no w3).
ATTENTION, FEED_FORWARD = ("wq", "wk", "wv", "wo"), ("w1", "w2", "w3")


def projections(config: ModelConfig) -> dict[str, tuple[int, int]]:
    """The adaptable projections of `config`'s blocks: name -> (in, out) features."""
    d, q, kv = config.d_model, config.n_heads * config.head_dim, config.n_kv_heads * config.head_dim
    sizes = {"wq": (d, q), "wk": (d, kv), "wv": (d, kv), "wo": (q, d), "w1": (d, config.d_ff), "w2": (config.d_ff, d)}
    if config.architecture != "gpt2":
        sizes["w3"] = (d, config.d_ff)
    return sizes


def target_names(value: str | Iterable[str] | None) -> list[str] | None:
    """--lora-targets as a list: comma-separated names of ATTENTION and FEED_FORWARD, or "all" alone;
    None where unset (then all)."""
    if value is None:
        return None
    names = value.split(",") if isinstance(value, str) else list(value)
    if not all(isinstance(n, str) for n in names):
        raise SettingError("lora_targets", f"{value!r}: expected projection names, comma-separated")
    names = list(dict.fromkeys(n.strip() for n in names if n.strip()))
    if names == ["all"]:
        return names
    known = ATTENTION + FEED_FORWARD
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        what = repr(unknown[0] if unknown else value)
        raise SettingError(
            "lora_targets", f"{what}: expected all (alone), or some of {', '.join(known)} (comma-separated)"
        )
    return names


def train_token_names(value: str | Iterable[str | int] | None) -> list[str | int] | None:
    """--lora-train-tokens as a list: "special" (the tokenizer's special tokens that the data holds)
    and token ids, comma-separated, or "none" alone; None where unset (then special)."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    names: list[str | int] = []
    for item in items:
        text = item.strip() if isinstance(item, str) else item
        if text == "":
            continue
        if text in ("special", "none"):
            names.append(text)
        elif type(text) is int or (isinstance(text, str) and text.isdigit() and text.isascii()):
            names.append(int(text))
        else:
            names = []
            break
    names = list(dict.fromkeys(names))
    if not names or ("none" in names and len(names) > 1):
        raise SettingError(
            "lora_train_tokens", f"{value!r}: expected none (alone), or special and token ids (comma-separated)"
        )
    return names


@dataclass(frozen=True)
class LoraConfig:
    """The adapters of a run: their rank, alpha (their update is scaled by alpha / rank), the
    projections of every block that carry them, and the tokens whose embedding and LM-head rows
    train beside them (peft's trainable tokens), checked against the model they adapt."""

    rank: int
    alpha: float
    targets: tuple[str, ...]
    tokens: tuple[int, ...] = ()  # ascending ids

    @property
    def scale(self) -> float:
        return self.alpha / self.rank

    @classmethod
    def of(
        cls,
        model: ModelConfig,
        rank: int,
        alpha: float | None,
        targets: Sequence[str] | None,
        tokens: Iterable[int] = (),
    ) -> LoraConfig:
        """The adapters asked for on `model`: alpha None is twice the rank; targets None or ["all"]
        are every projection the architecture has; `tokens`: the ids whose rows train. A target the
        architecture lacks, a rank above a target's smaller side (an update of that rank is the
        whole matrix), or an id outside the vocabulary is a SettingError."""
        tokens = tuple(sorted(set(tokens)))
        outside = [t for t in tokens if not 0 <= t < model.vocab_size]
        if outside:
            raise SettingError(
                "lora_train_tokens",
                f"{outside[0]}: not a token id of the model's vocabulary (0 to {model.vocab_size - 1})",
            )
        sizes = projections(model)
        chosen = tuple(sizes) if targets is None or list(targets) == ["all"] else tuple(targets)
        missing = [t for t in chosen if t not in sizes]
        if missing:
            raise SettingError(
                "lora_targets",
                f"{missing[0]}: architecture {model.architecture!r} has no such projection (it has {', '.join(sizes)})",
            )
        name, (fan_in, fan_out) = min(((t, sizes[t]) for t in chosen), key=lambda item: min(item[1]))
        if rank > min(fan_in, fan_out):
            raise SettingError(
                "lora_rank",
                f"{rank}: larger than the projection {name} ({fan_in} x {fan_out}) it adapts; at most "
                f"{min(fan_in, fan_out)}",
            )
        return cls(rank, float(2 * rank if alpha is None else alpha), chosen, tokens)

    def with_tokens(self, tokens: Iterable[int]) -> LoraConfig:
        """These adapters with the rows of `tokens` (ids of the model's vocabulary) trained too."""
        return dataclasses.replace(self, tokens=tuple(sorted({*self.tokens, *tokens})))

    def params(self, model: ModelConfig) -> int:
        """The adapters' parameters on `model`: r x (in + out) for each target of each block, and a
        row of d_model for each trained token in the embedding (and in a separate LM head)."""
        sizes = projections(model)
        rows = len(self.tokens) * model.d_model * (1 if model.tie_embeddings else 2)
        return model.n_layers * sum(self.rank * sum(sizes[t]) for t in self.targets) + rows

    def to_dict(self) -> dict:
        return {"rank": self.rank, "alpha": self.alpha, "targets": list(self.targets), "tokens": list(self.tokens)}

    def describe(self) -> str:
        """The adapters in words, for a message: their rank, alpha, targets and the tokens whose rows train."""
        rows = f" with the rows of tokens {','.join(map(str, self.tokens))}" if self.tokens else " with no token rows"
        return f"rank {self.rank}, alpha {self.alpha:g} on {','.join(self.targets)}{rows}"

    def summary(self, trained: int, frozen: int, special_tokens: Mapping[str, int]) -> str:
        """What a run of these adapters trains, for its first line: `trained` parameters (the adapters
        and the rows) on `frozen` ones, and the tokens whose rows train, the special ones by their
        names (`special_tokens`: the tokenizer's, name -> id)."""
        return (
            f"{trained:,} adapter parameters (LoRA rank {self.rank}, alpha {self.alpha:g}, on "
            f"{','.join(self.targets)}{self._rows(special_tokens)}) on {frozen:,} frozen ones"
        )

    def _rows(self, special_tokens: Mapping[str, int]) -> str:
        if not self.tokens:
            return ""
        names = {i: name for name, i in special_tokens.items()}
        shown = ", ".join(names.get(t, str(t)) for t in self.tokens[:8]) + (", ..." if len(self.tokens) > 8 else "")
        return f"; the rows of {len(self.tokens)} token{'s' if len(self.tokens) > 1 else ''}: {shown}"


def adapters_asked(
    model: ModelConfig,
    rank: int | None,
    alpha: float | None,
    targets: Sequence[str] | None,
    train_tokens: Sequence[str | int] | None,
) -> LoraConfig | None:
    """The adapters a run's settings ask for on `model` (rank None: none), checked against its
    projections, with the rows of the token ids among `train_tokens` (--lora-train-tokens' names,
    train_token_names): the special tokens the data holds are the caller's to add (wants_special)."""
    if rank is None:
        return None
    ids = [t for t in train_tokens or () if isinstance(t, int)]
    return LoraConfig.of(model, rank, alpha, targets, ids)


def wants_special(train_tokens: Sequence[str | int] | None) -> bool:
    """Whether --lora-train-tokens (`train_tokens`; None: its default) asks for the rows of the special
    tokens the training data holds."""
    return "special" in (train_tokens or ["special"])


def check_settings(values: Mapping[str, Any]) -> None:
    """The adapters' settings among a run's flat settings (`values`; TrainConfig checks them with
    these): alpha, targets and rows go with a rank, and a rank with the checkpoint it adapts; its
    AdamW state is the memory they save (Muon would orthogonalize matrices of rank r)."""
    if values["lora_rank"] is None:
        given = [name for name in ("lora_alpha", "lora_targets", "lora_train_tokens") if values[name] is not None]
        if given:
            value = values[given[0]]
            shown = ",".join(map(str, value)) if isinstance(value, list) else value  # as the flag takes it
            raise SettingError(given[0], f"{shown}: only with {named('lora_rank')} (the adapters' rank)")
        return
    if values["init_from"] is None:
        raise SettingError(
            "lora_rank",
            f"{values['lora_rank']}: adapters train on a checkpoint's frozen weights; give it with {named('init_from')}",
        )
    if values["optimizer"] != "adamw":
        raise SettingError(
            "optimizer", f"{values['optimizer']}: adapters train with adamw (not with {named('lora_rank')})"
        )


def check_resumed(saved: LoraConfig | None, asked: LoraConfig | None, checkpoint: object) -> None:
    """Refuse a resume whose settings ask for adapters (`asked`; None: none) other than those its
    `checkpoint` holds (`saved`): a resume keeps the run's adapters. Where the rows alone differ, the
    refusal names the tokens to resume with."""
    if saved == asked:
        return
    remedy = "start a new run to change them"
    if saved and asked and dataclasses.replace(saved, tokens=asked.tokens) == asked:
        remedy = f"resume with {named('lora_train_tokens')} {','.join(map(str, saved.tokens)) or 'none'}"
    raise SettingError(
        "resume",
        f"{checkpoint}: its adapters are {_described(saved)}, and the settings ask for "
        f"{_described(asked)}; a resume keeps the run's adapters ({remedy})",
    )


def _described(lora: LoraConfig | None) -> str:
    return "none (every weight trains)" if lora is None else lora.describe()
