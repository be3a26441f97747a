"""A run prepared: what settle.py makes of a run's settings, which the trainer builds its components from."""

from __future__ import annotations

from dataclasses import dataclass

from gptkit.model.checkpoint import CheckpointReader
from gptkit.model.config import ModelConfig
from gptkit.model.lora import LoraConfig
from gptkit.runtime.device import Memory
from gptkit.shared.shard_data import ShardData
from gptkit.shared.shard_dir import ShardDir
from gptkit.tokenizer import Tokenizer

from .config import TrainConfig
from .data import Loader
from .recipe.settings import Recipe


@dataclass(frozen=True)
class Resume:
    """A resume, checked: the checkpoint it goes on from, opened, and what changed."""

    checkpoint: CheckpointReader
    new_length: bool  # a length other than the run's (max_steps, max_tokens, max_time)
    recorded: bool  # config.json records the settings the resume goes on with already


@dataclass(frozen=True)
class Run:
    """A run ready to train: its settings final, and what was read to make them, checked."""

    config: TrainConfig  # every setting final, as config.json records it: the model's fields, paths absolute
    model: ModelConfig
    data: ShardDir
    tokenizer: Tokenizer  # the data's, or its cut to the merges setting (gptkit.tokenizer.cut)
    eot_id: int | None  # the data's end-of-text id: what samples and HellaSwag's texts start with
    data_identity: dict  # what the data holds (ShardDir.identity), which a checkpoint records
    loader: Loader  # this process's training batches
    val_data: ShardData
    memory: Memory  # what a process needs on its device, checked; its guard makes an allocator's failure one line
    init_from: CheckpointReader | None = None  # --init-from's checkpoint, opened: the weights a new run starts from
    recipe: Recipe | None = None  # the recipe that chose the settings, whose timing the run is held to
    resume: Resume | None = None  # a resume's checkpoint and what changed, checked against the settings
    lora: LoraConfig | None = None  # the adapters trained on the frozen model, where the run trains adapters
    lora_base: CheckpointReader | None = None  # the checkpoint they adapt, opened (its digest checked on a resume)

    @property
    def context(self) -> int:
        """Tokens per training sequence."""
        return self.config.batch.context_length or self.model.context_length

    @property
    def tokens_per_step(self) -> int:
        batch = self.config.batch
        assert batch.batch_size is not None  # settled
        return batch.batch_size * self.context * batch.grad_accum
