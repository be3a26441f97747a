"""The training loop: one process per device, DDP or FSDP2 across processes (torchrun),
resumable exactly.

A Trainer trains a prepared run (prepare.py: its settings final, its data checked) in this
process's place among the run's (processes.Dist); run.py makes both. It builds the model as the
processes hold it and its optimizers (parallel.py), the evaluations (evaluate.py), the run's
length and schedule (budget.py: the Planner) and its checkpoints (checkpointing.py: every part's
state saved and restored), then loops: each step is queued on the device, and the host waits for
the device only where it must know what happened (a log line, an evaluation, a sample, a
checkpoint, a signal, a --max-time plan). Each line it logs goes with a record (report.py) to
the run directory's metrics.jsonl (run_dir.py).
"""
from __future__ import annotations

import contextlib
import itertools
import math
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.nn.functional as F

from gptkit.model.generate import generate, prompt_ids
from gptkit.model.info import model_cost
from gptkit.runtime.threads import Threads
from gptkit.shared.errors import GptkitError

from .budget import UNPLANNED, Planner
from .checkpointing import Checkpoints, Parts
from .evaluate import Evaluator, HellaSwag, unigram_comparison
from .parallel import ParallelModel
from .report import LogWindow, StepReport, replan_report, sample_report, validation_report
from .run_dir import RunDir
from .trackers import Trackers


class TrainingError(GptkitError):
    """Training cannot go on (e.g. a non-finite loss); the last good checkpoint stays."""


class TooSlow(Exception):
    """A run of the recipe's finds its steps far slower than the recipe timed them, early: it
    ends before its first checkpoint, so that the recipe can choose again for the time left."""

    def __init__(self, remaining):
        self.remaining = remaining


class Trainer:
    def __init__(self, run, dist, threads=None):
        """Train `run` (prepare.Run) in this process's place `dist` (processes.Dist). `threads`: a
        runtime.threads.Threads; None: torch's threads as they are (recorded, where the run is
        deterministic on the CPU). A run whose recipe is given (run.recipe) is held to its timing
        until its first checkpoint (TooSlow)."""
        config = run.config
        self.prepared, self.config, self.dist, self.recipe = run, config, dist, run.recipe
        self.device, self.world, self.master = dist.device, dist.world, dist.master
        self.threads = threads or Threads(torch.get_num_threads(), recorded=config.deterministic and self.device.type == "cpu")
        self.tokenizer, self.eot_id = run.tokenizer, run.eot_id
        self.evaluator = Evaluator(run.val_data, run.tokenizer, run.context, config, dist)
        self.hellaswag = (HellaSwag(run.tokenizer, run.eot_id, run.model.context_length, config, dist)
                          if config.eval_hellaswag else None)
        self.tokens_per_step = run.tokens_per_step
        self.planner = Planner(config, self.tokens_per_step, dist.master, run.new_length)
        self.parallel = ParallelModel(run, dist)
        self.model, self.optimizers = self.parallel.model, self.parallel.optimizers
        self.run_dir = RunDir(config.out, dist.master)
        self.checkpoints = Checkpoints(run, Parts(self, self.model, self.optimizers, self.planner, self.threads), dist)
        self.step, self.tokens = 0, 0
        self.trackers = Trackers(config, dist.master)  # before a resume, whose re-planned schedule is a record
        if run.checkpoint is None:
            if config.init_from:  # a new run from a checkpoint's weights
                self.checkpoints.start_from(run.init_from)
            self.run_dir.start(config.to_dict())
        else:
            self._resume()
        self.trackers.start(self.step)
        self.batches = self._batches()
        self.step_report = StepReport(self.planner, self.step, self.threads, model_cost(run.model, run.context).flops_per_token,
                                      dist)
        self.autocast = torch.autocast("cuda", torch.bfloat16) if self.device.type == "cuda" else contextlib.nullcontext()
        self.stop_signal = None

    def state_dict(self):
        """Where the run is, which a checkpoint keeps (checkpointing.py)."""
        return {"step": self.step, "tokens": self.tokens}

    def load_state_dict(self, state):
        self.step, self.tokens = state["step"], state["tokens"]

    # -- the loop ---------------------------------------------------------------------------------

    def run(self):
        handlers = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        # TF32 for the run's float32 matrix products on CUDA, and the process's settings back
        # after it: a process that goes on (the recipe's second choice, a test) computes as before.
        tf32 = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
        if self.device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        try:
            with self.prepared.memory.guard(self.checkpoints.last_note):
                return self._loop()
        finally:
            self.trackers.close()
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
            for sig, handler in handlers.items():
                signal.signal(sig, handler)

    def _loop(self):
        config, planner = self.config, self.planner
        length = planner.total_steps if planner.planned else f"{config.max_time} of training"
        threads = "" if self.device.type != "cpu" else f", {self.threads.describe()}"
        self._log(f"training {self.model.num_params():,} parameters on {self.device} x {self.world} ({self.parallel.describe()}"
                  f"{', compiled' if self.parallel.compiled else ''}{threads}), {self.tokens_per_step:,} tokens per step, "
                  f"steps {self.step} -> {length}")
        start_time = time.perf_counter()
        log_window = LogWindow()  # the throughput a line reports: its steps' alone
        planner.start(self.step)
        self.threads.new_loop()  # training steps: the thread count is judged by them from here
        timed_tokens, window = 0, []
        while self.step < planner.total_steps:
            started = time.perf_counter()
            window.append(self._train_step())
            self.threads.record(time.perf_counter() - started)  # a CPU step's time (a GPU's threads are fixed)
            self.step, self.tokens = self.step + 1, self.tokens + self.tokens_per_step  # steps done, tokens seen
            timed_tokens += self.tokens_per_step
            signalled_here = not self.dist.distributed and self.stop_signal is not None  # in a group: at the next sync
            if not (any(self._due()) or signalled_here or planner.sync_due(self.step)):
                continue  # the host runs ahead of the device: no sync on this step
            loss, grad_norm, stopping = self._sync(window)
            window = []
            if self.recipe:  # until the first checkpoint: the run may still be re-chosen
                self._check_speed()
            if planned := planner.plan(self.step):
                self._replan(*planned)  # before deciding what this step does: a plan may move the last step
            last, log_due, eval_due, sample_due, save_due = self._due()
            if log_due or stopping:
                lr = config.lr * planner.schedule(self.step - 1)
                self._record(*self.step_report(self.step, self.tokens, loss, grad_norm, lr, timed_tokens / log_window.seconds(),
                                               time.perf_counter() - start_time))
                timed_tokens = 0
                log_window.restart()
            with log_window.paused():
                if eval_due:
                    val_loss, val_bpb = self._validation_loss()
                    if last:
                        self._log(unigram_comparison(val_loss, val_bpb, self.prepared.data.unigram_entropy))
                if sample_due and (self.master or self.dist.sharded):  # a sharded model decodes on every process
                    self._sample()
                if save_due or stopping:
                    self._save()
            if stopping:
                self._log(f"stopped by {self.stop_signal or 'a signal to another rank'} after step {self.step}; "
                          f"resume with: gptkit train --out {self.run_dir.path} --resume")
                break
        return self.step

    def _check_speed(self):
        """Raise TooSlow where the steps take RECHOOSE_SLOWDOWN times what the recipe timed."""
        seconds = self.planner.too_slow(self.recipe.seconds_per_step)
        if seconds is not None:
            remaining = self.planner.remaining()
            self._log(f"step {self.step} | {1000 * seconds:.0f} ms a step, {seconds / self.recipe.seconds_per_step:.1f}x what "
                      f"the recipe timed: the machine got slower; choosing again for the {remaining:.0f} s left")
            raise TooSlow(remaining)

    def _due(self):
        """What the step just done ends with: (last, log, evaluate, sample, save)."""
        c, step = self.config, self.step
        last = step == self.planner.total_steps
        return (last, step % c.log_interval == 0 or step == 1 or last, bool(c.eval_interval and step % c.eval_interval == 0) or last,
                bool(c.sample_interval and step % c.sample_interval == 0), last or self._checkpoint_due())

    def _train_step(self):
        """One optimizer step, queued on the device: (loss, gradient norm before clipping), both
        tensors still on the device, the loss this rank's."""
        config = self.config
        lr = self.planner.schedule(self.step)
        self.model.train()
        if self.prepared.data.has_mask:
            loss = self._masked_step()
        else:
            loss_sum = torch.zeros((), device=self.device)
            for micro in range(config.grad_accum):
                inputs, targets = next(self.batches)
                with self.parallel.gradient_sync(micro == config.grad_accum - 1), self.autocast:
                    _, loss = self.parallel.forward(inputs, targets)
                (loss / config.grad_accum).backward()
                loss_sum += loss.detach()
            loss = loss_sum / config.grad_accum
        grad_norm = self.parallel.clip(config.grad_clip or math.inf)
        self.optimizers.step(lr)
        self.model.zero_grad(set_to_none=True)
        return loss, grad_norm

    def _masked_step(self):
        """The forward and backward passes of a step on masked data (chat data: targets outside the
        mask are -1, ignored): the loss is the mean over the targets counted in the whole step, all
        micro-steps and ranks, however they fall among them. Each micro-step's summed cross-entropy
        is divided by that count times the ranks (DDP and FSDP average gradients over the ranks),
        so the gradient is that mean's; a step with no counted target has zero loss and gradient.
        Returns this rank's share of the loss, which _sync's average over the ranks makes the mean."""
        accum = self.config.grad_accum
        batches = [next(self.batches) for _ in range(accum)]
        counted = sum((targets >= 0).sum() for _, targets in batches).float()
        self.dist.all_reduce(counted)
        scale = self.world / counted.clamp(min=1)
        loss_sum = torch.zeros((), device=self.device)
        for micro, (inputs, targets) in enumerate(batches):
            with self.parallel.gradient_sync(micro == accum - 1), self.autocast:
                logits, _ = self.parallel.forward(inputs)
            loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=-1, reduction="sum") * scale
            loss.backward()
            loss_sum += loss.detach()
        return loss_sum

    def _sync(self, window):
        """The host learns what the device did since the last sync: the loss (averaged over the
        ranks) and gradient norm of each step of `window`, and whether any rank was signalled to
        stop, in one packed all-reduce and one copy. Returns the last step's loss and norm and
        the stop decision; a non-finite loss or norm in the window stops training, before any
        checkpoint could be written from the damaged model."""
        losses = torch.stack([loss for loss, _ in window])
        # rank 0's clock at the previous sync (measured once the device had finished) rides along,
        # so that every rank plans a --max-time run from the same numbers
        flags = torch.tensor([float(self.stop_signal is not None), self.planner.clock_to_share()], device=self.device)
        shared = torch.cat([losses, flags])
        self.dist.all_reduce(shared)  # a sum over the processes: the losses' is made their average
        shared[: len(window)] /= self.world
        values = torch.cat([shared, torch.stack([norm for _, norm in window]).float()]).tolist()
        n = len(window)
        losses, stop, clock, norms = values[:n], values[n], values[n + 1], values[n + 2 :]
        self.planner.synced(clock, self.step)
        first_step = self.step - len(window) + 1
        for i, (loss, norm) in enumerate(zip(losses, norms)):
            if not (math.isfinite(loss) and math.isfinite(norm)):
                what = f"the loss is {loss}" if not math.isfinite(loss) else f"the gradient norm is {norm}"
                raise TrainingError(f"step {first_step + i}: {what}; stopping ({self.checkpoints.last_note()})")
        return losses[-1], norms[-1], stop > 0

    def _replan(self, total, reason):
        before = self.planner.total_steps if self.planner.planned else "?"
        self.planner.replan(self.step, total)
        lr = self.config.lr * self.planner.schedule(self.step)
        self._record(*replan_report(self.step, self.tokens, before, total, lr, reason))

    def _batches(self):
        """(inputs, targets) on the device for every micro-step from the current step on; on
        masked data the targets outside the mask are -1 (ignored). The tokens travel at the
        shards' width (uint16 for most vocabularies, a quarter of int64; the mask as uint8) and
        are widened on the device. On CUDA a thread gathers the next batch into pinned memory
        while the GPU works on this one, and the copy does not block the host."""
        order = ((s, m) for s in itertools.count(self.step) for m in range(self.config.grad_accum))
        loader, masked = self.prepared.loader, self.prepared.data.has_mask

        def on_device(arrays):
            sequences, *mask = (a.to(self.device, non_blocking=True) for a in arrays)
            sequences = sequences.long()
            targets = sequences[:, 1:].masked_fill(mask[0][:, 1:] == 0, -1) if masked else sequences[:, 1:]
            return sequences[:, :-1], targets

        def read(s, m):
            return [torch.from_numpy(loader.batch(s, m))] + ([torch.from_numpy(loader.mask(s, m))] if masked else [])

        if self.device.type != "cuda":
            for s, m in order:
                yield on_device(read(s, m))
            return

        def pinned(s, m):
            return [a.pin_memory() for a in read(s, m)]

        with ThreadPoolExecutor(1) as pool:
            ahead = pool.submit(pinned, *next(order))
            for s, m in order:
                current, ahead = ahead.result(), pool.submit(pinned, s, m)
                yield on_device(current)


    def _validation_loss(self):
        """The model's validation loss and bits per byte now, logged and recorded."""
        val_loss, val_bpb, count = self.evaluator(self.model, self.autocast)
        hellaswag = self.hellaswag(self.model, self.autocast) if self.hellaswag else None
        self._record(*validation_report(self.step, self.tokens, val_loss, val_bpb, count, hellaswag))
        return val_loss, val_bpb

    def _sample(self):
        self.model.eval()
        eot = self.eot_id
        prompt = prompt_ids(self.tokenizer, self.config.sample_prompt, eot)[-self.model.config.context_length :]
        ids = []
        for token in generate(self.model, prompt, max_new_tokens=self.config.sample_tokens, temperature=0.8, seed=self.config.seed):
            if token.item() == eot:
                break
            ids.append(token.item())
        text = self.config.sample_prompt + self.tokenizer.decode(ids)
        self._record(*sample_report(self.step, text))

    # -- logging (the lines and records: report.py) -----------------------------------------------

    def _record(self, record, line):
        self._log(line)
        try:
            self.run_dir.append(record)
        except OSError as e:  # a full disk: a line cut short is dropped by the resume (RunDir.go_on)
            raise TrainingError(f"{self.run_dir.metrics}: cannot write ({e.strerror}); {self.checkpoints.full_disk_note()}") from None
        self.trackers.send(record)  # after metrics.jsonl, the source of truth

    def _log(self, line):
        if self.master:
            print(line, flush=True)

    # -- checkpoints -------------------------------------------------------------------------------

    def _checkpoint_due(self):
        c = self.config
        by_steps = c.checkpoint_interval and self.step % c.checkpoint_interval == 0
        by_tokens = c.checkpoint_tokens and self.tokens // c.checkpoint_tokens > (self.tokens - self.tokens_per_step) // c.checkpoint_tokens
        return bool(by_steps or by_tokens)

    def _save(self):
        self.recipe = None  # a run with a checkpoint is kept, however slow (every rank knows it)
        self._log(f"saved {self.checkpoints.save()}")

    def _resume(self):
        """Go on from the run's checkpoint, its settings checked (prepare.py): every part as it
        was, metrics.jsonl cut back to its step, config.json recording the settings the run goes
        on with (a new length, the data's new place, ...), and a new length planned."""
        self.checkpoints.load(self.prepared.checkpoint)
        self.dist.barrier()  # every rank has read the run's config.json before rank 0 records the new one
        self.run_dir.go_on(self.step, None if self.prepared.recorded else self.config.to_dict())
        if not self.prepared.new_length:
            return
        if self.planner.seconds:  # a new --max-time: planned from this session's throughput (Planner.start)
            self.planner.replan(self.step, UNPLANNED)
        else:
            self._replan(self.planner.steps_asked, "--resume with a new length")

    def _on_signal(self, signum, frame):
        self.stop_signal = signal.Signals(signum).name

