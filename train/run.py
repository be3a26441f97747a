"""`train(config)`: a run from start to end, in each of its processes: this process's place among them
(processes.processes), the run directory checked apart from what the run reads and owned by the
process that writes it, the run settled (settle.settle: every setting final), then trained
(trainer.Trainer). A run of the recipe's that finds its steps far slower than the recipe timed them
(budget.TooSlow) is settled again, once, for the time left.

SIGINT and SIGTERM in the training loop stop the run at a checkpoint (Trainer.fit). Before it (the
recipe's timing and trials, the data's checks, the model's building) there is nothing to save: either
ends the run at once (Stopped), in one line, leaving no checkpoint.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
from collections.abc import Iterator
from types import FrameType
from typing import NoReturn

from gptkit.model.checkpoint import inputs_of
from gptkit.runtime.device import deterministic
from gptkit.runtime.threads import Threads, torch_threads
from gptkit.shared.files import Input, check_apart
from gptkit.shared.lock import output_lock

from .budget import TooSlow
from .config import TrainConfig
from .processes import Dist, processes
from .settle import settle
from .trainer import Trainer

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(KeyboardInterrupt):
    """A stop signal before the training loop: the run ended at once, nothing trained. A KeyboardInterrupt,
    so that what cleans up after Ctrl-C (a temporary file, the run directory's lock) does so."""

    def __init__(self, signum: int) -> None:
        self.signal = signal.Signals(signum)
        super().__init__(self.signal.name)

    @property
    def exit_code(self) -> int:
        return 128 + self.signal.value  # as a shell reports a process the signal ended: 130, 143

    @property
    def line(self) -> str:
        return f"stopped by {self.signal.name} before training began: nothing was trained, no checkpoint written"


def train(config: TrainConfig, resume: bool | str = False, threads: int | None = None) -> int:
    """Run the training `config` describes (settle.py says how its settings are completed). `resume`:
    False (a new run), True (from the run's latest checkpoint), or a checkpoint directory of the run to
    resume from. `threads`: torch's CPU threads (None: measured, runtime/threads.py; with deterministic
    on the CPU, fixed and recorded in the run's checkpoints, and a resume goes on with the recorded
    count). Returns the steps done; a stop signal before the training loop raises Stopped."""
    settings = config.parallelism
    check_apart_from_inputs(config, resume)  # before the lock makes the directory
    with deterministic(settings.deterministic), processes(settings) as dist:
        # One live run writes a run directory: rank 0, the writer, owns it until the run ends.
        with output_lock(config.job.out, "gptkit train") if dist.master else contextlib.nullcontext():
            cpu_threads = torch_threads(threads, dist.device, settings.deterministic)
            left = None  # the seconds left where the recipe's choice proved too slow
            try:
                trainer = _trainer(config, resume, dist, cpu_threads)
                try:
                    steps = trainer.fit()
                except TooSlow as slow:
                    left = slow.remaining
                    if dist.master:
                        print(slow.line, flush=True)
                if left is not None:  # out of the except block: the exception held the first Trainer
                    merges = len(trainer.run.tokenizer.merges)  # the vocabulary the trials chose stays
                    del trainer  # freed before the second is built
                    again = config.replace(max_time=f"{left:.0f}s", merges=merges)
                    steps = _trainer(again, resume, dist, cpu_threads, rechosen=True).fit()
            except Stopped as stopped:
                if dist.master:
                    print(stopped.line, flush=True)
                raise
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


def _trainer(config: TrainConfig, resume: bool | str, dist: Dist, threads: Threads, rechosen: bool = False) -> Trainer:
    """The Trainer of the run `config` settles to, where a stop signal raises Stopped. `rechosen`: chosen
    again, once, on the machine as it is now, and held to no timing."""
    with _stopped_at_once():
        run = settle(config, resume, dist, threads)
        return Trainer(dataclasses.replace(run, recipe=None) if rechosen else run, dist, threads)


@contextlib.contextmanager
def _stopped_at_once() -> Iterator[None]:
    """SIGINT and SIGTERM raise Stopped while the block runs (then the handlers before it are back)."""

    def stop(signum: int, frame: FrameType | None) -> NoReturn:
        raise Stopped(signum)

    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
