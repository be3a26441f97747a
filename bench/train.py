"""Benchmark a training step (`train.trainer.Trainer.train_step`) against Hugging Face
`transformers` + `torch.optim.AdamW` on the same model, weights and batches (float32, CPU).

    python bench/train.py [--threads 2] [--batch-size 8] [--context 256] [--steps 10] [--repeat 3]

The model: Llama-style, hidden 256, 4 layers, 4 heads, d_ff 688, vocabulary 10000, context
--context (256), untied embeddings. The data: a temporary shard directory of uniformly random
token ids (`shared.shards.ShardWriter`, a manifest, and a dummy 10000-token tokenizer.json made
as bench/sample.py makes it), so that a real `Trainer` can be built on it.

  ours  `Trainer(...).train_step()` end to end: the batch from the memmapped shards (our
        loader), forward with targets, backward, clip_grad_norm_(1.0), our AdamW step
        (lr 1e-3 under the trainer's schedule, betas (0.9, 0.95), weight decay 0.1 on the
        hidden matrices only: the defaults of TrainConfig), zero_grad
  hf    `LlamaForCausalLM` loaded from our initial weights exported with `model.hf.export_hf`
        (attention: transformers' default, SDPA), `use_cache=False`; the same batches from the
        same loader (`train.data.Loader`, same seed); `loss = model(input_ids=inputs,
        labels=targets, shift_labels=targets).loss` (the targets are already shifted, so both
        losses are over the same B*T predictions); backward; clip_grad_norm_(1.0);
        `torch.optim.AdamW(betas=(0.9, 0.95), eps=1e-8, fused=False, foreach default)` with the
        same two parameter groups (weight decay 0.1 / 0.0) and the same learning rate at every
        step; zero_grad(set_to_none=True)
  peak  float32 matrix product 2048 x 2048 x 2048 in a loop (`torch.mm(out=)`): what the
        machine's matmul reaches with the same thread count, for the "% of peak" column

Each measurement is a fresh child process (this script, hidden sub-command `_one`): 2 warm-up
steps, then --steps timed steps; tokens/s = steps * batch * context / their time. The modes take
turns for --repeat rounds (so slow spells of the machine hit all alike); medians over the rounds.
GFLOP/s = tokens/s * `model.info.model_cost(config).flops_per_token` (PaLM's count: 6 per
matmul weight + attention), one number for both since the shapes are equal.

First a check child: with identical initial weights and the same batch, the first-step losses of
ours and HF must agree within 1e-4 (the exit status is 1 if not); it also prints the gradient
norms and the losses of the next step (after one identical update each).
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # the repository, not bench/: `from bench.common import ...`

from bench.common import run_child, torch_machine  # noqa: E402 (after the path is set)

MODEL = dict(vocab_size=10000, d_model=256, n_layers=4, n_heads=4, d_ff=688, tie_embeddings=False)
MODES = ("ours", "hf")
WARMUP = 2
SEED = 1337
TRAIN_TOKENS, VAL_TOKENS = 1 << 20, 1 << 14
LOSS_TOLERANCE = 1e-4
PEAK_N, PEAK_WARMUP, PEAK_ITERS = 2048, 3, 20


# -- the data directory --------------------------------------------------------------------------


def build_data(directory, vocab=MODEL["vocab_size"], train_tokens=TRAIN_TOKENS):
    """tokenizer.json, one train and one val shard of random ids, manifest.json."""
    import numpy as np

    from bench.sample import dummy_tokenizer
    from gptkit.shared.shard_dir import FORMAT, MANIFEST, TOKENIZER_FILE, VERSION
    from gptkit.shared.shards import ShardWriter, dtype_for

    tokenizer = dummy_tokenizer(vocab)
    directory.mkdir(parents=True)
    tokenizer.save(directory / TOKENIZER_FILE)
    rng = np.random.default_rng(SEED)
    dtype = dtype_for(vocab)
    shards = []
    for index, (split, n) in enumerate((("val", VAL_TOKENS), ("train", train_tokens))):
        name = f"bench_{split}_{index:06d}.bin"
        writer = ShardWriter(directory / name, dtype, vocab_size=vocab, eot_id=None, fingerprint=tokenizer.fingerprint)
        writer.write(rng.integers(0, vocab - 1, n, dtype=np.int64).astype(dtype))  # no end-of-text
        header = writer.close()
        writer.commit()
        shards.append({"file": name, "split": split, "tokens": n, "documents": 0, "crc32": f"{header.checksum:08x}"})
    # Every field a reader checks (shared/shard_dir.py MANIFEST_ID and MANIFEST_FIELDS), as pretokenize would write it.
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "name": "bench",
        "dtype": dtype.name,
        "shards": shards,
        "eot_token": None,
        "eot_id": None,
        "tokenizer": {"fingerprint": tokenizer.fingerprint, "vocab_size": vocab},
        "split": {"text": "random ids"},
        "totals": {s["split"]: {"documents": 0, "tokens": s["tokens"]} for s in shards},
    }
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")


def train_config(tmp, out, a):
    from gptkit.train.config import TrainConfig

    return TrainConfig.of(
        data=str(tmp / "data"),
        out=str(tmp / out),
        model=dict(MODEL, context_length=a.context),
        device="cpu",
        seed=SEED,
        batch_size=a.batch_size,
        context_length=a.context,
        eval_tokens=4 * a.context,
    )


def trainer(tmp, out, a):
    from gptkit.train.processes import Dist
    from gptkit.train.settle import settle
    from gptkit.train.trainer import Trainer

    return Trainer(settle(train_config(tmp, out, a)), Dist())


# -- the reference: transformers + torch.optim.AdamW ---------------------------------------------


class HFStep:
    """What `Trainer.train_step` does, with LlamaForCausalLM and torch.optim.AdamW."""

    def __init__(self, tmp, a):
        import torch
        from transformers import LlamaForCausalLM
        from transformers.utils import logging

        from gptkit.shared.shard_dir import ShardDir
        from gptkit.train.budget import Planner
        from gptkit.train.data import Loader, ShardData, data_tokenizer
        from gptkit.train.processes import Dist
        from gptkit.train.settle import completed

        self.config = config = completed(train_config(tmp, "unused", a))
        logging.disable_progress_bar()
        self.model = LlamaForCausalLM.from_pretrained(tmp / "hf", dtype=torch.float32).train()
        data_dir = ShardDir(config.job.data)
        tokenizer = data_tokenizer(data_dir)
        data = ShardData(data_dir, "train", tokenizer.vocab_size, tokenizer.fingerprint, a.context)
        self.loader = Loader(data, config.batch, config.job.seed, Dist())
        decayed, plain = [], []  # as build_optimizers: decay on matrices, not on norms or embeddings
        for name, p in self.model.named_parameters():
            embedding = name in ("model.embed_tokens.weight", "lm_head.weight")
            (decayed if p.dim() >= 2 and not embedding else plain).append(p)
        self.optimizer = torch.optim.AdamW(
            [{"params": decayed, "weight_decay": config.optim.weight_decay}, {"params": plain, "weight_decay": 0.0}],
            lr=config.optim.lr,
            betas=(config.optim.beta1, config.optim.beta2),
            eps=config.optim.eps,
            fused=False,
        )
        planner = Planner(config.length, config.lr_schedule, config.optim.lr, a.batch_size * a.context)
        self.planner, self.step = planner, 0

    def __call__(self):
        import torch

        sequences = torch.from_numpy(self.loader.batch(self.step)).long()
        inputs, targets = sequences[:, :-1], sequences[:, 1:]
        lr = self.planner.lr(self.step)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        targets = targets.contiguous()  # a view of the loader's (B, T + 1) rows; HF's loss views it flat
        loss = self.model(input_ids=inputs, labels=targets, shift_labels=targets, use_cache=False).loss
        loss.backward()
        loss = loss.item()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.optim.grad_clip).item()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        return loss, grad_norm, lr


def ours_step(ours):
    """One `Trainer.train_step`, then what Trainer's loop does after it; (loss, grad norm, lr) as
    HFStep returns them (the values read at once: on the CPU nothing runs ahead anyway)."""
    lr = ours.planner.lr(ours.step)
    loss, grad_norm = ours.train_step()
    ours.progress.step += 1
    return loss.item(), grad_norm.item(), lr


# -- children --------------------------------------------------------------------------------------


def child_check(tmp, a):
    """Export our Trainer's initial model for HF; compare the first two steps of both."""
    import torch

    from gptkit.model.checkpoint import save_model
    from gptkit.model.hf import export_hf

    ours = trainer(tmp, "run-check", a)
    save_model(ours.model, ours.run.tokenizer, tmp / "ckpt")
    export_hf(tmp / "ckpt", tmp / "hf")
    hf = HFStep(tmp, a)
    with torch.no_grad():
        inputs = torch.from_numpy(ours.run.loader.batch(0)).long()[:, :-1]
        reference = hf.model(input_ids=inputs, use_cache=False).logits
        difference = (ours.model(inputs)[0] - reference).abs().max().item()
    steps = {"ours": [], "hf": []}
    for _ in range(2):
        steps["ours"].append(ours_step(ours))
        steps["hf"].append(hf())
    return {"steps": steps, "logits_max_abs_diff": difference, "attn": hf.model.config._attn_implementation}


def child_time(tmp, a):
    import torch

    if a.mode == "peak":
        x, y = torch.randn(PEAK_N, PEAK_N), torch.randn(PEAK_N, PEAK_N)
        out = torch.empty(PEAK_N, PEAK_N)
        seconds = []
        for i in range(PEAK_WARMUP + PEAK_ITERS):
            start = time.perf_counter()
            torch.mm(x, y, out=out)
            if i >= PEAK_WARMUP:
                seconds.append(time.perf_counter() - start)
        return {"flops": 2 * PEAK_N**3 * len(seconds) / sum(seconds)}
    if a.mode == "ours":
        ours = trainer(tmp, f"run-{a.round}", a)

        def step():
            return ours_step(ours)
    else:
        step = HFStep(tmp, a)
    for _ in range(WARMUP):
        step()
    start = time.perf_counter()
    losses = [step()[0] for _ in range(a.steps)]
    seconds = time.perf_counter() - start
    return {"tokens_per_s": a.steps * a.batch_size * a.context / seconds, "losses": losses}


def child_profile(tmp, a):
    """One step of each (after the warm-up) under torch.profiler: top ops by self CPU time."""
    from torch.profiler import ProfilerActivity, profile

    ours = trainer(tmp, "run-profile", a)
    for name, step in (("ours", lambda: ours_step(ours)), ("hf", HFStep(tmp, a))):
        for _ in range(WARMUP):
            step()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            step()
        print(f"\n== {name}: one step, top ops by self CPU time ==")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))


def child_main(argv):
    import torch

    parser = argparse.ArgumentParser(prog="bench/train.py _one")
    parser.add_argument("mode", choices=[*MODES, "peak", "check", "profile"])
    parser.add_argument("tmp", type=Path)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--context", type=int)
    parser.add_argument("--steps", type=int)
    parser.add_argument("--round", type=int, default=0)
    a = parser.parse_args(argv)
    torch.set_num_threads(a.threads)
    if a.mode == "profile":
        return child_profile(a.tmp, a)
    result = child_check(a.tmp, a) if a.mode == "check" else child_time(a.tmp, a)
    print(json.dumps(result))


# -- parent ----------------------------------------------------------------------------------------


def main():
    if sys.argv[1:2] == ["_one"]:
        return child_main(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="torch threads (torch.set_num_threads), all modes")
    parser.add_argument("--batch-size", type=int, default=8, help="sequences per step")
    parser.add_argument("--context", type=int, default=256, help="tokens per sequence (and the model's context)")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per child, after 2 warm-up steps")
    parser.add_argument("--repeat", type=int, default=3, help="rounds: children per mode; medians are reported")
    parser.add_argument("--profile", action="store_true", help="also profile one step of each (torch.profiler)")
    a = parser.parse_args()
    from gptkit.model.config import ModelConfig
    from gptkit.model.info import model_cost

    config = ModelConfig(**MODEL, context_length=a.context)
    cost = model_cost(config)
    tokens_per_step = a.batch_size * a.context
    print(torch_machine(a.threads))
    print(
        f"model: random Llama-style, hidden {config.d_model}, {config.n_layers} layers, {config.n_heads} heads, "
        f"d_ff {config.d_ff}, vocab {config.vocab_size}, context {config.context_length}, untied, float32, CPU; "
        f"{cost.params:,} parameters"
    )
    print(
        f"step: batch {a.batch_size} x context {a.context} = {tokens_per_step:,} tokens, AdamW (lr 1e-3 warmup "
        f"schedule, betas (0.9, 0.95), wd 0.1 on hidden matrices), clip 1.0; {WARMUP} warm-up + {a.steps} timed steps "
        f"per child, {a.repeat} rounds of fresh children per mode (medians)"
    )
    print(
        f"FLOPs/token: {cost.flops_per_token / 1e6:.2f} M (model.info.model_cost, the same for both: equal shapes); "
        f"peak: fp32 {PEAK_N}x{PEAK_N} matmul loop, same threads"
    )
    common = ["--threads", a.threads, "--batch-size", a.batch_size, "--context", a.context, "--steps", a.steps]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-train-") as tmp:
        tmp = Path(tmp)
        build_data(tmp / "data")
        check = run_child(__file__, ["check", tmp, *common])
        runs = {mode: [] for mode in (*MODES, "peak")}
        for r in range(a.repeat):
            for mode in (*MODES, "peak"):
                result = run_child(__file__, [mode, tmp, *common, "--round", r])
                runs[mode].append(result["flops"] if mode == "peak" else result["tokens_per_s"])
                shown = f"{runs[mode][-1] / 1e9:.1f} GFLOP/s" if mode == "peak" else f"{runs[mode][-1]:,.0f} tokens/s"
                print(f"  round {r + 1}/{a.repeat}: {mode} {shown}", file=sys.stderr)
        if a.profile:
            subprocess.run([sys.executable, __file__, "_one", "profile", str(tmp), *map(str, common)], check=True)
    peak = statistics.median(runs["peak"])
    speed = {mode: statistics.median(runs[mode]) for mode in MODES}
    print(
        f"\nmatmul peak (fp32, {PEAK_N}^3, {a.threads} threads): {peak / 1e9:.1f} GFLOP/s "
        f"(range {min(runs['peak']) / 1e9:.1f}-{max(runs['peak']) / 1e9:.1f})"
    )
    print(
        "\n| mode | tokens/s | range, tokens/s | ms/step | GFLOP/s | % of matmul peak | vs HF |\n"
        "|---|---:|---:|---:|---:|---:|---:|"
    )
    for mode in MODES:
        flops = speed[mode] * cost.flops_per_token
        print(
            f"| {mode} | {speed[mode]:,.0f} | {min(runs[mode]):,.0f}-{max(runs[mode]):,.0f} | "
            f"{1000 * tokens_per_step / speed[mode]:.0f} | {flops / 1e9:.1f} | {100 * flops / peak:.1f}% | "
            f"{speed[mode] / speed['hf']:.2f} |"
        )
    print(f"\nours / HF, tokens/s: {speed['ours'] / speed['hf']:.2f} (target >= 1.1)")
    (loss_o, norm_o, lr_o), (loss_h, norm_h, lr_h) = check["steps"]["ours"][0], check["steps"]["hf"][0]
    agree = abs(loss_o - loss_h) <= LOSS_TOLERANCE
    print(
        f"check (same initial weights, exported with export_hf; same batch; HF attention {check['attn']}): "
        f"logits max |diff| {check['logits_max_abs_diff']:.2e}"
    )
    print(
        f"  first-step loss: ours {loss_o:.6f}, HF {loss_h:.6f}, |diff| {abs(loss_o - loss_h):.2e} "
        f"({'agree' if agree else 'DISAGREE'} within {LOSS_TOLERANCE:g})"
    )
    print(f"  first-step grad norm: ours {norm_o:.6f}, HF {norm_h:.6f}; lr {lr_o:.2e} / {lr_h:.2e}")
    (loss_o, _, _), (loss_h, _, _) = check["steps"]["ours"][1], check["steps"]["hf"][1]
    print(
        f"  second-step loss (after one update each): ours {loss_o:.6f}, HF {loss_h:.6f}, |diff| {abs(loss_o - loss_h):.2e}"
    )
    print(f"total time: {time.perf_counter() - started:.0f} s")
    if not agree:
        sys.exit(1)


if __name__ == "__main__":
    main()
