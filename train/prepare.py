"""A run prepared: this process's place among the run's processes (Dist), and the run's settings
made final before any Trainer exists (Run).

`processes(config)` starts the process group where there is one and gives the Dist, one frozen
value for the distributed state (as torchtitan's ParallelDims, for the one dimension gptkit
parallelizes on). `prepare_run(config, resume, dist, threads)` does every piece of settings work,
in this order: the recipe where the model is not given (recipe.py), WITHOUT_RECIPE's values and
min_lr (config.completed), the paths as the run records them, --init-from's model, the model
resolved for the data, the data opened and checked, the memory a process needs checked, and a
resume's checkpoint checked against the run's settings. What can be refused is refused here;
the Trainer (trainer.py) gets a Run that only trains.
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from gptkit.model.config import ModelConfig
from gptkit.model.info import describe, training_memory
from gptkit.runtime.device import Memory, resolve_device
from gptkit.shared.errors import SettingError
from gptkit.shared.shard_data import ShardData
from gptkit.shared.shard_dir import ShardDir
from gptkit.tokenizer import Tokenizer

from .budget import steps_asked
from .checkpointing import initial_model, read_state
from .config import LENGTH, TrainConfig, completed, fixed_difference, resolve_model
from .data import Loader, data_identity, data_tokenizer, identity_difference
from .recipe import Recipe, recipe_config
from .run_dir import CONFIG_FILE, LATEST, load_run_config


@dataclass(frozen=True)
class Dist:
    """This process's place among the run's processes. `distributed`: a process group runs the
    collectives (under torchrun, even of one process, so that one GPU runs what eight would; or
    --parallel fsdp in one process, a group of itself); `sharded`: the model is sharded across
    the group (FSDP2, fsdp.py), where otherwise every process holds it whole (DDP). Without a group
    every collective here is a no-op."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    distributed: bool = False
    sharded: bool = False

    @property
    def master(self):
        """The process that writes the run's files and logs: rank 0."""
        return self.rank == 0

    def all_reduce(self, tensor):
        """Sum `tensor` over the processes, in place (gloo has no average)."""
        if self.distributed:
            dist.all_reduce(tensor)

    def largest(self, value) -> float:
        """The largest `value` among the processes: the recipe's timings, so that all take one shape."""
        if not self.distributed:
            return float(value)
        shared = torch.tensor(float(value), device=self.device)
        dist.all_reduce(shared, op=dist.ReduceOp.MAX)
        return shared.item()

    def barrier(self):
        if self.distributed:
            dist.barrier()


@contextlib.contextmanager
def processes(config: TrainConfig):
    """This process's Dist (from torchrun's RANK, WORLD_SIZE and LOCAL_RANK, and `config`'s device
    and parallel), its process group started where it has one and destroyed when the block ends."""
    distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    rank, world = (int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])) if distributed else (0, 1)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = resolve_device(config.device, local_rank)
    backend = {"backend": "nccl" if device.type == "cuda" else "gloo", "device_id": device if device.type == "cuda" else None}
    if distributed:
        dist.init_process_group(**backend)
    elif config.parallel == "fsdp":  # shards over a group of this process alone, as asked
        dist.init_process_group(**backend, store=dist.HashStore(), rank=0, world_size=1)
        distributed = True
    try:
        yield Dist(rank, world, local_rank, device, distributed, distributed and config.parallel == "fsdp")
    finally:
        if distributed:
            # The Trainer first, while the interpreter is whole: its batch generator refers back to
            # it, so only the garbage collector frees it and its DDP wrapper, and freed at Python's
            # shutdown, gloo's work objects can abort the process (torch's c10d notes the hazard;
            # a worker died of SIGABRT at exit in 1 of 4 runs of the suite, likely this).
            gc.collect()
            dist.destroy_process_group()


@dataclass(frozen=True)
class Run:
    """A run ready to train: its settings final and what was read to make them, checked."""

    config: TrainConfig  # every setting a value, as config.json records it: the model itself, paths absolute
    model: ModelConfig
    data: ShardDir
    tokenizer: Tokenizer  # the data's
    eot_id: int | None  # the data's end-of-text id: what samples and HellaSwag's texts start with
    data_identity: dict  # what the data holds (data.py), which a checkpoint records
    loader: Loader  # the training batches, of this process
    val_data: ShardData
    memory: Memory  # what a process needs on its device, checked; its guard makes an allocator's failure one line
    checkpoint: Path | None = None  # a resume's: the checkpoint it goes on from, checked against the settings
    recipe: Recipe | None = None  # the recipe that chose the settings, whose timing the run is held to (TooSlow)
    new_length: bool = False  # a resume given a length other than the run's (--max-steps, --max-tokens, --max-time)
    recorded: bool = False  # a resume whose settings config.json records already

    @property
    def context(self):
        """Tokens per training sequence."""
        return self.config.context_length or self.model.context_length

    @property
    def tokens_per_step(self):
        return self.config.batch_size * self.context * self.config.grad_accum


def prepare_run(config: TrainConfig, resume=False, dist=Dist(), threads=None) -> Run:
    """The Run that `config` describes, on this process's place `dist`. A new run whose model is
    not given takes the recipe's settings, timed with `threads` (runtime/threads.py) on the
    device; other settings left unset take WITHOUT_RECIPE's. `resume`: False (a new run), True
    (from the run's latest checkpoint), or a checkpoint directory of the run to resume from."""
    then = load_run_config(config.out) if resume else None  # the run's settings as recorded, read once
    recipe = None
    if config.model is None and config.init_from is None and not resume:
        config, recipe = recipe_config(config, dist.device, threads, dist.largest, dist.world)
    config = _as_recorded(completed(config), then)
    data = ShardDir(config.data)
    tokenizer = data_tokenizer(data)
    if config.init_from and not resume:
        config = _initialized(config, tokenizer)
    given = config  # its model as given: a preset's name or a file's path, named in messages
    config, model = resolve_model(config, tokenizer.vocab_size)
    context = config.context_length or model.context_length
    train_data, val_data = (ShardData(data, split, tokenizer.vocab_size, tokenizer.fingerprint, context, config.verify_data)
                            for split in ("train", "val"))
    if config.batch_size % dist.world:
        raise SettingError("batch_size", f"{config.batch_size}: not divisible among {dist.world} processes "
                                         "(it counts the sequences of all of them)")
    # A model too large for the device is refused before it is built, not by the allocator
    memory = _memory(given.model, model, config, dist)
    memory.check()
    run = Run(config, model, data, tokenizer, data.eot_id(tokenizer), data_identity(data),
              Loader(train_data, config, context, dist), val_data, memory, recipe=recipe)
    return _resumed(run, resume, given, then) if resume else run


def _resumed(run, resume, given, then):
    """`run` going on from a checkpoint of its own (`resume`: True, the latest): the same model,
    the same settings but for the length (`given`: its config before the model was resolved;
    `then`: the run's config.json), and the same data by its content, wherever it lies now; a new
    length must leave steps to do."""
    config = run.config
    checkpoint = Path(config.out) / LATEST if resume is True else Path(resume)
    state = read_state(checkpoint, config, run.tokenizer, run.model)
    # Hashed with the settings before: the preset name or file path, by a run begun before
    # config.json held the model itself; the data's path, before the data was known by its content.
    digests = {c.digest(data) for c in (config, given) for data in (None, then.get("data"))}
    if state["config_digest"] not in digests:
        difference = fixed_difference(then, config) or "the run's config.json was edited"
        raise SettingError("resume", f"{config.out}: the settings differ from the run's ({difference})")
    _check_data(state.get("data"), then.get("data"), config.data, run.data_identity)
    new_length = any(then.get(k) != getattr(config, k) for k in LENGTH)
    asked, step = steps_asked(config, run.tokens_per_step), state["step"]
    if new_length and asked is not None and asked <= step:
        setting = "max_tokens" if config.max_tokens else "max_steps"
        raise SettingError(setting, f"{getattr(config, setting)}: the run in {config.out} has done {step:,} steps, "
                                    f"{'all' if asked == step else 'more than'} the {asked:,} asked for")
    return dataclasses.replace(run, checkpoint=checkpoint, new_length=new_length, recorded=config.to_dict() == then)


def _check_data(identity, recorded, data, now):
    """Refuse data (`now`: the identity of the directory `data`) that is not the run's by its
    content (`identity`: the checkpoint's record of it, data_identity; None from a checkpoint
    older than that, whose data is then the directory the run `recorded`, compared while it is
    there)."""
    if identity is None and data != recorded:
        if not Path(recorded).is_dir():
            raise SettingError("data", f"{data}: the run's checkpoint, from an older gptkit, does not record what its "
                                       f"data holds, and {recorded} is gone: resume with the data there")
        identity = data_identity(ShardDir(recorded))
    difference = identity and identity_difference(identity, now)
    if difference:
        raise SettingError("data", f"{data}: not the data the run was trained on ({difference}); give --data the run's data")


def _as_recorded(config, then):
    """`config` with its paths as the run records them. A new run records its data directory and
    --eval-hellaswag's file as absolute paths (--init-from's: _initialized), so that a resume from
    another working directory finds them. A resume (`then`: the run's config.json) keeps the run's
    spelling of a path that names the same place (../data, a link to it) and records a new place
    (the data's content is checked against the checkpoint's: _check_data); a recorded place that
    is gone is an error naming the flag that gives the new one. A resumed run keeps its own
    weights: an --init-from other than the run's is refused."""
    recorded = then or {}

    def place(name):
        path, was = getattr(config, name), recorded.get(name)
        if path is None or (isinstance(was, str) and (path == was or Path(path).resolve() == Path(was).resolve())):
            return was
        return str(Path(path).resolve())

    data, hellaswag, init_from = place("data"), place("eval_hellaswag"), place("init_from")
    if then is None:
        return dataclasses.replace(config, data=data, eval_hellaswag=hellaswag)
    if init_from != then.get("init_from"):
        raise SettingError("init_from", f"{config.init_from}: a resumed run goes on from its own checkpoints, not from other "
                                        f"weights (it started from {then.get('init_from') or 'a random initialization'})")
    run = Path(config.out) / CONFIG_FILE
    if data == then.get("data") and not Path(data).is_dir():
        raise SettingError("data", f"{data}: no such directory (the run's data, as {run} records it); if it moved, give its "
                                   "new place with --data DIR")
    if hellaswag is not None and hellaswag == then.get("eval_hellaswag") and not Path(hellaswag).is_file():
        raise SettingError("eval_hellaswag", f"{hellaswag}: no such file (the run's, as {run} records it); if it moved, give "
                                             "its new place with --eval-hellaswag FILE")
    return dataclasses.replace(config, data=data, eval_hellaswag=hellaswag, init_from=init_from)


def _initialized(config, tokenizer):
    """A new run from --init-from: its model is the checkpoint's, recorded in full, and the
    checkpoint named by an absolute path, as the data is."""
    if config.model is not None:
        raise SettingError("init_from", f"{config.init_from}: give --init-from or --model, not both (the model is the "
                                        "checkpoint's)")
    checkpoint = str(Path(config.init_from).resolve())
    return dataclasses.replace(config, init_from=checkpoint, model=initial_model(checkpoint, tokenizer, config.data))


def _memory(model, model_config, config, dist) -> Memory:
    """What one process training `model_config` with `config`'s batch, context, optimizer and
    activation checkpointing needs on its device (activations in bf16 under CUDA's autocast),
    with its state in `dist.world` shards where the model is sharded; `model`: the setting it came
    from, named where it is a preset or a file."""
    batch_size, context = config.batch_size // dist.world, config.context_length or model_config.context_length
    needed = training_memory(model_config, batch_size, 2 if dist.device.type == "cuda" else 4, context,
                             muon=config.optimizer == "muon", shards=dist.world if dist.sharded else 1,
                             activation_checkpointing=config.activation_checkpointing)
    name = f"{model}: " if isinstance(model, str) else ""
    return Memory(needed, dist.device, "model", f"{name}{describe(model_config)}, trained at batch {batch_size} x {context}",
                  "choose a smaller --model or --batch-size")
