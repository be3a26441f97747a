"""The sections of a run's settings: one small frozen dataclass per concern, each field a setting with
the help its flag shows (train/config.py puts them together as TrainConfig)."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import MISSING, dataclass, field
from typing import Any

from gptkit.model.config import target_names, train_token_names
from gptkit.shared.errors import SettingError

# The recipe's budget where no length is given: long enough to learn something, short enough to wait for.
DEFAULT_BUDGET = "5m"

# Where the model is given (--model, a preset), the recipe does not run. The settings it would choose
# take these values where the user left them unset (min_lr: a tenth of lr).
WITHOUT_RECIPE = {"batch_size": 8, "lr": 1e-3, "eval_interval": 200, "max_steps": 1000}

RECIPE = "the recipe's for the data, the budget and the device"  # what --help shows where the recipe decides

TRACKERS = (
    "tensorboard",
    "wandb",
)  # trackers.py; each writes under RUN/<its name>/ (run_dir.py counts those as the run's)


def tracker_names(value: str | list[str] | None) -> list[str] | None:
    """log_to's value as Metrics keeps it: the trackers named (a comma-separated string or a list), in
    order, without repeats; None for none."""
    names = value.split(",") if isinstance(value, str) else value
    if names is not None and not (isinstance(names, (list, tuple)) and all(isinstance(n, str) for n in names)):
        raise SettingError("log_to", f"{value!r}: expected tracker names, comma-separated ({', '.join(TRACKERS)})")
    names = [n.strip() for n in names or () if n.strip()]
    unknown = [n for n in names if n not in TRACKERS]
    if unknown:
        raise SettingError("log_to", f"{unknown[0]!r}: not a tracker (expected {', '.join(TRACKERS)}, comma-separated)")
    return list(dict.fromkeys(names)) or None


def setting(default: Any, help: str, *, shown: str | None = None, metavar: str | None = None) -> Any:
    """A field with what `gptkit train run --help` says of its flag: `help`; `shown`, the default that
    --help shows where it is not `default`; `metavar`, where the type's name says too little."""
    return field(default=default, metadata={"help": help, "shown": shown, "metavar": metavar})


class Section:
    """A group of settings. Paths given as pathlib.Path are kept as strings, as the JSON files keep them."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # type: ignore[arg-type]  # every subclass is a dataclass
            if isinstance(getattr(self, f.name), os.PathLike):
                object.__setattr__(self, f.name, os.fspath(getattr(self, f.name)))


@dataclass(frozen=True)
class Job(Section):
    data: str = setting(
        MISSING,
        "A pretokenize output directory (shards + tokenizer.json).",
        shown="required; with --resume, the run's",
        metavar="DIR",
    )
    out: str = setting(
        MISSING,
        "The run directory (config.json, metrics.jsonl, checkpoints/, latest).",
        shown="required",
        metavar="DIR",
    )
    # As given: a preset's name, a model config file, or a model config's fields (config.json records those).
    model: str | dict | None = setting(
        None,
        "A model preset name or a model config file (the run records the model itself).",
        shown=RECIPE,
        metavar="PRESET|FILE",
    )
    init_from: str | None = setting(
        None,
        "Start from this checkpoint's weights and model: a new run, with a fresh "
        "optimizer and schedule, on data encoded with the checkpoint's tokenizer.",
        metavar="DIR",
    )
    seed: int = setting(1337, "Seed of the model's initialization, the random loader and the samples.")


@dataclass(frozen=True)
class Lora(Section):
    """Low-rank adapters on --init-from's frozen weights (model/lora.py)."""

    lora_rank: int | None = setting(
        None,
        "Train low-rank adapters of this rank on --init-from's weights, which stay frozen but for the "
        "rows of --lora-train-tokens; the run's checkpoints hold the adapters and rows alone and name "
        "the checkpoint they adapt.",
        shown="none: every weight trains",
        metavar="R",
    )
    lora_alpha: float | None = setting(None, "The adapters' update is scaled by alpha / rank.", shown="2 x --lora-rank")
    lora_targets: str | list | None = setting(
        None,
        "The projections of every block that get adapters: all, or some of wq,wk,wv,wo (attention) and "
        "w1,w2,w3 (feed-forward; GPT-2's has no w3), comma-separated.",
        shown="all",
        metavar="NAMES",
    )
    lora_train_tokens: str | list | None = setting(
        None,
        "The tokens whose embedding and LM-head rows train beside the adapters: special (the tokenizer's "
        "special tokens that the training data holds, such as the chat tokens) and token ids, "
        "comma-separated, or none.",
        shown="special",
        metavar="TOKENS",
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "lora_targets", target_names(self.lora_targets))  # kept as a list of names
        object.__setattr__(self, "lora_train_tokens", train_token_names(self.lora_train_tokens))


@dataclass(frozen=True)
class Parallelism(Section):
    device: str = setting("auto", "Where to train; auto: CUDA GPUs where there are some, else the CPU.")
    parallel: str = setting(
        "ddp",
        "ddp (each process holds the whole model, its gradients and optimizer state) | fsdp "
        "(FSDP2: each of N processes holds a 1/N shard of them, N = 1 included).",
    )
    activation_checkpointing: bool = setting(
        False,
        "Keep each block's input only and recompute its activations in the "
        "backward pass: far less activation memory for about a third more "
        "compute.",
    )
    compile: bool | None = setting(
        None, "Compile the model with torch.compile (costs 30-40 s on CPU and gains nothing there).", shown="on CUDA"
    )
    deterministic: bool = setting(
        False,
        "Deterministic algorithms only (torch.use_deterministic_algorithms, cuBLAS's "
        "fixed workspace, Inductor's kernels chosen without timing them): a CUDA run, "
        "compiled or not, repeats itself bit for bit, a resume included, somewhat "
        "slower. On the CPU it fixes torch's threads (one per physical core unless "
        "--threads is given), and a resume goes on with the count the run recorded.",
    )


@dataclass(frozen=True)
class Batch(Section):
    """Each optimizer step sees batch_size x grad_accum sequences of context_length tokens. batch_size
    counts the sequences of all processes together; each process takes its share."""

    batch_size: int | None = setting(
        None,
        "Sequences per micro-step, all processes together.",
        shown=f"{RECIPE}; with --model, {WITHOUT_RECIPE['batch_size']}",
    )
    grad_accum: int = setting(1, "Micro-steps per optimizer step.")
    context_length: int | None = setting(
        None, "Tokens per sequence (at most the model's context).", shown="the model's"
    )
    loader: str = setting("random", "random (uniform offsets) | sequential (the token stream in order).")
    merges: int | None = setting(
        None,
        "Train on the data's tokenizer cut to its first N merges (0: its 256 bytes), its special tokens "
        "kept: the data's ids mapped to the cut's in memory, no encoding again.",
        shown=f"{RECIPE}, by trial; with --model, all of them",
        metavar="N",
    )
    verify_data: bool = setting(
        True,
        "Read every shard once before training: its CRC-32 and that every id fits the "
        "vocabulary (about 0.5 s per GiB from the page cache; --no-verify-data skips it for "
        "large data you trust).",
    )


@dataclass(frozen=True)
class Length(Section):
    """The run's length: one of the three."""

    max_steps: int | None = setting(
        None,
        "Optimizer steps (with --resume: extend or shorten the run to this many).",
        shown=f"with --model, {WITHOUT_RECIPE['max_steps']}; else --max-time",
    )
    max_tokens: int | None = setting(None, "Train on this many tokens instead (sets the number of steps).")
    max_time: str | None = setting(
        None,
        "Train for this long instead (e.g. 2m, 90s, 1h30m): the steps are planned from "
        "the measured throughput so that the schedule ends on time.",
        shown=f"{DEFAULT_BUDGET} with the recipe, unless --max-steps or --max-tokens",
        metavar="DURATION",
    )


@dataclass(frozen=True)
class Optim(Section):
    optimizer: str = setting("adamw", "adamw | muon (Muon for hidden matrices, AdamW for embeddings, head and gains).")
    lr: float | None = setting(
        None, "Peak learning rate (AdamW).", shown=f"{RECIPE}; with --model, {WITHOUT_RECIPE['lr']}"
    )
    beta1: float = setting(0.9, "AdamW's first-moment decay.")
    beta2: float = setting(0.95, "AdamW's second-moment decay.")
    eps: float = setting(1e-8, "AdamW's epsilon.")
    weight_decay: float = setting(0.1, "Decoupled weight decay, on matrices only.")
    decay_embeddings: bool = setting(False, "Also decay the embedding (and a separate LM head).")
    muon_lr: float = setting(0.02, "Peak learning rate of Muon.")
    muon_momentum: float = setting(0.95, "Muon's momentum (Nesterov).")
    grad_clip: float = setting(1.0, "Clip the global gradient L2 norm to this (0: no clipping).")


@dataclass(frozen=True)
class LRSchedule(Section):
    """The learning rate of each step, as a fraction of the peak (train/optim.py, Schedule)."""

    min_lr: float | None = setting(None, "Learning rate at the end of the schedule.", shown="a tenth of --lr")
    schedule: str = setting("cosine", "cosine (warmup, cosine to min_lr) | wsd (warmup, stable, linear cool-down).")
    # unset: train/optim.py's WARMUP_FRACTION of the steps, however many a timed run turns out to have
    warmup_steps: int | None = setting(
        None,
        "Steps of linear warmup, as given (a run shorter than it ends warming up).",
        shown="a twentieth of the run's steps",
    )
    decay_steps: int | None = setting(None, "cosine: the step where min_lr is reached.", shown="the last")
    cooldown_fraction: float = setting(0.2, "wsd: the final fraction of the steps spent decaying to min_lr.")


@dataclass(frozen=True)
class Evaluation(Section):
    eval_interval: int | None = setting(
        None,
        "Steps between validation losses (0: only at the end).",
        shown=f"{RECIPE} (5 evaluations); with --model, {WITHOUT_RECIPE['eval_interval']}",
    )
    eval_tokens: int = setting(65536, "Validation tokens (the first of the val split; the same every time).")
    eval_hellaswag: str | None = setting(
        None,
        "Also score this HellaSwag jsonl at every evaluation: acc and acc_norm, as "
        "`gptkit eval hellaswag` scores them.",
        metavar="FILE",
    )
    sample_interval: int = setting(0, "Steps between generated samples (0: never).")
    sample_prompt: str = setting("Once upon a time", "The prompt of the samples.")
    sample_tokens: int = setting(48, "Tokens generated per sample.")


@dataclass(frozen=True)
class Metrics(Section):
    log_interval: int = setting(10, "Steps between log lines.")
    log_to: str | list | None = setting(
        None,
        "Also send metrics.jsonl's records to these trackers: tensorboard, wandb "
        "(comma-separated; docs/train.md, Trackers).",
        metavar="NAMES",
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "log_to", tracker_names(self.log_to))  # kept as a list of names


@dataclass(frozen=True)
class Checkpoint(Section):
    checkpoint_interval: int = setting(500, "Steps between checkpoints (0: only at the end).")
    checkpoint_tokens: int | None = setting(None, "Also a checkpoint every this many tokens.")
    keep_last: int = setting(3, "Checkpoints kept.")
