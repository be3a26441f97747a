"""A run's checkpoints: the one owner of what a checkpoint holds, written whole or not at all, the
newest few kept, read back checked.

    checkpoints/step-000500_tokens-2048000/   a model checkpoint (model/checkpoint.py, the directory
                       format: what `sample` needs) + optimizer.safetensors + trainer_state.json
                       (+ chat_template.jinja and tokenizer_config.json, where the data carries them)
    latest             a symlink to the newest checkpoint, moved only once that one is whole

A checkpoint holds the state of each of the run's Parts, its state_dict(), which a resume puts
back with load_state_dict():

    progress    step, tokens                      trainer_state.json
    model       the weights (whole, gathered      model.safetensors
                from the shards where sharded);   (adapters.safetensors, and
                a LoRA run's adapters alone       config.json's "lora")
    optimizers  each one's step count             trainer_state.json "optimizer_steps"
                and state tensors                 optimizer.safetensors ("adamw/...", "muon/...")
    schedule    the Planner's schedule            trainer_state.json "schedule"
    threads     torch's CPU threads, where the    trainer_state.json "threads"
                run records them (--deterministic
                on the CPU: runtime/threads.py)
    rng         torch's CPU generator             trainer_state.json "rng"

and beside them what makes the checkpoint the run's, which a resume checks (resume.py): the
settings' digest ("config_digest") and what the data holds ("data"). The loader has no state: its
batches are a function of (seed, step, rank) alone; nor do the CUDA generators, which nothing in
training draws from. Checkpoints that hold them ("loader", "rng.cuda") resume all the same.

A resume reads a checkpoint back with every file checked (its CRC-32, and every field and
tensor the resume needs); a damaged one is an error that names the newest intact checkpoint
to resume from instead. Reading changes nothing; the trainer, the writer, settles what a
writer killed mid-swap left (shared/files.py) before it writes.
"""

from __future__ import annotations

import functools
import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import numpy as np
import torch

from gptkit.model.checkpoint import (
    TOKENIZER_FILE,
    CheckpointError,
    CheckpointReader,
    config_digest,
    model_tensors,
    save_model,
    save_tensors,
)
from gptkit.model.config import ModelConfig
from gptkit.model.lora import initial_rows, is_adapter
from gptkit.model.model import TransformerLM
from gptkit.shared.errors import GptkitError, InputError, SettingError, named
from gptkit.shared.files import (
    atomic_symlink,
    cause,
    looked_up,
    remove_directory,
    remove_stale_temporaries,
    settle_directory,
    settled,
    sync_directory,
)
from gptkit.shared.jsonfile import is_count, read_json
from gptkit.shared.workers import MAX_THREADS
from gptkit.tokenizer import Tokenizer

from .fsdp import placed, whole
from .optim import Optimizers
from .prepared import Run
from .processes import Dist
from .run_dir import CHECKPOINTS, LATEST
from .sections import Job

OPTIMIZER_FILE, STATE_FILE = "optimizer.safetensors", "trainer_state.json"
# While the master writes a checkpoint the other processes wait for it (Checkpoints.save), in a
# gloo barrier of its own timeout: NCCL's collectives time out after 10 minutes, which writing a
# large model's checkpoint may take. The timeout is the write at a slow network disk's rate,
# checksums included, and a margin for the gathering, fsync, renames and a busy host.
WRITE_RATE, WRITE_MARGIN_S = 20e6, 600  # bytes a second, seconds


def save_timeout(nbytes: int) -> timedelta:
    """How long the other processes wait for the master to write a checkpoint of `nbytes`."""
    return timedelta(seconds=WRITE_MARGIN_S + nbytes / WRITE_RATE)


class Rng:
    """torch's CPU generator: what dropout draws from, so that a resumed run draws what an
    uninterrupted one would."""

    def state_dict(self) -> dict[str, str]:
        return {"torch": torch.get_rng_state().numpy().tobytes().hex()}

    def load_state_dict(self, state: dict[str, str]) -> None:
        torch.set_rng_state(torch.from_numpy(np.frombuffer(bytes.fromhex(state["torch"]), np.uint8).copy()))


class Stateful(Protocol):
    def state_dict(self) -> Any: ...

    def load_state_dict(self, state: Any) -> None: ...


class Parts(NamedTuple):
    """What a checkpoint saves and restores, each by its state_dict() and load_state_dict()."""

    progress: Stateful  # trainer.Progress: step and tokens
    model: TransformerLM
    optimizers: Optimizers
    schedule: Stateful  # budget.Planner
    threads: Stateful  # runtime.threads.Threads
    rng: Rng = Rng()


class Checkpoints:
    def __init__(self, run: Run, parts: Parts, dist: Dist) -> None:
        """The checkpoints of `run` (settle.Run) of its `parts`. Every process of `dist` takes part
        in gathering sharded tensors; the master alone writes."""
        self.run_dir, self.keep_last, self.parts, self.master = (
            Path(run.config.job.out),
            run.config.checkpoint.keep_last,
            parts,
            dist.master,
        )
        self.tokenizer, self.eot_id = run.tokenizer, run.eot_id
        # chat data's template (and the token names it renders with) go with the model it trains
        self.extra = {path.name: path.read_text(encoding="utf-8") for path in run.data.chat_files if path.is_file()}
        self.identity = {"config_digest": run.config.digest(), "data": run.data_identity}
        # A LoRA run saves its adapters, and names the checkpoint they adapt by its real place and digest.
        self.lora, self.lora_config = None, run.lora
        if run.lora is not None:
            assert run.lora_base is not None  # settled with the adapters
            base = os.path.realpath(run.lora_base.directory)
            self.lora = {**run.lora.to_dict(), "base": base, "base_digest": config_digest(base)}
        self.directory, self.latest = self.run_dir / CHECKPOINTS, self.run_dir / LATEST
        # the weights and at most two float32 optimizer tensors of each (AdamW's moments)
        nbytes = 3 * sum(t.numel() * t.element_size() for t in model_tensors(parts.model).values())
        self.written = (
            torch.distributed.new_group(backend="gloo", timeout=save_timeout(nbytes)) if dist.distributed else None
        )

    def save(self) -> Path | None:
        """Write a checkpoint of the parts, point `latest` at it, and delete the oldest beyond
        keep_last. A checkpoint that cannot be written (a full disk) is an error naming it and the
        last one, which `latest` still points at, and leaves nothing under its name. Every process
        calls it (the tensors of a sharded model are gathered from all of them); the master writes,
        and returns the checkpoint's directory, the others wait for it (save_timeout) and return None."""
        parts = self.parts
        optimizers = parts.optimizers.state_dict()
        weights = whole(self._saved(model_tensors(parts.model)), self.master)
        tensors = whole({f"{k}/{n}": t for k, o in optimizers.items() for n, t in o["tensors"].items()}, self.master)
        directory = self._write(optimizers, weights, tensors) if self.master else None
        if self.written is not None:
            torch.distributed.barrier(group=self.written)
        return directory

    def _write(self, optimizers, weights, tensors):
        parts = self.parts
        trainer = parts.progress.state_dict()
        name = f"step-{trainer['step']:06d}_tokens-{trainer['tokens']}"
        directory = self.directory / name
        threads = parts.threads.state_dict()  # empty where the run does not record its count: then no key
        state = {
            **trainer,
            **self.identity,
            "schedule": parts.schedule.state_dict(),
            "optimizer_steps": {k: o["steps"] for k, o in optimizers.items()},
            "rng": parts.rng.state_dict(),
            **({"threads": threads} if threads else {}),
        }
        for old in self.directory.glob(".step-*.old-*"):  # a checkpoint a killed writer left aside, put back
            settle_directory(self.directory / old.name[1:].rsplit(".old-", 1)[0])
        try:
            save_model(
                parts.model,
                self.tokenizer,
                directory,
                eot_id=self.eot_id,
                tensors=weights,
                lora=self.lora,
                extra_files={
                    OPTIMIZER_FILE: lambda path: save_tensors({k: v.contiguous() for k, v in tensors.items()}, path),
                    STATE_FILE: lambda path: path.write_text(json.dumps(state, indent=2) + "\n"),
                    **{name: functools.partial(_write_text, text=text) for name, text in self.extra.items()},
                },
            )
            sync_directory(self.directory)  # the checkpoint reaches the disk under its name before the pointer to it
            atomic_symlink(self.latest, Path(CHECKPOINTS) / name)
        except OSError as e:
            raise GptkitError(f"{directory}: cannot write ({cause(e)}); {self.full_disk_note()}") from None
        for old in sorted(self.directory.glob("step-*"))[: -self.keep_last]:
            remove_directory(old)
        for stale in self.directory.glob(".step-*.tmp-*"):  # of a process killed while saving or deleting
            remove_stale_temporaries(self.directory / stale.name[1:].rsplit(".tmp-", 1)[0])
        return directory

    def load(self, saved: CheckpointReader) -> None:
        """Put the state of `saved` (a resume's checkpoint, opened and its settings checked by
        read_state, in resume.py) back into every part, every file checked before any is applied:
        each tensor whole, or as the shard of it this process holds where the model is sharded."""
        optimizers, model = self.parts.optimizers, self.parts.model
        try:
            state = _read_state(saved, optimizers)
            saved.tokenizer(
                model.config.vocab_size
            )  # checked as load_model checks it: a damaged checkpoint is refused whole
            weights = saved.weights(model, merged_in=False)
            tensors = _read_optimizer_tensors(saved, optimizers)
        except CheckpointError as e:
            raise CheckpointError(f"{e}; {_intact_note(saved.directory, self.directory, optimizers)}") from None
        self.put_weights(weights)
        now = optimizers.state_dict()
        optimizers.load_state_dict(
            {
                k: {
                    "steps": state["optimizer_steps"][k],
                    "tensors": {n: placed(tensors[f"{k}/{n}"], t) for n, t in o["tensors"].items()},
                }
                for k, o in now.items()
            }
        )
        self.parts.progress.load_state_dict(state)
        self.parts.schedule.load_state_dict(state.get("schedule"))
        self.parts.threads.load_state_dict(state.get("threads"))
        self.parts.rng.load_state_dict(state["rng"])

    def _saved(self, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """What of the model's `tensors` a checkpoint holds: all, or a LoRA run's adapters."""
        return tensors if self.lora is None else {name: t for name, t in tensors.items() if is_adapter(name)}

    def start_from(self, saved: CheckpointReader) -> None:
        """Put the weights of `saved` (--init-from's checkpoint, opened and its tokenizer checked by
        initial_model, in settle.py: a new run, whose model is the checkpoint's) into the model, each
        tensor checked, read once, and widened to the model's float32 (exactly, as load_model does).
        A LoRA run's checkpoint gives its base's weights with its adapters merged in; new adapters
        keep their initialization, and the rows a LoRA run trains start as the weights' own."""
        weights = saved.weights(self.parts.model)
        rows = initial_rows(weights, self.lora_config) if self.lora_config is not None else {}
        self.put_weights({**weights, **rows})

    def put_weights(self, weights: dict[str, torch.Tensor]) -> None:
        """Copy the whole tensors `weights` (name -> tensor) into the model: each one, or the shard
        of it this process holds where the model is sharded. A tied LM head absent from `weights` is
        the embedding, put in with it. A new run starts from a checkpoint's (start_from), or from the
        recipe's trials' winner."""
        with torch.no_grad():
            for name, tensor in self.parts.model.state_dict().items():
                if name in weights:
                    tensor.copy_(placed(weights[name], tensor))

    def last_note(self) -> str:
        """Which checkpoint a run that cannot go on leaves, for its error."""
        if self.latest.exists():
            return f"the last checkpoint, {self.latest.resolve().name} in {self.run_dir}, is intact"
        return f"no checkpoint was written to {self.run_dir}"

    def full_disk_note(self) -> str:
        """What a run stopped by a full disk leaves, and how to go on."""
        then = (
            f"resume with: gptkit train --out {self.run_dir} --resume"
            if self.latest.exists()
            else "run the same command again"
        )
        return f"{self.last_note()}; make room, then {then}"


def _write_text(path, text):
    path.write_text(text, encoding="utf-8")


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
        raise SettingError(setting, f"{e.marked}; {_intact_note(checkpoint, Path(job.out) / CHECKPOINTS)}") from None
    if not settled(checkpoint).exists():
        raise SettingError("out", f"{job.out}: no checkpoint to resume from ({checkpoint} is missing)")
    try:
        saved = CheckpointReader(checkpoint, setting)  # once, for every check below
        _check_tokenizer(checkpoint, saved.config, tokenizer, job.data)
        _check_model(checkpoint, saved.config, model_config)
        return saved, _read_state(saved)
    except CheckpointError as e:
        raise CheckpointError(f"{e}; {_intact_note(checkpoint, Path(job.out) / CHECKPOINTS)}") from None


def initial_model(job: Job, tokenizer: Tokenizer) -> tuple[dict[str, Any], CheckpointReader]:
    """(the model, the checkpoint opened) of a new run from job.init_from. The run's model is the
    checkpoint's, and it starts from the checkpoint's weights (Checkpoints.start_from). The checkpoint
    must be whole, and its tokenizer the one the data was encoded with, `tokenizer`. `job`'s paths as
    the user gave them: messages name them so (and the files found there: a run's latest/tokenizer.json)."""
    if job.model is not None:
        raise SettingError(
            "init_from",
            f"{job.init_from}: give {named('init_from')} or {named('model')}, not both (the model is the checkpoint's)",
        )
    assert job.init_from is not None
    try:
        saved = CheckpointReader(job.init_from, "init_from")
    except CheckpointError as e:
        raise SettingError("init_from", str(e)) from None
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


def _intact_note(damaged, directory, optimizers=()):
    """Which checkpoint in `directory` (the run's) a resume could start from instead of a damaged one
    (which may be a link that cannot be followed: compared by realpath, which never fails)."""
    for candidate in sorted(directory.glob("step-*"), reverse=True):
        if os.path.realpath(candidate) == os.path.realpath(damaged):
            continue
        try:
            saved = CheckpointReader(candidate)
            for name in saved.config.get("crc32", {}):
                saved.file(name)
            _read_state(saved, optimizers)
        except InputError:  # a CheckpointError, or a candidate that cannot be followed
            continue
        return f"{candidate.name} is intact: resume from it with --resume --from-checkpoint {candidate}"
    return f"no intact checkpoint in {directory} to resume from"


def _check_tokenizer(
    checkpoint,
    config,
    tokenizer,
    data,
    whose="the run was trained on",
    remedy="resume with the data it was trained on, or start a new run",
):
    then = config.get("tokenizer") or {}
    if then.get("fingerprint") not in (None, tokenizer.fingerprint):
        raise SettingError(
            "data",
            f"{data}: encoded with tokenizer {tokenizer.fingerprint} ({tokenizer.vocab_size:,} tokens), "
            f"{whose} tokenizer {then['fingerprint']} ({then.get('vocab_size', 0):,} tokens) "
            f"in {checkpoint}; {remedy}",
        )


def _check_model(checkpoint, config, model_config):
    then = ModelConfig.from_dict(config["model"], f"{checkpoint}/config.json").to_dict()
    now = model_config.to_dict()
    differs = [k for k in now if then[k] != now[k]]
    if differs:
        raise SettingError(
            "resume",
            f"{checkpoint}: its model has {differs[0]} {then[differs[0]]!r}, the run's "
            f"{now[differs[0]]!r} (a checkpoint of another run, or the run's config.json was edited)",
        )


def _read_state(saved, optimizers=()):
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


def _state_problem(state, optimizers):
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


def _read_optimizer_tensors(saved, optimizers):
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
