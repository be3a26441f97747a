"""A run prepared: the run's settings made final before any Trainer exists (Run), in this
process's place among the run's processes (processes.Dist).

`prepare_run(config, resume, dist, threads)` does every piece of settings work, top to bottom,
each piece where it lives: a resume's recorded settings read and the paths as the run records
them (run_dir.py), the data opened (data.py), the recipe where the model is not given
(recipe.py) or --init-from's model (checkpointing.initialized), WITHOUT_RECIPE's values and
min_lr (config.completed), the model resolved for the data, the memory a process needs checked,
and a resume's checkpoint checked against the run's settings (resume.py). A checkpoint the run
starts from, a resume's or --init-from's, is opened here once (model/checkpoint.py,
CheckpointReader), and the Trainer reads its weights through it. What can be refused is refused
here; the Trainer (trainer.py) gets a Run that only trains.
"""
from __future__ import annotations

from dataclasses import dataclass

from gptkit.model.checkpoint import CheckpointReader
from gptkit.model.config import ModelConfig
from gptkit.model.info import describe, training_memory
from gptkit.runtime.device import Memory
from gptkit.shared.errors import SettingError
from gptkit.shared.shard_data import ShardData
from gptkit.shared.shard_dir import ShardDir
from gptkit.tokenizer import Tokenizer

from .checkpointing import initialized
from .config import TrainConfig, completed, resolve_model
from .data import Loader, data_tokenizer
from .processes import Dist
from .recipe import Recipe, recipe_config
from .resume import resumed
from .run_dir import as_recorded, load_run_config

@dataclass(frozen=True)
class Run:
    """A run ready to train: its settings final and what was read to make them, checked."""

    config: TrainConfig  # every setting a value, as config.json records it: the model itself, paths absolute
    model: ModelConfig
    data: ShardDir
    tokenizer: Tokenizer  # the data's
    eot_id: int | None  # the data's end-of-text id: what samples and HellaSwag's texts start with
    data_identity: dict  # what the data holds (ShardDir.identity), which a checkpoint records
    loader: Loader  # the training batches, of this process
    val_data: ShardData
    memory: Memory  # what a process needs on its device, checked; its guard makes an allocator's failure one line
    checkpoint: CheckpointReader | None = None  # a resume's: the checkpoint it goes on from, opened, checked against the settings
    init_from: CheckpointReader | None = None  # --init-from's checkpoint, opened: the weights a new run starts from
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
    (from the run's latest checkpoint), or a checkpoint directory of the run to resume from; a
    resume refuses a count of `threads` given other than the one the run records."""
    then = load_run_config(config.out) if resume else None  # the run's settings as recorded, read once
    config = as_recorded(config, then)
    data = ShardDir(config.data)
    tokenizer, identity = data_tokenizer(data), data.identity()
    recipe = start = None
    if config.model is None and config.init_from is None and not resume:
        config, recipe = recipe_config(config, data, tokenizer.vocab_size, dist.device, threads, dist.largest, dist.world)
    if config.init_from and not resume:
        config, start = initialized(config, tokenizer)
    given = completed(config)  # its model as given: a preset's name or a file's path, named in messages
    config, model = resolve_model(given, tokenizer.vocab_size)
    context = config.context_length or model.context_length
    train_data, val_data = (ShardData(data, split, tokenizer.vocab_size, tokenizer.fingerprint, context, config.verify_data)
                            for split in ("train", "val"))
    if config.batch_size % dist.world:
        raise SettingError("batch_size", f"{config.batch_size}: not divisible among {dist.world} processes "
                                         "(it counts the sequences of all of them)")
    # A model too large for the device is refused before it is built, not by the allocator: what
    # one process needs for the model, its batch, context, optimizer and activation checkpointing
    # (activations in bf16 under CUDA's autocast), with its state in `dist.world` shards where the
    # model is sharded.
    batch_size = config.batch_size // dist.world
    needed = training_memory(model, batch_size, 2 if dist.device.type == "cuda" else 4, context,
                             muon=config.optimizer == "muon", shards=dist.world if dist.sharded else 1,
                             activation_checkpointing=config.activation_checkpointing)
    name = f"{given.model}: " if isinstance(given.model, str) else ""
    memory = Memory(needed, dist.device, "model", f"{name}{describe(model)}, trained at batch {batch_size} x {context}",
                    "choose a smaller --model or --batch-size")
    memory.check()
    run = Run(config, model, data, tokenizer, data.eot_id(tokenizer), identity, Loader(train_data, config, context, dist),
              val_data, memory, init_from=start, recipe=recipe)
    return resumed(run, resume, given, then, threads) if resume else run
