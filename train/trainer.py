"""The training loop: one process per device, DDP across processes (torchrun), resumable exactly.

A run directory holds:
    config.json        the effective training config
    metrics.jsonl      one JSON record per log line and per evaluation
    checkpoints/step-000500_tokens-2048000/   model.safetensors, config.json, tokenizer.json
                       (what `sample` needs) + optimizer.safetensors, trainer_state.json
    latest             a symlink to the newest checkpoint, replaced only once it is whole
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import itertools
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from gptkit.model.checkpoint import CheckpointError, check_file, load_model, read_checkpoint_config, read_tensors, save_model
from gptkit.model.config import ModelConfig, load_config
from gptkit.model.info import model_cost
from gptkit.model.model import TransformerLM
from gptkit.model.device import resolve_device
from gptkit.model.generate import generate, prompt_ids
from gptkit.shared.errors import GptkitError, InputError
from gptkit.shared.files import atomic_write

from .config import FIELDS, LENGTH, RESUME_FIXED, TrainConfig, parse_duration
from .data import Loader, ShardData, data_eot_id, data_tokenizer, eval_sequences, unigram_entropy
from .optim import Schedule, build_optimizers

PEAK_BF16_FLOPS = {"H100": 989e12, "H200": 989e12, "A100": 312e12}  # dense, per GPU
CHECKPOINTS, LATEST = "checkpoints", "latest"
OPTIMIZER_FILE, STATE_FILE = "optimizer.safetensors", "trainer_state.json"
UNPLANNED = 10**12  # the length of a --max-time run until its throughput is measured
PLAN_AT = (0.05, 0.25, 0.5, 0.75, 0.9)  # fractions of --max-time where a timed run plans its length


class TrainingError(GptkitError):
    """Training cannot go on (e.g. a non-finite loss); the last good checkpoint stays."""


def train(config: TrainConfig, resume=False):
    """Run the training `config` describes. `resume`: False (a new run), True (from the run's
    latest checkpoint), or a checkpoint directory of the run to resume from."""
    # Under torchrun (which sets RANK and WORLD_SIZE) the distributed path is taken even for one
    # process, so that a single GPU runs NCCL, the DDP wrapper and every collective.
    ddp = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    rank, world = (int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])) if ddp else (0, 1)
    device = resolve_device(config.device, int(os.environ.get("LOCAL_RANK", "0")))
    if ddp:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", device_id=device if device.type == "cuda" else None)
    try:
        steps = Trainer(config, resume, rank, world, device, ddp).run()
        if ddp:
            dist.barrier()  # rank 0 may still be writing the last checkpoint: gloo aborts if a peer leaves first
        return steps
    finally:
        if ddp:
            dist.destroy_process_group()


class Trainer:
    def __init__(self, config, resume, rank, world, device, ddp):
        self.config, self.rank, self.world, self.device, self.ddp = config, rank, world, device, ddp
        self.master = rank == 0
        self.run_dir = Path(config.out)
        self.tokenizer = data_tokenizer(config.data)
        self.eot_id = data_eot_id(config.data, self.tokenizer)
        model_config = _model_config(config.model, self.tokenizer)
        self.context = config.context_length or model_config.context_length
        if self.context > model_config.context_length:
            raise InputError(f"--context-length {self.context}: longer than the model's context of {model_config.context_length}")
        self.train_data, self.val_data = (ShardData(config.data, split, self.tokenizer.vocab_size, self.tokenizer.fingerprint,
                                                    self.context, config.verify_data) for split in ("train", "val"))
        if config.batch_size % world:
            raise InputError(f"--batch-size {config.batch_size}: not divisible among {world} processes (it counts the sequences of all of them)")
        self.loader = Loader(self.train_data, config.loader, config.batch_size // world, self.context, config.seed, rank, world, config.grad_accum)
        self.eval_set = eval_sequences(self.val_data, self.context, config.eval_tokens)
        self.token_bytes = torch.tensor(_token_bytes(self.tokenizer), device=device)
        self.tokens_per_step = config.batch_size * self.context * config.grad_accum
        self.time_budget = parse_duration(config.max_time) if config.max_time and not config.max_tokens else None
        self.schedule = Schedule(config, self._planned_steps())

        torch.manual_seed(config.seed)
        self.model = TransformerLM(model_config).to(device)
        self.optimizers = build_optimizers(self.model, config, rank, world)
        self.step, self.tokens = 0, 0
        if resume:
            self._resume(self.run_dir / LATEST if resume is True else Path(resume))
        else:
            self._start_run_dir()
        self.first_step = self.step
        # --max-time: (seconds since the loop started, step) as rank 0 measured them at syncs
        self.clock, self.timing_pending, self.timed_from, self.timed_last, self.plans = 0.0, None, None, None, 0
        self.batches = self._batches()
        self.flops_per_token = model_cost(model_config).flops_per_token
        self.autocast = torch.autocast("cuda", torch.bfloat16) if device.type == "cuda" else contextlib.nullcontext()
        if device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        compile_model = device.type == "cuda" if config.compile is None else config.compile
        self.forward = torch.compile(self.model) if compile_model else self.model
        if ddp:
            from torch.nn.parallel import DistributedDataParallel

            self.forward = DistributedDataParallel(self.forward, device_ids=[device.index] if device.type == "cuda" else None,
                                                   gradient_as_bucket_view=True)
        self.backend = f"torch.distributed {dist.get_backend()}" if ddp else "one process"
        self.compiled = compile_model
        self.stop_signal = None

    @property
    def total_steps(self):
        return self.schedule.total_steps

    def _planned_steps(self):
        config = self.config
        if config.max_tokens:
            return -(-config.max_tokens // self.tokens_per_step)
        return UNPLANNED if self.time_budget else config.max_steps

    # -- the loop ---------------------------------------------------------------------------------

    def run(self):
        handlers = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            return self._loop()
        finally:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)

    def _loop(self):
        config = self.config
        length = f"{self.config.max_time} of training" if self.total_steps == UNPLANNED else self.total_steps
        self._log(f"training {self.model.num_params():,} parameters on {self.device} x {self.world} ({self.backend}"
                  f"{', compiled' if self.compiled else ''}), {self.tokens_per_step:,} tokens per step, "
                  f"steps {self.step} -> {length}")
        start_time = last_log = self.loop_start = time.perf_counter()
        timed_tokens, window = 0, []
        while self.step < self.total_steps:
            window.append(self._train_step())
            self.step, self.tokens = self.step + 1, self.tokens + self.tokens_per_step  # steps done, tokens seen
            timed_tokens += self.tokens_per_step
            last = self.step == self.total_steps
            log_due = self.step % config.log_interval == 0 or self.step == 1 or last
            eval_due = (config.eval_interval and self.step % config.eval_interval == 0) or last
            sample_due = config.sample_interval and self.step % config.sample_interval == 0
            save_due = last or self._checkpoint_due()
            signalled_here = not self.ddp and self.stop_signal is not None  # under DDP, ranks learn of it at the next sync
            timing_starts = self.time_budget and self.step == self.first_step + 1
            if not (log_due or eval_due or sample_due or save_due or signalled_here or timing_starts):
                continue  # the host runs ahead of the device: no sync on this step
            loss, grad_norm, stopping = self._sync(window)
            window = []
            if self.time_budget:
                self._plan_for_time()
                last = self.step == self.total_steps
                eval_due, save_due = eval_due or last, save_due or last
            if log_due or stopping:
                now = time.perf_counter()
                self._log_step(loss, grad_norm, self.config.lr * self.schedule(self.step - 1),
                               timed_tokens / (now - last_log), now - start_time)
                timed_tokens, last_log = 0, now
            if eval_due:
                val_loss, val_bpb = self._evaluate()
                if last:
                    self._compare_with_unigram(val_loss, val_bpb)
            if sample_due and self.master:
                self._sample()
            if save_due or stopping:
                self._save()
            if stopping:
                self._log(f"stopped by {self.stop_signal or 'a signal to another rank'} after step {self.step}; "
                          f"resume with: python -m train --out {self.run_dir} --resume")
                break
        return self.step

    def _train_step(self):
        """One optimizer step, queued on the device: (loss, gradient norm before clipping), both
        tensors still on the device, the loss this rank's."""
        config = self.config
        lr = self.schedule(self.step)
        self.model.train()
        loss_sum = torch.zeros((), device=self.device)
        for micro in range(config.grad_accum):
            inputs, targets = next(self.batches)
            sync = not self.ddp or micro == config.grad_accum - 1
            with (contextlib.nullcontext() if sync else self.forward.no_sync()), self.autocast:
                _, loss = self.forward(inputs, targets)
            (loss / config.grad_accum).backward()
            loss_sum += loss.detach()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), config.grad_clip or math.inf)
        for optimizer in self.optimizers.values():
            optimizer.step(lr)
        self.model.zero_grad(set_to_none=True)
        return loss_sum / config.grad_accum, grad_norm

    def _sync(self, window):
        """The host learns what the device did since the last sync: the loss (averaged over the
        ranks) and gradient norm of each step of `window`, and whether any rank was signalled to
        stop, in one packed all-reduce and one copy. Returns the last step's loss and norm and
        the stop decision; a non-finite loss or norm in the window stops training, before any
        checkpoint could be written from the damaged model."""
        losses = torch.stack([loss for loss, _ in window])
        # rank 0's clock at the previous sync (measured once the device had finished) rides along,
        # so that every rank plans a --max-time run from the same numbers
        clock = self.clock if self.master and self.timing_pending else 0.0
        flags = torch.tensor([float(self.stop_signal is not None), clock], device=self.device)
        shared = torch.cat([losses, flags])
        if self.ddp:
            dist.all_reduce(shared)  # a sum: gloo has no average
            shared[: len(window)] /= self.world
        values = torch.cat([shared, torch.stack([norm for _, norm in window]).float()]).tolist()
        n = len(window)
        losses, stop, clock, norms = values[:n], values[n], values[n + 1], values[n + 2 :]
        if self.timing_pending is not None:  # the clock of the previous sync, now the same on every rank
            if self.timed_from is None:
                self.timed_from = (clock, self.timing_pending)
            else:
                self.timed_last = (clock, self.timing_pending)
        self.clock, self.timing_pending = time.perf_counter() - self.loop_start, self.step
        first_step = self.step - len(window) + 1
        for i, (loss, norm) in enumerate(zip(losses, norms)):
            if not (math.isfinite(loss) and math.isfinite(norm)):
                what = f"the loss is {loss}" if not math.isfinite(loss) else f"the gradient norm is {norm}"
                raise TrainingError(f"step {first_step + i}: {what}; stopping ({self._last_checkpoint_note()})")
        return losses[-1], norms[-1], stop > 0

    def _plan_for_time(self):
        """Set a --max-time run's length from its throughput since the session's first step
        (which pays for warm-ups and compilation), at the PLAN_AT fractions of the budget."""
        if self.timed_last is None or self.plans == len(PLAN_AT):
            return
        (start_clock, start_step), (clock, step) = self.timed_from, self.timed_last
        if clock < PLAN_AT[self.plans] * self.time_budget:
            return
        seconds_per_step = (clock - start_clock) / (step - start_step)
        self.plans += 1
        total = max(self.step + 1, step + int((self.time_budget - clock) / seconds_per_step))
        self._replan(total, f"--max-time {self.config.max_time}: {1000 * seconds_per_step:.1f} ms per step so far")

    def _replan(self, total, reason):
        before = self.total_steps
        self.schedule = self.schedule.replan(self.step, total)
        lr = self.config.lr * self.schedule(self.step)
        self._record({"step": self.step, "tokens": self.tokens, "replan": {"total_steps": total, "lr": lr, "reason": reason}},
                     f"step {self.step} | schedule re-planned: {'?' if before == UNPLANNED else before} -> {total} steps "
                     f"({reason}); the learning rate goes on from {lr:.2e}")

    def _last_checkpoint_note(self):
        latest = self.run_dir / LATEST
        if latest.exists():
            return f"the last checkpoint, {latest.resolve().name} in {self.run_dir}, is intact"
        return f"no checkpoint was written to {self.run_dir}"

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

    @torch.no_grad()
    def _evaluate(self):
        """Loss over the fixed validation sequences, in nats per token and in bits per byte of
        the text (independent of the tokenizer: the summed loss of the targets that are text,
        in bits, over their bytes; special tokens count in neither). The ranks share the
        sequences, each in batches of its own batch size, and add up their sums."""
        self.model.eval()
        mine = self.eval_set[self.rank :: self.world]
        batch_size = self.config.batch_size // self.world
        sums = torch.zeros(4, device=self.device, dtype=torch.float64)  # loss, targets, loss on text, text bytes
        for i in range(0, len(mine), batch_size):
            batch = torch.from_numpy(mine[i : i + batch_size]).to(self.device).long()
            targets = batch[:, 1:]
            with self.autocast:
                losses = self.model.token_losses(batch[:, :-1], targets)
            nbytes = self.token_bytes[targets]
            sums[0] += losses.sum(dtype=torch.float64)  # all of it stays on the device: no sync per batch
            sums[1] += targets.numel()
            sums[2] += (losses * (nbytes > 0)).sum(dtype=torch.float64)
            sums[3] += nbytes.sum(dtype=torch.float64)
        if self.ddp:
            dist.all_reduce(sums)
        loss_sum, count, text_loss, text_bytes = sums.tolist()
        val_loss, val_bpb = loss_sum / count, text_loss / math.log(2) / max(text_bytes, 1)
        self._record({"step": self.step, "tokens": self.tokens, "val_loss": val_loss, "val_ppl": math.exp(min(val_loss, 50)),
                      "val_bpb": val_bpb},
                     f"step {self.step} | val loss {val_loss:.4f} | val ppl {math.exp(min(val_loss, 50)):.2f} | "
                     f"val bpb {val_bpb:.4f} ({int(count):,} tokens)")
        return val_loss, val_bpb

    def _compare_with_unigram(self, val_loss, val_bpb):
        """The final validation loss beside the loss of a model that knows only token frequencies."""
        entropy = unigram_entropy(self.config.data)
        line = f"final validation loss {val_loss:.4f} nats/token, {val_bpb:.4f} bits/byte"
        if entropy is not None:
            gap = f"{entropy - val_loss:.4f} below" if val_loss <= entropy else f"{val_loss - entropy:.4f} above"
            line += (f"; {gap} the unigram entropy of the training tokens ({entropy:.4f}: the loss of a model that "
                     f"knows only token frequencies)")
        self._log(line)

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
        self._record({"step": self.step, "sample": text}, f"step {self.step} | sample: {text!r}")

    # -- logging -----------------------------------------------------------------------------------

    def _log_step(self, loss, grad_norm, lr, tokens_per_s, elapsed):
        record = {"step": self.step, "tokens": self.tokens, "loss": loss, "ppl": math.exp(min(loss, 50)), "lr": lr,
                  "grad_norm": grad_norm, "tokens_per_s": tokens_per_s, "elapsed_s": elapsed}
        mfu = self._mfu(tokens_per_s)
        planned = self.total_steps != UNPLANNED
        progress = f"{self.total_steps} ({100 * self.step / self.total_steps:.1f}%)" if planned else "? (timing the steps)"
        line = (f"step {self.step}/{progress} | loss {loss:.4f} | ppl {record['ppl']:.2f} | lr {lr:.2e} | "
                f"grad norm {grad_norm:.3f} | tokens {self.tokens:,} | {tokens_per_s:,.0f} tok/s")
        if mfu is not None:
            record["mfu"] = mfu
            line += f" | MFU {100 * mfu:.1f}%"
        eta = elapsed / max(self.step - self.first_step, 1) * (self.total_steps - self.step)
        line += f" | {_hms(elapsed)} elapsed, ETA {_hms(eta) if planned else '?'}"
        self._record(record, line)

    def _mfu(self, tokens_per_s):
        if self.device.type != "cuda":
            return None
        name = torch.cuda.get_device_name(self.device)
        peak = next((flops for key, flops in PEAK_BF16_FLOPS.items() if key in name), None)
        return None if peak is None else self.flops_per_token * tokens_per_s / (peak * self.world)

    def _record(self, record, line):
        if self.master:
            print(line, flush=True)
            with open(self.run_dir / "metrics.jsonl", "a") as f:
                f.write(json.dumps(record) + "\n")

    def _log(self, line):
        if self.master:
            print(line, flush=True)

    # -- checkpoints -------------------------------------------------------------------------------

    def _start_run_dir(self):
        """A new run: --out is a new directory, or one a run of ours left without a checkpoint.
        Anything else (a file, a directory of other files, a run with checkpoints) is refused."""
        out = self.run_dir
        if (out / LATEST).exists():
            raise InputError(f"--out {out}: holds a run already; pass --resume to continue it, or choose another --out")
        if out.exists() and not out.is_dir():
            raise InputError(f"--out {out}: is a file; expected a run directory (new, or one of ours)")
        ours = {"config.json", "metrics.jsonl", CHECKPOINTS}
        foreign = sorted(p.name for p in out.iterdir() if p.name not in ours and not p.name.startswith(".")) if out.is_dir() else []
        if foreign or (out.is_dir() and (out / "config.json").exists() and not _is_run_dir(out)):
            raise InputError(f"--out {out}: a directory of other files ({(foreign or ['config.json'])[0]}, ...), "
                             "not a run; choose a new --out")
        if self.master:
            try:
                out.mkdir(parents=True, exist_ok=True)
                with atomic_write(out / "config.json") as f:
                    f.write(json.dumps(self.config.to_dict(), indent=2) + "\n")
                (out / "metrics.jsonl").unlink(missing_ok=True)
            except OSError as e:
                raise InputError(f"--out {out}: cannot write there ({e.strerror})") from None

    def _checkpoint_due(self):
        c = self.config
        by_steps = c.checkpoint_interval and self.step % c.checkpoint_interval == 0
        by_tokens = c.checkpoint_tokens and self.tokens // c.checkpoint_tokens > (self.tokens - self.tokens_per_step) // c.checkpoint_tokens
        return bool(by_steps or by_tokens)

    def _save(self):
        if not self.master:
            return
        from safetensors.torch import save_file

        name = f"step-{self.step:06d}_tokens-{self.tokens}"
        directory = self.run_dir / CHECKPOINTS / name
        state = {
            "step": self.step, "tokens": self.tokens, "config_digest": self.config.digest(),
            "optimizer_steps": {k: getattr(o, "steps", self.step) for k, o in self.optimizers.items()},
            "schedule": self.schedule.state(),
            "loader": self.loader.state(),
            "rng": {"torch": torch.get_rng_state().numpy().tobytes().hex(),
                    "cuda": [s.numpy().tobytes().hex() for s in torch.cuda.get_rng_state_all()] if self.device.type == "cuda" else []},
        }
        tensors = {f"{k}/{n}": t for k, o in self.optimizers.items() for n, t in o.state_tensors().items()}
        save_model(self.model, self.tokenizer, directory, eot_id=self.eot_id, extra_files={
            OPTIMIZER_FILE: lambda path: save_file({k: v.contiguous().cpu() for k, v in tensors.items()}, path),
            STATE_FILE: lambda path: path.write_text(json.dumps(state, indent=2) + "\n"),
        })
        link = self.run_dir / f".{LATEST}.tmp-{os.getpid()}"
        link.unlink(missing_ok=True)
        link.symlink_to(Path(CHECKPOINTS) / name)
        os.replace(link, self.run_dir / LATEST)  # the pointer moves only once the checkpoint is whole
        self._log(f"saved {directory}")
        for old in sorted((self.run_dir / CHECKPOINTS).glob("step-*"))[: -self.config.keep_last]:
            doomed = old.with_name(f".{old.name}.tmp-{os.getpid()}")  # never half-deleted under its own name
            os.replace(old, doomed)
            shutil.rmtree(doomed)
        for stale in (self.run_dir / CHECKPOINTS).glob(".step-*.tmp-*"):  # left by a process killed while saving
            shutil.rmtree(stale, ignore_errors=True)

    def _resume(self, checkpoint):
        if not checkpoint.exists():
            raise InputError(f"--out {self.run_dir}: no checkpoint to resume from ({checkpoint} is missing)")
        try:
            state = self._read_state(checkpoint)
            if state["config_digest"] != self.config.digest():
                raise InputError(f"--resume {self.run_dir}: the settings differ from the run's "
                                 f"({_config_difference(self.run_dir, self.config)})")
            model, _ = load_model(checkpoint, self.device)
            tensors = self._read_optimizer_state(checkpoint)
        except CheckpointError as e:
            raise CheckpointError(f"{e}; {self._intact_checkpoint_note(checkpoint)}") from None
        self.model.load_state_dict(model.state_dict())
        for key, optimizer in self.optimizers.items():
            prefix = f"{key}/"
            optimizer.load_state_tensors({k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)},
                                         state["optimizer_steps"][key])
        torch.set_rng_state(torch.from_numpy(np.frombuffer(bytes.fromhex(state["rng"]["torch"]), np.uint8).copy()))
        self.step, self.tokens = state["step"], state["tokens"]
        metrics = self.run_dir / "metrics.jsonl"
        if self.master and metrics.exists():  # records from after the checkpoint belong to the interrupted attempt
            kept = [line for line in metrics.read_text(errors="replace").splitlines() if _record_step(line) <= self.step]
            with atomic_write(metrics) as f:
                f.write("".join(line + "\n" for line in kept))
        self._resume_schedule(state.get("schedule"))

    def _read_state(self, checkpoint):
        """A checkpoint's trainer_state.json, checked (its CRC-32 and every field a resume reads)."""
        path = check_file(checkpoint, STATE_FILE, read_checkpoint_config(checkpoint))
        try:
            state = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError) as e:
            raise CheckpointError(f"{path}: damaged, not JSON ({e})") from None
        problem = _state_problem(state, self.optimizers)
        if problem:
            raise CheckpointError(f"{path}: damaged ({problem})")
        return state

    def _read_optimizer_state(self, checkpoint):
        path = checkpoint / OPTIMIZER_FILE
        tensors = read_tensors(checkpoint, OPTIMIZER_FILE, device=self.device)
        for key, optimizer in self.optimizers.items():
            for name, tensor in optimizer.state_tensors().items():
                saved = tensors.get(f"{key}/{name}")
                if saved is None or saved.shape != tensor.shape:
                    raise CheckpointError(f"{path}: damaged ({'no' if saved is None else 'a wrong shape of'} tensor {key}/{name})")
        return tensors

    def _intact_checkpoint_note(self, damaged):
        """Which checkpoint of the run a resume could start from instead of a damaged one."""
        for candidate in sorted((self.run_dir / CHECKPOINTS).glob("step-*"), reverse=True):
            if candidate.resolve() == damaged.resolve():
                continue
            try:
                config = read_checkpoint_config(candidate)
                for name in config.get("crc32", {}):
                    check_file(candidate, name, config)
                self._read_state(candidate)
            except CheckpointError:
                continue
            return f"{candidate.name} is intact: resume from it with --resume --from-checkpoint {candidate}"
        return f"no intact checkpoint in {self.run_dir / CHECKPOINTS} to resume from"

    def _resume_schedule(self, saved):
        """The run's own plan; or, when this resume gives a new length (--max-steps, --max-tokens,
        --max-time), a plan re-made from this step, recorded in config.json and metrics.jsonl."""
        if saved is not None:
            self.schedule = Schedule(self.config, **saved)
        then = load_run_config(self.run_dir)
        if all(then.get(k) == getattr(self.config, k) for k in LENGTH):
            if self.total_steps != UNPLANNED:
                self.time_budget = None  # a timed run resumes on the plan it made
            return
        total = self._planned_steps()
        if total <= self.step:
            flag = "--max-tokens" if self.config.max_tokens else "--max-steps"
            raise InputError(f"{flag}: the run in {self.run_dir} has done {self.step:,} steps, "
                             f"{'all' if total == self.step else 'more than'} the {total:,} asked for")
        if self.master:
            with atomic_write(self.run_dir / "config.json") as f:
                f.write(json.dumps(self.config.to_dict(), indent=2) + "\n")
        if self.time_budget:  # planned from this session's throughput, once it is measured
            self.schedule = self.schedule.replan(self.step, UNPLANNED)
        else:
            self._replan(total, "--resume with a new length")

    def _on_signal(self, signum, frame):
        self.stop_signal = signal.Signals(signum).name


def _state_problem(state, optimizers):
    """What a trainer_state.json lacks for a resume, or None."""
    if not isinstance(state, dict):
        return "not a JSON object"
    for key, kind in (("step", int), ("tokens", int), ("config_digest", str), ("optimizer_steps", dict), ("rng", dict)):
        if not isinstance(state.get(key), kind):
            return f"no {key!r}" if key not in state else f"{key!r} is not a {kind.__name__}"
    missing = [k for k in optimizers if not isinstance(state["optimizer_steps"].get(k), int)]
    if missing:
        return f"no step count of optimizer {missing[0]!r}"
    try:
        bytes.fromhex(state["rng"]["torch"])
    except (KeyError, TypeError, ValueError):
        return "no random-number state"
    return None


def _record_step(line):
    """The step of a metrics.jsonl line; a line cut short (a full disk) counts as past any step."""
    try:
        return json.loads(line)["step"]
    except (ValueError, TypeError, KeyError):
        return math.inf


def _is_run_dir(directory):
    try:
        load_run_config(directory)
        return True
    except InputError:
        return False


def _token_bytes(tokenizer):
    """The length in bytes of each token's text; 0 for special tokens, which stand for no text."""
    special = set(tokenizer.special_tokens.values())
    return [0 if i in special else len(b) for i, b in enumerate(tokenizer.vocab)]


def _model_config(model, tokenizer) -> ModelConfig:
    config = ModelConfig.from_dict(dict(model), "model") if isinstance(model, dict) else load_config(model)
    config.vocab_size = tokenizer.vocab_size  # the model is made for the data's tokenizer
    return config


def _config_difference(run_dir, config):
    saved = json.loads((run_dir / "config.json").read_text())
    now = config.to_dict()
    changed = [k for k in RESUME_FIXED if saved.get(k) != now.get(k)]
    return ", ".join(f"{k}: {saved.get(k)!r} then, {now.get(k)!r} now" for k in changed[:2]) or "the run's config.json was edited"


def _hms(seconds):
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def load_run_config(run_dir) -> dict:
    """The settings a run saved in its config.json, checked."""
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        raise InputError(f"--out {run_dir}: no config.json, so no run to resume")
    try:
        saved = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: damaged, not JSON ({e})") from None
    if not isinstance(saved, dict):
        raise InputError(f"{path}: damaged, not a JSON object of training settings")
    unknown = sorted(set(saved) - set(FIELDS))
    if unknown:
        raise InputError(f"{path}: unknown setting {unknown[0]!r}; was the file edited?")
    return saved
