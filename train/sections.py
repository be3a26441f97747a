"""The sections of a run's settings: one small frozen dataclass per concern, each field a setting
declared once (train/setting.py: its type, default, help, range, what it goes with, whether a resume
may change it); train/config.py puts them together as TrainConfig."""

from __future__ import annotations

import os
import re
from dataclasses import MISSING, dataclass
from typing import Literal

from gptkit.model.lora import target_names, train_token_names
from gptkit.shared.errors import SettingError, named

from .setting import OnlyWith, setting, settings_of

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


DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?")
# The longest budget: a year, longer than anyone runs one machine on one job; a longer one is a slip
# (99999999999h), and an infinite one (1e400h) would plan no length at all.
LONGEST_HOURS = 366 * 24


def parse_duration(text: str) -> float:
    """Seconds in a duration: "90" or "90s", "2m", "1.5h", "1h30m", "2m30s"; above 0, at most LONGEST_HOURS."""
    match = DURATION.fullmatch(str(text).strip())
    seconds = match and sum(float(v) * unit for v, unit in zip(match.groups(), (3600, 60, 1)) if v)
    if not seconds:
        raise SettingError("max_time", f"{text!r}: expected a duration above 0 such as 90s, 2m or 1h30m")
    if not seconds <= LONGEST_HOURS * 3600:
        raise SettingError("max_time", f"{text!r}: longer than a year; at most {LONGEST_HOURS}h")
    return seconds


class Section:
    """A group of settings, each value kept as its setting converts it and checked when the section is
    made (a SettingError naming the first that cannot work). Paths given as pathlib.Path are kept as
    strings, as the JSON files keep them."""

    def __post_init__(self) -> None:
        for name, about in settings_of(type(self)).items():
            value = getattr(self, name)
            if isinstance(value, os.PathLike):
                value = os.fspath(value)
            if about.convert is not None:
                value = about.convert(value)
            object.__setattr__(self, name, value)
            problem = about.problem(value)
            if problem:
                raise SettingError(name, problem)


@dataclass(frozen=True)
class Job(Section):
    data: str = setting(
        MISSING,
        "A pretokenize output directory (shards + tokenizer.json).",
        shown="required; with --resume, the run's",
        metavar="DIR",
        expected="a pretokenize output directory",
        path=True,
    )
    out: str = setting(
        MISSING,
        "The run directory (config.json, metrics.jsonl, checkpoints/, latest).",
        shown="required",
        metavar="DIR",
        expected="a run directory",
        path=True,
    )
    # As given: a preset's name, a model config file, or a model config's fields (config.json records those).
    model: str | dict | None = setting(
        None,
        "A model preset name or a model config file (the run records the model itself).",
        shown=RECIPE,
        metavar="PRESET|FILE",
        expected="a preset name, a model config file or a model config",
        fixed_on_resume=True,
    )
    init_from: str | None = setting(
        None,
        "Start from this checkpoint's weights and model: a new run, with a fresh "
        "optimizer and schedule, on data encoded with the checkpoint's tokenizer.",
        metavar="DIR",
        expected="a checkpoint directory",
        path=True,
    )
    seed: int = setting(
        1337, "Seed of the model's initialization, the random loader and the samples.", least=0, fixed_on_resume=True
    )


@dataclass(frozen=True)
class Lora(Section):
    """Low-rank adapters on --init-from's frozen weights (model/lora/, which holds their rules)."""

    lora_rank: int | None = setting(
        None,
        "Train low-rank adapters of this rank on --init-from's weights, which stay frozen but for the "
        "rows of --lora-train-tokens; the run's checkpoints hold the adapters and rows alone and name "
        "the checkpoint they adapt.",
        shown="none: every weight trains",
        metavar="R",
        least=1,
        recorded_after="log_to",
    )
    lora_alpha: float | None = setting(
        None,
        "The adapters' update is scaled by alpha / rank.",
        shown="2 x --lora-rank",
        above=0,
        recorded_after="lora_rank",
    )
    lora_targets: str | list | None = setting(
        None,
        "The projections of every block that get adapters: all, or some of wq,wk,wv,wo (attention) and "
        "w1,w2,w3 (feed-forward; GPT-2's has no w3), comma-separated.",
        shown="all",
        metavar="NAMES",
        convert=target_names,
        recorded_after="lora_alpha",
    )
    lora_train_tokens: str | list | None = setting(
        None,
        "The tokens whose embedding and LM-head rows train beside the adapters: special (the tokenizer's "
        "special tokens that the training data holds, such as the chat tokens) and token ids, "
        "comma-separated, or none.",
        shown="special",
        metavar="TOKENS",
        convert=train_token_names,
        recorded_after="lora_targets",
    )


@dataclass(frozen=True)
class Parallelism(Section):
    device: Literal["auto", "cpu", "cuda"] = setting(
        "auto", "Where to train; auto: CUDA GPUs where there are some, else the CPU."
    )
    parallel: Literal["ddp", "fsdp"] = setting(
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
        least=1,
        fixed_on_resume=True,
    )
    grad_accum: int = setting(1, "Micro-steps per optimizer step.", least=1, fixed_on_resume=True)
    context_length: int | None = setting(
        None, "Tokens per sequence (at most the model's context).", shown="the model's", least=1, fixed_on_resume=True
    )
    loader: Literal["random", "sequential"] = setting(
        "random", "random (uniform offsets) | sequential (the token stream in order).", fixed_on_resume=True
    )
    merges: int | None = setting(
        None,
        "Train on the data's tokenizer cut to its first N merges (0: its 256 bytes), its special tokens "
        "kept: the data's ids mapped to the cut's in memory, no encoding again.",
        shown=f"{RECIPE}, by trial; with --model, all of them",
        metavar="N",
        least=0,
        recorded_after="lora_train_tokens",
    )
    verify_data: bool = setting(
        True,
        "Read every shard once before training: its CRC-32 and that every id fits the "
        "vocabulary (about 0.5 s per GiB from the page cache; --no-verify-data skips it for "
        "large data you trust).",
    )


@dataclass(frozen=True)
class Length(Section):
    """The run's length: one of the three. A resume may change it: the schedule is planned again from
    the step where the run resumes."""

    max_steps: int | None = setting(
        None,
        "Optimizer steps (with --resume: extend or shorten the run to this many).",
        shown=f"with --model, {WITHOUT_RECIPE['max_steps']}; else --max-time",
        least=1,
    )
    max_tokens: int | None = setting(None, "Train on this many tokens instead (sets the number of steps).", least=1)
    max_time: str | None = setting(
        None,
        "Train for this long instead (e.g. 2m, 90s, 1h30m): the steps are planned from "
        "the measured throughput so that the schedule ends on time.",
        shown=f"{DEFAULT_BUDGET} with the recipe, unless --max-steps or --max-tokens",
        metavar="DURATION",
        check=parse_duration,
    )


@dataclass(frozen=True)
class Optim(Section):
    optimizer: Literal["adamw", "muon"] = setting(
        "adamw",
        "adamw | muon (Muon for hidden matrices, AdamW for embeddings, head and gains).",
        fixed_on_resume=True,
    )
    lr: float | None = setting(
        None,
        "Peak learning rate (AdamW).",
        shown=f"{RECIPE}; with --model, {WITHOUT_RECIPE['lr']}",
        least=0,
        fixed_on_resume=True,
    )
    beta1: float = setting(0.9, "AdamW's first-moment decay.", least=0, below=1, fixed_on_resume=True)
    beta2: float = setting(0.95, "AdamW's second-moment decay.", least=0, below=1, fixed_on_resume=True)
    eps: float = setting(1e-8, "AdamW's epsilon.", above=0, fixed_on_resume=True)
    weight_decay: float = setting(0.1, "Decoupled weight decay, on matrices only.", least=0, fixed_on_resume=True)
    decay_embeddings: bool = setting(False, "Also decay the embedding (and a separate LM head).", fixed_on_resume=True)
    muon_lr: float = setting(
        0.02,
        "Peak learning rate of Muon.",
        least=0,
        only_with=OnlyWith("optimizer", "muon", f"AdamW's is {named('lr')}"),
        fixed_on_resume=True,
    )
    muon_momentum: float = setting(
        0.95,
        "Muon's momentum (Nesterov).",
        least=0,
        below=1,
        only_with=OnlyWith("optimizer", "muon", f"AdamW's are {named('beta1')} and {named('beta2')}"),
        fixed_on_resume=True,
    )
    grad_clip: float = setting(
        1.0, "Clip the global gradient L2 norm to this (0: no clipping).", least=0, fixed_on_resume=True
    )


@dataclass(frozen=True)
class LRSchedule(Section):
    """The learning rate of each step, as a fraction of the peak (train/schedule.py, Schedule)."""

    min_lr: float | None = setting(
        None,
        "Learning rate at the end of the schedule.",
        shown="a tenth of --lr",
        least=0,
        fixed_on_resume=True,
        recorded_after="lr",
    )
    schedule: Literal["cosine", "wsd"] = setting(
        "cosine",
        "cosine (warmup, cosine to min_lr) | wsd (warmup, stable, linear cool-down).",
        fixed_on_resume=True,
    )
    # unset: train/schedule.py's WARMUP_FRACTION of the steps, however many a timed run turns out to have
    warmup_steps: int | None = setting(
        None,
        "Steps of linear warmup, as given (a run shorter than it ends warming up).",
        shown="a twentieth of the run's steps",
        least=0,
        fixed_on_resume=True,
    )
    decay_steps: int | None = setting(
        None,
        "cosine: the step where min_lr is reached.",
        shown="the last",
        least=0,
        only_with=OnlyWith("schedule", "cosine", f"wsd cools down over {named('cooldown_fraction')} of the steps"),
        fixed_on_resume=True,
    )
    cooldown_fraction: float = setting(
        0.2,
        "wsd: the final fraction of the steps spent decaying to min_lr.",
        least=0,
        most=1,
        only_with=OnlyWith("schedule", "wsd", f"cosine decays over {named('decay_steps')}"),
        fixed_on_resume=True,
    )


@dataclass(frozen=True)
class Evaluation(Section):
    eval_interval: int | None = setting(
        None,
        "Steps between validation losses (0: only at the end).",
        shown=f"{RECIPE} (5 evaluations); with --model, {WITHOUT_RECIPE['eval_interval']}",
        least=0,
    )
    eval_tokens: int = setting(65536, "Validation tokens (the first of the val split; the same every time).", least=1)
    eval_hellaswag: str | None = setting(
        None,
        "Also score this HellaSwag jsonl at every evaluation: acc and acc_norm, as "
        "`gptkit eval hellaswag` scores them.",
        metavar="FILE",
        expected="a HellaSwag jsonl file",
        path=True,
    )
    sample_interval: int = setting(0, "Steps between generated samples (0: never).", least=0)
    sample_prompt: str = setting("Once upon a time", "The prompt of the samples.")
    sample_tokens: int = setting(48, "Tokens generated per sample.", least=1)


@dataclass(frozen=True)
class Metrics(Section):
    log_interval: int = setting(10, "Steps between log lines.", least=1, recorded_after="eval_hellaswag")
    log_to: str | list | None = setting(
        None,
        "Also send metrics.jsonl's records to these trackers: tensorboard, wandb "
        "(comma-separated; docs/train.md, Trackers).",
        metavar="NAMES",
        convert=tracker_names,
        recorded_after="keep_last",
    )


@dataclass(frozen=True)
class Checkpoint(Section):
    checkpoint_interval: int = setting(500, "Steps between checkpoints (0: only at the end).", least=0)
    checkpoint_tokens: int | None = setting(None, "Also a checkpoint every this many tokens.", least=1)
    keep_last: int = setting(3, "Checkpoints kept.", least=1)
