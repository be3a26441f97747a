"""`train(config)`: a run from start to end, in each of its processes: this process's place among
them (processes.processes), the run directory owned by the process that writes it, the run prepared
(prepare.prepare_run: every setting final), then trained (trainer.Trainer). A run of the recipe's
that finds its steps far slower than the recipe timed them (TooSlow) is prepared again, once, for
the time left."""
from __future__ import annotations

import contextlib
import dataclasses
import gc

from gptkit.runtime.device import deterministic
from gptkit.runtime.threads import torch_threads
from gptkit.shared.files import output_lock

from .config import TrainConfig
from .prepare import prepare_run
from .processes import processes
from .trainer import TooSlow, Trainer


def train(config: TrainConfig, resume=False, threads=None):
    """Run the training `config` describes: a new run whose model is not given gets the recipe's
    settings for its device (train/recipe.py), other settings left unset WITHOUT_RECIPE's.
    `resume`: False (a new run), True (from the run's latest checkpoint), or a checkpoint
    directory of the run to resume from. `threads`: torch's CPU threads (None: measured,
    runtime/threads.py; with config.deterministic on the CPU, fixed and recorded in the run's
    checkpoints, and a resume goes on with the recorded count). Returns the steps done."""
    with deterministic(config.deterministic), processes(config) as dist:
        # One live run writes a run directory: rank 0, the writer, owns it until the run ends.
        with output_lock(config.out, "gptkit train") if dist.master else contextlib.nullcontext():
            threads = torch_threads(threads, dist.device, config.deterministic)
            left = None  # the seconds left where the recipe's choice proved too slow: chosen again, once, for them
            while True:
                run = prepare_run(config if left is None else dataclasses.replace(config, max_time=f"{left:.0f}s"),
                                  resume, dist, threads)
                try:
                    # the second choice is timed on the machine as it is now, and held to no timing
                    steps = Trainer(run if left is None else dataclasses.replace(run, recipe=None), dist, threads).run()
                    break
                except TooSlow as slow:
                    left = slow.remaining
                # Out of the except block, the first Trainer is unreachable (the exception's
                # traceback held it) and freed before the second is built; the collector frees its
                # cycles (its parts refer back to it) at once, not at some later allocation.
                del run
                gc.collect()
            dist.barrier()  # rank 0 may still be writing the last checkpoint: gloo aborts if a peer leaves first
            return steps
