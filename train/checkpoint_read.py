"""A checkpoint read back checked, nothing applied: the one a resume goes on from (read_state), the
one a new run starts from (initial_model), and the state and optimizer tensors a resume puts back
(checkpointing.py's Checkpoints.load). Every file is checked (its CRC-32, and every field and tensor
the run needs); a damaged checkpoint is an error that names the newest intact one of the run to resume
from instead (intact_note). Reading changes nothing; the trainer, the writer, settles what a writer
killed mid-swap left (shared/files.py) before it writes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gptkit.model.checkpoint import TOKENIZER_FILE, CheckpointError, CheckpointReader
from gptkit.model.config import ModelConfig
from gptkit.shared.errors import InputError, SettingError, named
from gptkit.shared.files import CHECKPOINTS, looked_up, settled
from gptkit.shared.jsonfile import is_count, read_json
from gptkit.shared.workers import MAX_THREADS
from gptkit.tokenizer import Tokenizer

from .sections import Job

OPTIMIZER_FILE, STATE_FILE = "optimizer.safetensors", "trainer_state.json"  # beside a model checkpoint's files


def read_state(
    checkpoint: str | Path, job: Job, tokenizer: Tokenizer, model_config: ModelConfig, setting: str = "resume"
) -> tuple[CheckpointReader, dict[str, Any]]:
    """`checkpoint`, which a resume of the run of `job` goes on from, opened (for
    Checkpoints.load), and its trainer state, checked and nothing applied: a checkpoint of another
    tokenizer than `tokenizer`, the run's data's, or of another model than `model_config`, the
    run's, is refused. `setting`: the flag that named it (--resume: the run's latest, or
    --from-checkpoint), named with the intact checkpoint where it cannot be followed (a loop of links)."""
    checkpoint = Path(checkpoint)
    try:
        looked_up(checkpoint, setting)
    except SettingError as e:
        raise SettingError(setting, f"{e.marked}; {intact_note(checkpoint, Path(job.out) / CHECKPOINTS)}") from None
    if not settled(checkpoint).exists():
        raise SettingError("out", f"{job.out}: no checkpoint to resume from ({checkpoint} is missing)")
    try:
        saved = CheckpointReader(checkpoint, setting)  # once, for every check below
        _check_tokenizer(checkpoint, saved.config, tokenizer, job.data)
        _check_model(checkpoint, saved.config, model_config)
        return saved, read_trainer_state(saved)
    except CheckpointError as e:
        raise CheckpointError(f"{e}; {intact_note(checkpoint, Path(job.out) / CHECKPOINTS)}") from None


def initial_model(job: Job, tokenizer: Tokenizer) -> tuple[dict[str, Any], CheckpointReader]:
    """(the model, the checkpoint opened) of a new run from job.init_from. The run's model is the
    checkpoint's, and it starts from the checkpoint's weights (Checkpoints.start_from). The checkpoint
    must be whole, and its tokenizer the one the data was encoded with, `tokenizer`. `job`'s paths as
    the user gave them: messages name them so (and the files found there: a run's latest/tokenizer.json).
    A model given beside it is refused unless it is the checkpoint's own, as the run's config.json records it."""
    both = SettingError(
        "init_from",
        f"{job.init_from}: give {named('init_from')} or {named('model')}, not both (the model is the checkpoint's)",
    )
    if job.model is not None and not isinstance(job.model, dict):
        raise both
    assert job.init_from is not None
    try:
        saved = CheckpointReader(job.init_from, "init_from")
    except CheckpointError as e:
        raise SettingError("init_from", str(e)) from None
    if job.model is not None and job.model != ModelConfig.from_dict(saved.config["model"], "init_from").to_dict():
        raise both
    _check_tokenizer(
        job.init_from,
        saved.config,
        tokenizer,
        job.data,
        "the checkpoint's model was made for",
        f"encode the data with {saved.directory / TOKENIZER_FILE}",
    )
    saved.file(TOKENIZER_FILE)  # its CRC-32: the checkpoint is whole
    return saved.config["model"], saved


def intact_note(damaged: Path, directory: Path, optimizers: Any = ()) -> str:
    """Which checkpoint in `directory` (the run's) a resume could start from instead of a damaged one
    (which may be a link that cannot be followed: compared by realpath, which never fails)."""
    for candidate in sorted(directory.glob("step-*"), reverse=True):
        if os.path.realpath(candidate) == os.path.realpath(damaged):
            continue
        try:
            saved = CheckpointReader(candidate)
            for name in saved.config.get("crc32", {}):
                saved.file(name)
            read_trainer_state(saved, optimizers)
        except InputError:  # a CheckpointError, or a candidate that cannot be followed
            continue
        return f"{candidate.name} is intact: resume from it with --resume --from-checkpoint {candidate}"
    return f"no intact checkpoint in {directory} to resume from"


def _check_tokenizer(
    checkpoint: str | Path,
    config: dict[str, Any],
    tokenizer: Tokenizer,
    data: str,
    whose: str = "the run was trained on",
    remedy: str = "resume with the data it was trained on, or start a new run",
) -> None:
    then = config.get("tokenizer") or {}
    if then.get("fingerprint") not in (None, tokenizer.fingerprint):
        raise SettingError(
            "data",
            f"{data}: encoded with tokenizer {tokenizer.fingerprint} ({tokenizer.vocab_size:,} tokens), "
            f"{whose} tokenizer {then['fingerprint']} ({then.get('vocab_size', 0):,} tokens) "
            f"in {checkpoint}; {remedy}",
        )


def _check_model(checkpoint: Path, config: dict[str, Any], model_config: ModelConfig) -> None:
    then = ModelConfig.from_dict(config["model"], f"{checkpoint}/config.json").to_dict()
    now = model_config.to_dict()
    differs = [k for k in now if then[k] != now[k]]
    if differs:
        raise SettingError(
            "resume",
            f"{checkpoint}: its model has {differs[0]} {then[differs[0]]!r}, the run's "
            f"{now[differs[0]]!r} (a checkpoint of another run, or the run's config.json was edited)",
        )


def read_trainer_state(saved: CheckpointReader, optimizers: Any = ()) -> dict[str, Any]:
    """The trainer_state.json of `saved` (a CheckpointReader), checked (its CRC-32 and every field
    a resume reads, a step count of each of `optimizers` among them)."""
    path = saved.file(STATE_FILE)
    try:
        state = read_json(path)
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path}: damaged, not JSON ({e})") from None
    problem = _state_problem(state, optimizers)
    if problem:
        raise CheckpointError(f"{path}: damaged ({problem})")
    return state


def _state_problem(state: object, optimizers: Iterable[str]) -> str | None:
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
    threads = state.get("threads")  # only where the run records its thread count
    if threads is not None and not (
        isinstance(threads, dict) and is_count(threads.get("count")) and 0 < threads["count"] <= MAX_THREADS
    ):  # bounded as --threads is: torch's kernels crash on 100,000 threads
        return f"'threads' is {threads!r}, not a thread count from 1 to {MAX_THREADS:,}"
    try:
        bytes.fromhex(state["rng"]["torch"])
    except (KeyError, TypeError, ValueError):
        return "no random-number state"
    return None


def read_optimizer_tensors(saved: CheckpointReader, optimizers: Any) -> dict[str, Any]:
    path = saved.directory / OPTIMIZER_FILE
    tensors = saved.tensors(OPTIMIZER_FILE)
    for key, state in optimizers.state_dict().items():
        for name, tensor in state["tensors"].items():
            found = tensors.get(f"{key}/{name}")
            if found is None or found.shape != tensor.shape:
                raise CheckpointError(
                    f"{path}: damaged ({'no' if found is None else 'a wrong shape of'} tensor {key}/{name})"
                )
    return tensors
