"""`train(config)`: a run from start to end, in each of its processes: this process's place among them
(processes.processes), the run directory checked apart from what the run reads and owned by the
process that writes it, the run settled (settle.settle: every setting final), then trained
(trainer.Trainer). A run of the recipe's that finds its steps far slower than the recipe timed them
(budget.TooSlow) is settled again, once, for the time left.
"""

from __future__ import annotations

import contextlib
import dataclasses

from gptkit.model.checkpoint import inputs_of
from gptkit.runtime.device import deterministic
from gptkit.runtime.threads import torch_threads
from gptkit.shared.files import Input, check_apart
from gptkit.shared.lock import output_lock

from .budget import TooSlow
from .config import TrainConfig
from .processes import processes
from .settle import settle
from .trainer import Trainer


def train(config: TrainConfig, resume: bool | str = False, threads: int | None = None) -> int:
    """Run the training `config` describes (settle.py says how its settings are completed). `resume`:
    False (a new run), True (from the run's latest checkpoint), or a checkpoint directory of the run to
    resume from. `threads`: torch's CPU threads (None: measured, runtime/threads.py; with deterministic
    on the CPU, fixed and recorded in the run's checkpoints, and a resume goes on with the recorded
    count). Returns the steps done."""
    settings = config.parallelism
    check_apart_from_inputs(config, resume)  # before the lock makes the directory
    with deterministic(settings.deterministic), processes(settings) as dist:
        # One live run writes a run directory: rank 0, the writer, owns it until the run ends.
        with output_lock(config.job.out, "gptkit train") if dist.master else contextlib.nullcontext():
            cpu_threads = torch_threads(threads, dist.device, settings.deterministic)
            left = None  # the seconds left where the recipe's choice proved too slow
            run = settle(config, resume, dist, cpu_threads)
            try:
                steps = Trainer(run, dist, cpu_threads).fit()
            except TooSlow as slow:
                left = slow.remaining
                if dist.master:
                    print(slow.line, flush=True)
            if left is not None:  # out of the except block, the first Trainer is freed: the exception held it
                # the vocabulary the trials chose stays: no trials again
                again = config.replace(max_time=f"{left:.0f}s", merges=len(run.tokenizer.merges))
                run = settle(again, resume, dist, cpu_threads)
                # chosen again, once, on the machine as it is now, and held to no timing
                steps = Trainer(dataclasses.replace(run, recipe=None), dist, cpu_threads).fit()
            dist.barrier()  # rank 0 may still be writing the last checkpoint: gloo aborts if a peer leaves first
            return steps


def check_apart_from_inputs(config: TrainConfig, resume: bool | str = False) -> None:
    """Refuse a run directory that is, holds or lies inside what the run reads: its data, its
    HellaSwag file and, for a new run, the checkpoint it starts from (and a LoRA checkpoint's base:
    a LoRA run's adapters need theirs unchanged). A resume goes on from its own checkpoints: the one
    it started from was checked when it began, and another is refused (settle)."""
    job, hellaswag = config.job, config.evaluation.eval_hellaswag
    read = [
        Input.given("data", job.data),
        *(inputs_of(job.init_from, "init_from") if job.init_from is not None and not resume else []),
        *([Input.given("eval_hellaswag", hellaswag)] if hellaswag is not None else []),
    ]
    check_apart(job.out, read)
