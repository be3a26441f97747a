"""A resume checked against the run it goes on (settle.py's last step): the checkpoint it goes
on from, opened and checked (checkpoint_read.read_state), the same settings but for the length, the
same data by its content wherever it lies now, a new length that leaves steps to do, and the
thread count the run records, where it records one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gptkit.model.lora import check_resumed
from gptkit.runtime.threads import Threads
from gptkit.shared.errors import InputError, SettingError, named
from gptkit.shared.files import looked_up
from gptkit.shared.shard_dir import ShardDir, identity_difference

from .budget import steps_asked
from .checkpoint_read import read_state
from .config import LENGTH, TrainConfig, fixed_difference
from .prepared import Resume, Run
from .run_dir import LATEST


def check_resume(
    run: Run, resume: bool | str, given: TrainConfig, then: dict[str, Any], threads: Threads | None
) -> Resume:
    """Check that `run` can go on from a checkpoint of its own (`resume`: True, the latest; or a
    checkpoint directory): the same model, the same settings but for the length (`given`: its settings
    before the model was resolved; `then`: the run's config.json), and the same data by its content,
    wherever it lies now. A new length must leave steps to do. A thread count given (`threads`) must be
    the one the run records, where it records one (_check_threads)."""
    config = run.config
    out = config.job.out
    checkpoint = Path(out) / LATEST if resume is True else Path(str(resume))
    setting = "resume" if resume is True else "from_checkpoint"  # what named the checkpoint
    _check_merges(then.get("merges"), config.batch.merges, out)  # before the checkpoint's tokenizer, which it changes
    saved, state = read_state(checkpoint, config.job, run.tokenizer, run.model, setting)
    check_resumed(saved.lora, run.lora, checkpoint)  # a resume keeps the run's adapters (model/lora/)
    # Hashed with the settings before: the preset name or file path, by a run begun before
    # config.json held the model itself; the data's path, before the data was known by its content.
    digests = {c.digest(data) for c in (config, given) for data in (None, then.get("data"))}
    if state["config_digest"] not in digests:
        difference = fixed_difference(then, config) or "the run's config.json was edited"
        raise SettingError("resume", f"{out}: the settings differ from the run's ({difference})")
    _check_data(state.get("data"), then.get("data"), config.job.data, run.data_identity)
    _check_threads(state.get("threads"), threads)
    new_length = any(then.get(k) != config.get(k) for k in LENGTH)
    asked, step = steps_asked(config.length, run.tokens_per_step), state["step"]
    if new_length and asked is not None and asked <= step:
        setting = "max_tokens" if config.length.max_tokens else "max_steps"
        raise SettingError(
            setting,
            f"{config.get(setting)}: the run in {out} has done {step:,} steps, "
            f"{'all' if asked == step else 'more than'} the {asked:,} asked for",
        )
    return Resume(saved, new_length, recorded=config.to_dict() == then)


def _check_merges(then: int | None, now: int | None, out: str) -> None:
    """Refuse merges (`now`) other than those the run trained on (`then`: its config.json's, None
    for the data's tokenizer whole): a cut is another tokenizer, which the run's checkpoints are not of."""
    if now != then:
        trained = "the data's tokenizer whole" if then is None else f"the data's tokenizer cut to {then} merges"
        raise SettingError(
            "merges",
            f"{now}: the run in {out} trained on {trained}; a resume goes on with its tokenizer "
            f"(resume without {named('merges')}, or start a new run to train on another)",
        )


def _check_threads(recorded: dict[str, Any] | None, threads: Threads | None) -> None:
    """Refuse a thread count given for a deterministic run on the CPU (`threads`: given by
    --threads or OMP_NUM_THREADS) other than the one its checkpoint records (`recorded`), which
    Threads.load_state_dict puts the resume on: some CPU kernels add in an order that depends on
    the count (runtime/threads.py), so the run repeats itself only on the count it had."""
    if (
        not (recorded and threads is not None and threads.recorded and threads.given)
        or threads.count == recorded["count"]
    ):
        return
    count = recorded["count"]
    why = (
        f"the run is --deterministic and trained on {count} thread{'s' if count > 1 else ''}, the count its "
        "checkpoint records: on another it would not repeat itself bit for bit"
    )
    if threads.given == "--threads":
        raise SettingError(
            "threads",
            f"{threads.count}: {why}; resume without {named('threads')} (or with deterministic off, to train on "
            "other threads)",
        )
    raise InputError(
        f"OMP_NUM_THREADS={threads.count}: {why}; resume with OMP_NUM_THREADS unset or {count} (or with "
        "--no-deterministic to train on other threads)"
    )


def _check_data(identity: dict | None, recorded: str | None, data: str, now: dict) -> None:
    """Refuse data (`now`: the identity of the directory `data`) that is not the run's by its
    content (`identity`: the checkpoint's record of it, ShardDir.identity; None from a checkpoint
    older than that, whose data is then the directory the run `recorded`, compared while it is
    there)."""
    if identity is None and data != recorded:
        if recorded is None or not looked_up(recorded, "data").is_dir():  # None: an edited config.json
            where = "the run's config.json names none" if recorded is None else f"{recorded} is gone"
            raise SettingError(
                "data",
                f"{data}: the run's checkpoint, from an older gptkit, does not record what its "
                f"data holds, and {where}: resume with the data the run was trained on",
            )
        identity = ShardDir(recorded).identity()
    difference = identity and identity_difference(identity, now)
    if difference:
        raise SettingError(
            "data", f"{data}: not the data the run was trained on ({difference}); give {named('data')} the run's data"
        )
