"""The training loop: one process per device, DDP across processes (torchrun), resumable exactly.

`train(config)` runs a Trainer in every process, after the recipe where the run's model is
not given. The Trainer builds the data, the model and its optimizers, then loops: each step is
queued on the device, and the host waits for the device only where it must know what happened
(a log line, an evaluation, a sample, a checkpoint, a signal, a --max-time plan). Beside it:
budget.py (the Planner: the run's length and schedule, and when a --max-time run ends),
report.py (the log lines and metrics records), run_dir.py (the run's config.json and
metrics.jsonl), checkpointing.py (saving and resuming), evaluate.py (the validation loss), recipe.py.
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import itertools
import math
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from gptkit.model.generate import generate, prompt_ids
from gptkit.model.info import describe, model_cost, training_memory
from gptkit.model.model import TransformerLM
from gptkit.runtime.device import Memory, resolve_device
from gptkit.runtime.threads import Threads, torch_threads
from gptkit.shared.errors import GptkitError, SettingError
from gptkit.shared.files import output_lock
from gptkit.shared.shard_dir import ShardDir

from .budget import Planner
from .checkpointing import Checkpoints, initial_model, load_initial_weights
from .config import LENGTH, TrainConfig, completed, fixed_difference, resolve_model
from .data import Loader, ShardData, data_identity, data_tokenizer, identity_difference
from .evaluate import Evaluator, HellaSwag, unigram_comparison
from .fsdp import local, shard
from .optim import build_optimizers
from .recipe import recipe_config
from .report import StepReport, replan_report, sample_report, validation_report
from .run_dir import CONFIG_FILE, RunDir, load_run_config


class TrainingError(GptkitError):
    """Training cannot go on (e.g. a non-finite loss); the last good checkpoint stays."""


def train(config: TrainConfig, resume=False, threads=None):
    """Run the training `config` describes: a new run whose model is not given gets the recipe's
    settings for its device (train/recipe.py), other settings left unset WITHOUT_RECIPE's.
    `resume`: False (a new run), True (from the run's latest checkpoint), or a checkpoint
    directory of the run to resume from. `threads`: torch's CPU threads (None: measured,
    runtime/threads.py)."""
    # Under torchrun (which sets RANK and WORLD_SIZE) the distributed path is taken even for one
    # process, so that a single GPU runs NCCL, the DDP wrapper and every collective; so it is for
    # --parallel fsdp in one process, which shards over a group of this process alone, as asked.
    ddp = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    rank, world = (int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])) if ddp else (0, 1)
    device = resolve_device(config.device, int(os.environ.get("LOCAL_RANK", "0")))
    backend = {"backend": "nccl" if device.type == "cuda" else "gloo", "device_id": device if device.type == "cuda" else None}
    if ddp:
        dist.init_process_group(**backend)
    elif config.parallel == "fsdp":
        dist.init_process_group(**backend, store=dist.HashStore(), rank=0, world_size=1)
        ddp = True
    # One live run writes a run directory: rank 0, the writer, owns it until the run ends.
    owner = output_lock(config.out, "gptkit train") if rank == 0 else contextlib.nullcontext()
    try:
        with owner:
            threads = torch_threads(threads, device)
            agree = _largest_among_ranks(device) if ddp else float
            given, chosen = config, None
            if config.model is None and config.init_from is None and not resume:
                config, chosen = recipe_config(config, device, threads, agree, world)
            try:
                steps = Trainer(config, resume, rank, world, device, ddp, threads, chosen).run()
            except TooSlow as slow:  # once: the second choice is timed on the machine as it is now
                config, _ = recipe_config(dataclasses.replace(given, max_time=f"{slow.remaining:.0f}s"), device, threads,
                                          agree, world)
                steps = Trainer(config, resume, rank, world, device, ddp, threads).run()
            if ddp:
                dist.barrier()  # rank 0 may still be writing the last checkpoint: gloo aborts if a peer leaves first
            return steps
    finally:
        if ddp:
            # The Trainer first, while the interpreter is whole: its batch generator refers back to
            # it, so only the garbage collector frees it and its DDP wrapper, and freed at Python's
            # shutdown, gloo's work objects can abort the process (torch's c10d notes the hazard;
            # a worker died of SIGABRT at exit in 1 of 4 runs of the suite, likely this).
            gc.collect()
            dist.destroy_process_group()


def _largest_among_ranks(device):
    def largest(value):
        shared = torch.tensor(float(value), device=device)
        dist.all_reduce(shared, op=dist.ReduceOp.MAX)
        return shared.item()

    return largest


class TooSlow(Exception):
    """A run of the recipe's finds its steps far slower than the recipe timed them, early: it
    ends before its first checkpoint, so that the recipe can choose again for the time left."""

    def __init__(self, remaining):
        self.remaining = remaining


class Trainer:
    def __init__(self, config, resume, rank, world, device, ddp, threads=None, recipe=None):
        """`threads`: a runtime.threads.Threads; None: torch's threads as they are. `recipe`: the
        Recipe that chose `config`, whose timing a --max-time run holds its steps to until its
        first checkpoint (TooSlow)."""
        self.rank, self.world, self.device, self.ddp, self.recipe = rank, world, device, ddp, recipe
        self.threads = threads or Threads(torch.get_num_threads())
        then = load_run_config(config.out) if resume else None  # the run's settings as recorded, read once
        config = _as_recorded(completed(config), then)
        self.master = rank == 0
        self.data_dir = ShardDir(config.data)
        self.tokenizer = data_tokenizer(self.data_dir)
        self.data_identity = data_identity(self.data_dir)
        self.eot_id = self.data_dir.eot_id(self.tokenizer)
        if config.init_from and not resume:
            config = _initialized(config, self.tokenizer)
        given = config  # its model as given: a preset's name or a file's path, named in messages
        self.config, model_config = resolve_model(config, self.tokenizer.vocab_size)
        self.context = config.context_length or model_config.context_length
        self.train_data, val_data = (ShardData(self.data_dir, split, self.tokenizer.vocab_size, self.tokenizer.fingerprint,
                                               self.context, config.verify_data) for split in ("train", "val"))
        if config.batch_size % world:
            raise SettingError("batch_size", f"{config.batch_size}: not divisible among {world} processes "
                                             "(it counts the sequences of all of them)")
        self.loader = Loader(self.train_data, config.loader, config.batch_size // world, self.context, config.seed, rank, world, config.grad_accum)
        self.sharded = ddp and config.parallel == "fsdp"
        self.evaluator = Evaluator(val_data, self.tokenizer, self.context, config, rank, world, device, ddp, self.sharded)
        self.hellaswag = HellaSwag(config.eval_hellaswag, self.tokenizer, self.eot_id, model_config.context_length,
                                   config.batch_size // world, rank, world, ddp, self.sharded) if config.eval_hellaswag else None
        self.tokens_per_step = config.batch_size * self.context * config.grad_accum
        self.planner = Planner(self.config, self.tokens_per_step, self.master)

        # A model too large for the device is refused before it is built, not by the allocator
        self.memory = _memory(given.model, model_config, config.batch_size // world, self.context, config,
                              world if self.sharded else 1, device)
        self.memory.check()
        torch.manual_seed(config.seed)
        with self.memory.guard():
            # A model to shard is made whole in host memory and reaches the device one shard at a time.
            self.model = TransformerLM(model_config).to("cpu" if self.sharded else device)
            self.model.activation_checkpointing = config.activation_checkpointing
            if config.init_from and not resume:
                load_initial_weights(self.model, config.init_from)
            if self.sharded:
                shard(self.model, device)
            self.optimizers = build_optimizers(self.model, config, rank, world)
        self.run_dir, self.checkpoints = RunDir(config.out, self.master), Checkpoints(config.out, config.keep_last, self.master)
        self.step, self.tokens = 0, 0
        if resume:
            self._resume(self.checkpoints.latest if resume is True else Path(resume), given, then)
        else:
            self.run_dir.start(self.config)
        self.batches = self._batches()
        self.step_report = StepReport(self.planner, self.step, device, world, self.threads,
                                       model_cost(model_config, self.context).flops_per_token)
        self.autocast = torch.autocast("cuda", torch.bfloat16) if device.type == "cuda" else contextlib.nullcontext()
        if device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        compile_model = device.type == "cuda" if config.compile is None else config.compile
        self.forward = torch.compile(self.model) if compile_model else self.model
        if ddp and not self.sharded:
            self.forward = DistributedDataParallel(self.forward, device_ids=[device.index] if device.type == "cuda" else None,
                                                   gradient_as_bucket_view=True)
        self.backend = f"torch.distributed {dist.get_backend()}, {'FSDP2' if self.sharded else 'DDP'}" if ddp else "one process"
        self.compiled = compile_model
        self.stop_signal = None

    # -- the loop ---------------------------------------------------------------------------------

    def run(self):
        handlers = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            with self.memory.guard(self.checkpoints.last_note):
                return self._loop()
        finally:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)

    def _loop(self):
        config, planner = self.config, self.planner
        length = planner.total_steps if planner.planned else f"{config.max_time} of training"
        threads = "" if self.device.type != "cpu" else f", {self.threads.describe()}"
        self._log(f"training {self.model.num_params():,} parameters on {self.device} x {self.world} ({self.backend}"
                  f"{', compiled' if self.compiled else ''}{threads}), {self.tokens_per_step:,} tokens per step, "
                  f"steps {self.step} -> {length}")
        start_time = last_log = time.perf_counter()
        planner.start(self.step)
        self.threads.new_loop()  # training steps: the thread count is judged by them from here
        timed_tokens, window = 0, []
        while self.step < planner.total_steps:
            started = time.perf_counter()
            window.append(self._train_step())
            self.threads.record(time.perf_counter() - started)  # a CPU step's time (a GPU's threads are fixed)
            self.step, self.tokens = self.step + 1, self.tokens + self.tokens_per_step  # steps done, tokens seen
            timed_tokens += self.tokens_per_step
            signalled_here = not self.ddp and self.stop_signal is not None  # under DDP, ranks learn of it at the next sync
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
                now, lr = time.perf_counter(), config.lr * planner.schedule(self.step - 1)
                self._record(*self.step_report(self.step, self.tokens, loss, grad_norm, lr, timed_tokens / (now - last_log),
                                               now - start_time))
                timed_tokens, last_log = 0, now
            if eval_due:
                val_loss, val_bpb = self._validation_loss()
                if last:
                    self._log(unigram_comparison(val_loss, val_bpb, self.data_dir.unigram_entropy))
            if sample_due and (self.master or self.sharded):  # a sharded model decodes on every process
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
        loss_sum = torch.zeros((), device=self.device)
        for micro in range(config.grad_accum):
            inputs, targets = next(self.batches)
            with self._gradient_sync(micro == config.grad_accum - 1), self.autocast:
                _, loss = self.forward(inputs, targets)
            (loss / config.grad_accum).backward()
            loss_sum += loss.detach()
        grad_norm = local(torch.nn.utils.clip_grad_norm_(self.model.parameters(), config.grad_clip or math.inf))
        for optimizer in self.optimizers.values():
            optimizer.step(lr)
        self.model.zero_grad(set_to_none=True)
        return loss_sum / config.grad_accum, grad_norm

    def _gradient_sync(self, last_micro_step):
        """Where the gradients of a micro-step's backward are reduced among the processes: on the
        last micro-step only, the others accumulate locally."""
        if self.sharded:
            self.model.set_requires_gradient_sync(last_micro_step)
        elif self.ddp and not last_micro_step:
            return self.forward.no_sync()
        return contextlib.nullcontext()

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
        if self.ddp:
            dist.all_reduce(shared)  # a sum: gloo has no average
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
        """(inputs, targets) on the device for every micro-step from the current step on. The
        tokens travel at the shards' width (uint16 for most vocabularies, a quarter of int64)
        and are widened on the device. On CUDA a thread gathers the next batch into pinned
        memory while the GPU works on this one, and the copy does not block the host."""
        order = ((s, m) for s in itertools.count(self.step) for m in range(self.config.grad_accum))

        def on_device(sequences):
            sequences = sequences.to(self.device, non_blocking=True).long()
            return sequences[:, :-1], sequences[:, 1:]

        if self.device.type != "cuda":
            for s, m in order:
                yield on_device(torch.from_numpy(self.loader.batch(s, m)))
            return

        def pinned(s, m):
            return torch.from_numpy(self.loader.batch(s, m)).pin_memory()

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
        except OSError as e:  # a full disk: a line cut short is dropped by the resume (RunDir.cut_back)
            raise TrainingError(f"{self.run_dir.metrics}: cannot write ({e.strerror}); {self.checkpoints.full_disk_note()}") from None

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
        state = {"step": self.step, "tokens": self.tokens, "config_digest": self.config.digest(), "data": self.data_identity,
                 "schedule": self.planner.schedule.state()}
        directory = self.checkpoints.save(self.model, self.tokenizer, self.eot_id, self.optimizers, state)
        self._log(f"saved {directory}")

    def _resume(self, checkpoint, given, then):
        """Continue from `checkpoint`, which must be this run's: the same model, the same settings
        but for the length (`given`: this config before its model was resolved; `then`: the run's
        config.json) and the same data by its content, wherever it lies now."""
        saved = self.checkpoints.read(checkpoint, self.model.config, self.tokenizer, self.config.data, self.optimizers)
        # Hashed with the settings before: the preset name or file path, by a run begun before
        # config.json held the model itself; the data's path, before the data was known by its content.
        digests = {config.digest(data) for config in (self.config, given) for data in (None, then.get("data"))}
        if saved.state["config_digest"] not in digests:
            difference = fixed_difference(then, self.config) or "the run's config.json was edited"
            raise SettingError("resume", f"{self.run_dir.path}: the settings differ from the run's ({difference})")
        self._check_data(saved.state.get("data"), then.get("data"))
        saved.restore(self.model, self.optimizers)
        self.step, self.tokens = saved.state["step"], saved.state["tokens"]
        self.run_dir.cut_back(self.step)
        self._resume_length(saved.state.get("schedule"), then)

    def _check_data(self, identity, recorded):
        """Refuse data that is not the run's by its content (`identity`: the checkpoint's record of
        it, data_identity; None from a checkpoint older than that, whose data is then the directory
        the run `recorded`, compared while it is there)."""
        if identity is None and self.config.data != recorded:
            if not Path(recorded).is_dir():
                raise SettingError("data", f"{self.config.data}: the run's checkpoint, from an older gptkit, does not record "
                                           f"what its data holds, and {recorded} is gone: resume with the data there")
            identity = data_identity(ShardDir(recorded))
        difference = identity and identity_difference(identity, self.data_identity)
        if difference:
            raise SettingError("data", f"{self.config.data}: not the data the run was trained on ({difference}); "
                                       "give --data the run's data")

    def _resume_length(self, saved, then):
        """The run's own plan; or, when this resume gives a new length (--max-steps, --max-tokens,
        --max-time), a plan re-made from this step, recorded in metrics.jsonl. config.json records
        the settings the run goes on with (a new length, the data's new place, ...)."""
        new_length = any(then.get(k) != getattr(self.config, k) for k in LENGTH)
        if self.ddp:  # every rank has read the run's config.json before rank 0 records the new one below
            dist.barrier()
        self.planner.resume(saved, self.step, new_length)
        total = self.planner.steps_asked
        if new_length and total <= self.step:
            setting = "max_tokens" if self.config.max_tokens else "max_steps"
            raise SettingError(setting, f"{getattr(self.config, setting)}: the run in {self.run_dir.path} has done "
                                        f"{self.step:,} steps, {'all' if total == self.step else 'more than'} the {total:,} asked for")
        if self.config.to_dict() != then:
            self.run_dir.write_config(self.config)
        if new_length and not self.planner.seconds:  # a timed run's is planned from this session's throughput (Planner.resume)
            self._replan(total, "--resume with a new length")

    def _on_signal(self, signum, frame):
        self.stop_signal = signal.Signals(signum).name


def _as_recorded(config, then):
    """`config` with its paths as the run records them. A new run records its data directory and
    --eval-hellaswag's file as absolute paths (--init-from's: _initialized), so that a resume from
    another working directory finds them. A resume (`then`: the run's config.json) keeps the run's
    spelling of a path that names the same place (../data, a link to it) and records a new place
    (the data's content is checked against the checkpoint's: Trainer._check_data); a recorded
    place that is gone is an error naming the flag that gives the new one. A resumed run keeps its
    own weights: an --init-from other than the run's is refused."""
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


def _memory(model, model_config, batch_size, context, config, shards, device) -> Memory:
    """What one process training `model_config` on `batch_size` sequences of `context` tokens
    needs on `device` (activations in bf16 under CUDA's autocast), with the optimizer and
    activation checkpointing of `config` and its state in `shards` (FSDP); `model`: the setting
    it came from, named where it is a preset or a file."""
    needed = training_memory(model_config, batch_size, 2 if device.type == "cuda" else 4, context, muon=config.optimizer == "muon",
                             shards=shards, activation_checkpointing=config.activation_checkpointing)
    name = f"{model}: " if isinstance(model, str) else ""
    return Memory(needed, device, "model", f"{name}{describe(model_config)}, trained at batch {batch_size} x {context}",
                  "choose a smaller --model or --batch-size")
