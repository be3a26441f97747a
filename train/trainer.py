"""The training loop: one process per device, DDP or FSDP2 across processes (torchrun), resumable
exactly.

A Trainer trains a settled Run (settle.py) in this process's place among the run's (processes.Dist).
It builds its components, each given its section of the settings and the values derived from them,
never the whole Run: the model as the processes hold it and its optimizers (parallel.py), the
evaluations (evaluate.py), the run's length and schedule (budget.py: the Planner), the checkpoints
(checkpointing.py) and the trackers. Then fit() loops: each step is queued on the
device, and the host waits for the device only where it must know what happened. Each line it logs
goes with a record (report.py) to the run directory's metrics.jsonl (run_dir.py).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from gptkit.model.checkpoint import config_digest
from gptkit.model.generate import generate, prompt_ids
from gptkit.model.info import model_cost
from gptkit.model.lora import record_of
from gptkit.runtime.threads import Threads
from gptkit.shared.errors import GptkitError
from gptkit.shared.files import cause

from .budget import UNPLANNED, Planner
from .checkpointing import Checkpoints, Parts, Stamp
from .data import Loader
from .evaluate import Evaluator, HellaSwag, unigram_comparison
from .parallel import ParallelModel
from .prepared import Resume, Run
from .processes import Dist
from .recipe import report as recipe_report
from .report import LogWindow, StepReport, replan_report, sample_report, validation_report
from .run_dir import RunDir
from .sections import tracker_names
from .trackers import Trackers


class TrainingError(GptkitError):
    """Training cannot go on (e.g. a non-finite loss); the last good checkpoint stays."""


@dataclass
class Progress:
    """Where the run is: steps done and tokens seen. A checkpoint keeps it (checkpointing.py)."""

    step: int = 0
    tokens: int = 0

    def state_dict(self) -> dict[str, int]:
        return {"step": self.step, "tokens": self.tokens}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step, self.tokens = state["step"], state["tokens"]


class Trainer:
    def __init__(self, run: Run, dist: Dist, threads: Threads | None = None) -> None:
        """Train `run` in this process's place `dist`. `threads`: torch's CPU threads (None: as they
        are, recorded where the run is deterministic on the CPU). A run whose recipe is given
        (run.recipe) and starts afresh is held to its timing until its first checkpoint
        (budget.TooSlow); one that goes on from the trials' winner keeps its model."""
        config = run.config
        self.run, self.config, self.dist, self.device = run, config, dist, dist.device
        self.threads = threads or Threads(
            torch.get_num_threads(), recorded=config.parallelism.deterministic and self.device.type == "cpu"
        )
        self.progress = Progress()
        self.context, self.tokens_per_step = run.context, run.tokens_per_step
        batch_size, lr = config.batch.batch_size, config.optim.lr
        assert batch_size is not None and lr is not None  # settled
        self.evaluator = Evaluator(
            run.val_data, run.tokenizer, self.context, config.evaluation.eval_tokens, batch_size, dist
        )
        hellaswag = config.evaluation.eval_hellaswag
        self.hellaswag = (
            HellaSwag(hellaswag, run.tokenizer, run.eot_id, run.model.context_length, batch_size, dist)
            if hellaswag
            else None
        )
        new_length = run.resume is not None and run.resume.new_length
        self.planner = Planner(config.length, config.lr_schedule, lr, self.tokens_per_step, dist.master, new_length)
        if run.recipe is not None:
            if run.recipe.weights is None:  # a run that goes on from the trials' winner is not chosen again
                self.planner.hold_to(run.recipe.choice.seconds_per_step)
            self.planner.spend(run.recipe.spent)
        self.parallel = ParallelModel(
            run.model, config.parallelism, config.optim, config.job.seed, run.memory, run.lora, dist
        )
        self.model, self.optimizers = self.parallel.model, self.parallel.optimizers
        self.run_dir = RunDir(config.job.out, dist.master)
        parts = Parts(self.progress, self.model, self.optimizers, self.planner, self.threads)
        self.checkpoints = Checkpoints(config.job.out, config.checkpoint.keep_last, parts, _stamp(run), dist)
        # before a resume, whose re-planned schedule is a record
        trackers = tracker_names(config.metrics.log_to)
        self.trackers = Trackers(config.job.out, trackers, config.to_dict(), dist.master)
        if run.resume is None:
            if run.init_from is not None:  # a new run from a checkpoint's weights
                self.checkpoints.start_from(run.init_from, run.lora)
            elif run.recipe is not None and run.recipe.weights is not None:  # on from the trials' winner
                self.checkpoints.put_weights(run.recipe.weights)
            self.run_dir.start(config.to_dict())
            if run.recipe is not None:
                self.run_dir.append(recipe_report.record(run.recipe))
        else:
            self._resume(run.resume)
        self.trackers.start(self.progress.step)
        flops = model_cost(run.model, self.context).flops_per_token
        self.step_report = StepReport(self.planner, self.threads, flops, dist)
        self.autocast = (
            torch.autocast("cuda", torch.bfloat16) if self.device.type == "cuda" else contextlib.nullcontext()
        )
        self.batches = batches(run.loader, config.batch.grad_accum, run.data.has_mask, self.device, self.progress.step)
        self.window = LogWindow()  # the throughput a log line reports: its steps' alone
        self.stop_signal: str | None = None

    @property
    def step(self) -> int:
        return self.progress.step

    # -- the loop ---------------------------------------------------------------------------------

    def fit(self) -> int:
        """Train to the end of the run, or to a stop signal (then at a checkpoint); the steps done."""
        handlers = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        # TF32 for the run's float32 matrix products on CUDA, and the process's settings back
        # after it: a process that goes on (the recipe's second choice, a test) computes as before.
        tf32 = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
        if self.device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        try:
            with self.run.memory.guard(self.checkpoints.last_note):
                return self._loop()
        finally:
            self.trackers.close()
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
            for sig, handler in handlers.items():
                signal.signal(sig, handler)

    def _loop(self) -> int:
        """Each step is queued on the device; the host waits for the device only where it must know
        what happened: a log line, an evaluation, a sample, a checkpoint, a signal, a budget's plan."""
        self._log(self._first_line())
        self.planner.start(self.step)
        self.threads.new_loop()  # training steps: the thread count is judged by them from here
        self.window.begin(self.progress.tokens)
        window = []  # the steps since the last sync: (loss, gradient norm) on the device
        while self.step < self.planner.total_steps:
            window.append(self._timed_step())
            signalled = not self.dist.distributed and self.stop_signal is not None  # in a group: at the next sync
            if not (any(self._due()) or signalled or self.planner.sync_due(self.step)):
                continue  # the host runs ahead of the device
            loss, grad_norm, stopping = self._sync(window)
            window = []
            last, log_due, eval_due, sample_due, save_due = self._due()  # after a plan, which may move the last step
            if log_due or stopping:
                self._log_step(loss, grad_norm)
            with self.window.paused():
                if eval_due:
                    self._evaluate(last)
                if sample_due and (self.dist.master or self.dist.sharded):  # a sharded model decodes on every process
                    self._sample()
                if save_due or stopping:
                    self._save()
            if stopping:
                self._log(
                    f"stopped by {self.stop_signal or 'a signal to another rank'} after step {self.step}; "
                    f"resume with: gptkit train --out {self.run_dir.path} --resume"
                )
                break
        return self.step

    def _first_line(self) -> str:
        planner = self.planner
        length = planner.total_steps if planner.planned else f"{self.config.length.max_time} of training"
        threads = "" if self.device.type != "cpu" else f", {self.threads.describe()}"
        compiled = ", compiled" if self.parallel.compiled else ""
        lora, total = self.run.lora, self.model.num_params()
        trained = sum(p.numel() for p in self.model.parameters() if p.requires_grad)
        what = (
            f"{total:,} parameters"
            if lora is None
            else lora.summary(trained, total - trained, self.run.tokenizer.special_tokens)
        )
        return (
            f"training {what} on {self.device} x {self.dist.world} "
            f"({self.parallel.describe()}{compiled}{threads}), {self.tokens_per_step:,} tokens per step, "
            f"steps {self.step} -> {length}"
        )

    def _timed_step(self) -> tuple[torch.Tensor, torch.Tensor]:
        """A training step, its time given to the thread count (a CPU's; a GPU's threads are fixed)."""
        started = time.perf_counter()
        result = self.train_step()
        self.threads.record(time.perf_counter() - started)
        self.progress.step += 1
        self.progress.tokens += self.tokens_per_step
        return result

    def _due(self) -> tuple[bool, bool, bool, bool, bool]:
        """What the step just done ends with: (last, log, evaluate, sample, save)."""
        evaluation, step = self.config.evaluation, self.step
        last = step == self.planner.total_steps
        log = step % self.config.metrics.log_interval == 0 or step == 1 or last
        evaluate = bool(evaluation.eval_interval and step % evaluation.eval_interval == 0) or last
        sample = bool(evaluation.sample_interval and step % evaluation.sample_interval == 0)
        return last, log, evaluate, sample, last or self._checkpoint_due()

    def train_step(self) -> tuple[torch.Tensor, torch.Tensor]:
        """One optimizer step, queued on the device: (loss, gradient norm before clipping), both
        tensors still on the device, the loss this rank's."""
        accum = self.config.batch.grad_accum
        lr_scale = self.planner.schedule(self.step)
        self.model.train()
        if self.run.data.has_mask:
            loss = self._masked_step()
        else:
            loss_sum = torch.zeros((), device=self.device)
            for micro in range(accum):
                inputs, targets = next(self.batches)
                with self.parallel.gradient_sync(micro == accum - 1), self.autocast:
                    _, loss = self.parallel.forward(inputs, targets)
                (loss / accum).backward()
                loss_sum += loss.detach()
            loss = loss_sum / accum
        grad_norm = self.parallel.clip(self.config.optim.grad_clip or math.inf)
        self.optimizers.step(lr_scale)
        self.model.zero_grad(set_to_none=True)
        return loss, grad_norm

    def _masked_step(self) -> torch.Tensor:
        """The forward and backward passes of a step on masked data (chat data: targets outside the
        mask are -1, ignored): the loss is the mean over the targets counted in the whole step, all
        micro-steps and ranks, however they fall among them. Each micro-step's summed cross-entropy
        is divided by that count times the ranks (DDP and FSDP average gradients over the ranks),
        so the gradient is that mean's; a step with no counted target has zero loss and gradient.
        Returns this rank's share of the loss, which _sync's average over the ranks makes the mean."""
        accum = self.config.batch.grad_accum
        micro_batches = [next(self.batches) for _ in range(accum)]
        counted = torch.stack([(targets >= 0).sum() for _, targets in micro_batches]).sum().float()
        self.dist.all_reduce(counted)
        scale = self.dist.world / counted.clamp(min=1)
        loss_sum = torch.zeros((), device=self.device)
        for micro, (inputs, targets) in enumerate(micro_batches):
            with self.parallel.gradient_sync(micro == accum - 1), self.autocast:
                logits, _ = self.parallel.forward(inputs)
            loss = (
                F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=-1, reduction="sum")
                * scale
            )
            loss.backward()
            loss_sum += loss.detach()
        return loss_sum

    def _sync(self, window: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[float, float, bool]:
        """The host learns what the device did since the last sync: the loss (averaged over the
        ranks) and gradient norm of each step of `window`, and whether any rank was signalled to
        stop, in one packed all-reduce and one copy. Returns the last step's loss and norm and
        the stop decision; a non-finite loss or norm in the window stops training, before any
        checkpoint could be written from the damaged model. Then the planner plans the length."""
        losses = torch.stack([loss for loss, _ in window])
        # rank 0's clock at the previous sync (measured once the device had finished) rides along,
        # so that every rank plans a timed run from the same numbers
        flags = torch.tensor([float(self.stop_signal is not None), self.planner.clock_to_share()], device=self.device)
        shared = torch.cat([losses, flags])
        self.dist.all_reduce(shared)  # a sum over the processes: the losses' is made their average
        shared[: len(window)] /= self.dist.world
        values = torch.cat([shared, torch.stack([norm for _, norm in window]).float()]).tolist()
        n = len(window)
        step_losses, stop, clock, norms = values[:n], values[n], values[n + 1], values[n + 2 :]
        first_step = self.step - len(window) + 1
        for i, (loss, norm) in enumerate(zip(step_losses, norms)):
            if not (math.isfinite(loss) and math.isfinite(norm)):
                what = f"the loss is {loss}" if not math.isfinite(loss) else f"the gradient norm is {norm}"
                raise TrainingError(f"step {first_step + i}: {what}; stopping ({self.checkpoints.last_note()})")
        planned = self.planner.synced(clock, self.step)  # budget.TooSlow: the recipe's choice is too slow
        if planned:
            self._replan(*planned)
        return step_losses[-1], norms[-1], stop > 0

    def _replan(self, total: int, reason: str) -> None:
        before = self.planner.total_steps if self.planner.planned else "?"
        self.planner.replan(self.step, total)
        self._record(*replan_report(self.step, self.progress.tokens, before, total, self.planner.lr(self.step), reason))

    # -- what a sync may lead to -------------------------------------------------------------------

    def _log_step(self, loss: float, grad_norm: float) -> None:
        step, tokens = self.step, self.progress.tokens
        rate = (tokens - self.window.tokens) / self.window.seconds()
        self._record(
            *self.step_report(
                step, tokens, loss, grad_norm, self.planner.lr(step - 1), rate, time.perf_counter() - self.window.began
            )
        )
        self.window.restart(tokens)

    def _evaluate(self, last: bool) -> None:
        """The model's validation loss and bits per byte now, logged and recorded; at the end of the run,
        beside the loss of a model that knows only token frequencies."""
        val_loss, val_bpb, count = self.evaluator(self.model, self.autocast)
        hellaswag = self.hellaswag(self.model, self.autocast) if self.hellaswag else None
        self._record(*validation_report(self.step, self.progress.tokens, val_loss, val_bpb, count, hellaswag))
        if last:
            # the data's unigram entropy is per token of its own tokenizer, not of a cut of it
            entropy = (
                self.run.data.unigram_entropy if self.run.tokenizer.fingerprint == self.run.data.fingerprint else None
            )
            self._log(unigram_comparison(val_loss, val_bpb, entropy))

    def _sample(self) -> None:
        settings, eot = self.config.evaluation, self.run.eot_id
        self.model.eval()
        prompt = prompt_ids(self.run.tokenizer, settings.sample_prompt, eot)[-self.model.config.context_length :]
        ids = []
        for token in generate(
            self.model, prompt, max_new_tokens=settings.sample_tokens, temperature=0.8, seed=self.config.job.seed
        ):
            if token.item() == eot:
                break
            ids.append(int(token.item()))
        self._record(*sample_report(self.step, settings.sample_prompt + self.run.tokenizer.decode(ids)))

    def _checkpoint_due(self) -> bool:
        c, tokens = self.config.checkpoint, self.progress.tokens
        by_steps = c.checkpoint_interval and self.step % c.checkpoint_interval == 0
        by_tokens = (
            c.checkpoint_tokens
            and tokens // c.checkpoint_tokens > (tokens - self.tokens_per_step) // c.checkpoint_tokens
        )
        return bool(by_steps or by_tokens)

    def _save(self) -> None:
        self.planner.keep()  # a run with a checkpoint is kept, however slow (every rank knows it)
        self._log(f"saved {self.checkpoints.save()}")

    def _resume(self, resume: Resume) -> None:
        """Go on from the run's checkpoint, its settings checked (settle.py): every part as it was,
        metrics.jsonl cut back to its step, config.json recording the settings the run goes on with
        (a new length, the data's new place, ...), and a new length planned."""
        self.checkpoints.load(resume.checkpoint)
        self.dist.barrier()  # every rank has read the run's config.json before rank 0 records the new one
        self.run_dir.go_on(self.step, None if resume.recorded else self.config.to_dict())
        if not resume.new_length:
            return
        if self.planner.seconds:  # a new max_time: planned from this session's throughput (Planner.start)
            self.planner.replan(self.step, UNPLANNED)
        else:
            self._replan(self.planner.steps_asked, "--resume with a new length")

    # -- logging (the lines and records: report.py) -----------------------------------------------

    def _record(self, record: dict[str, Any], line: str) -> None:
        self._log(line)
        try:
            self.run_dir.append(record)
        except OSError as e:  # a full disk: a line cut short is dropped by the resume (RunDir.go_on)
            raise TrainingError(
                f"{self.run_dir.metrics}: cannot write ({cause(e)}); {self.checkpoints.full_disk_note()}"
            ) from None
        self.trackers.send(record)  # after metrics.jsonl, the source of truth

    def _log(self, line: str) -> None:
        if self.dist.master:
            print(line, flush=True)

    def _on_signal(self, signum: int, frame: object) -> None:
        self.stop_signal = signal.Signals(signum).name


def _stamp(run: Run) -> Stamp:
    """What each checkpoint of `run` holds beside its parts' state (checkpointing.Stamp)."""
    lora = None
    if run.lora is not None:
        assert run.lora_base is not None  # settled with the adapters
        base = os.path.realpath(run.lora_base.directory)  # the checkpoint they adapt, by its real place and digest
        lora = record_of(run.lora, base, config_digest(base))
    # chat data's template (and the token names it renders with) go with the model it trains
    texts = {path.name: path.read_text(encoding="utf-8") for path in run.data.chat_files if path.is_file()}
    identity = {"config_digest": run.config.digest(), "data": run.data_identity}
    return Stamp(run.tokenizer, run.eot_id, identity, lora, texts)


def batches(
    loader: Loader, accum: int, masked: bool, device: torch.device, first_step: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(inputs, targets) on `device` for every micro-step from `first_step` on, `accum` micro-steps a
    step, of `loader`'s batches; on `masked` data the targets outside the mask are -1 (ignored). The
    tokens travel at the shards' width (uint16 for most vocabularies, a quarter of int64; the mask as
    uint8) and are widened on the device. On CUDA a thread gathers the next batch into pinned memory
    while the GPU works on this one, and the copy does not block the host. A function, not a method:
    the generator holds no reference to the trainer."""
    order = ((s, m) for s in itertools.count(first_step) for m in range(accum))

    def on_device(arrays: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        sequences, *mask = (a.to(device, non_blocking=True) for a in arrays)
        sequences = sequences.long()
        targets = sequences[:, 1:].masked_fill(mask[0][:, 1:] == 0, -1) if masked else sequences[:, 1:]
        return sequences[:, :-1], targets

    def read(s: int, m: int) -> list[torch.Tensor]:
        return [torch.from_numpy(loader.batch(s, m))] + ([torch.from_numpy(loader.mask(s, m))] if masked else [])

    if device.type != "cuda":
        for s, m in order:
            yield on_device(read(s, m))
        return

    def pinned(s: int, m: int) -> list[torch.Tensor]:
        return [a.pin_memory() for a in read(s, m)]

    with ThreadPoolExecutor(1) as pool:
        ahead = pool.submit(pinned, *next(order))
        for s, m in order:
            current, ahead = ahead.result(), pool.submit(pinned, s, m)
            yield on_device(current)
