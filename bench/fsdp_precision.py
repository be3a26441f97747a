"""What FSDP's mixed precision on CUDA computes against what DDP computes, on a CPU.

DDP trains float32 weights under bf16 autocast; FSDP (train/fsdp.py) gathers bf16 copies of a
block's weights for its forward. Here both are one process, from the same weights and batches,
the gathers emulated with torch.func.functional_call over bf16 copies (the gradients flow back
through the casts to the float32 weights, as FSDP reduces them in float32):

  ddp               float32 weights, bf16 autocast (DDP on CUDA)
  ddp-permuted      the same, each batch's rows in another order: the same arithmetic summed in
                    another order, the size of the differences rounding alone makes
  fsdp              every weight's bf16 copy (train/fsdp.py's policy): the embedding, and so
                    the residual stream, bf16
  fsdp-float32-root the blocks' bf16 copies, the root's (embeddings, final norm, head) float32:
                    the residual stream float32, as under DDP

It prints each variant's mean loss minus ddp's over windows of steps, averaged over --seeds
orders of the batches (with the smallest and largest of them), and the load.

    python bench/fsdp_precision.py --data DATA_DIR [--steps 300] [--seeds 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import statistics

import numpy as np
import torch
from torch.func import functional_call

from gptkit.model.config import ModelConfig
from gptkit.model.model import TransformerLM
from gptkit.shared.shard_dir import ShardDir
from gptkit.shared.shards import open_shard

VARIANTS = ("ddp", "ddp-permuted", "fsdp", "fsdp-float32-root")


def weights(model, variant):
    """The weights the forward computes with: bf16 copies where FSDP's policy gathers them so."""
    params = dict(model.named_parameters())
    if variant.startswith("fsdp"):
        return {
            n: p if variant == "fsdp-float32-root" and not n.startswith("layers.") else p.bfloat16()
            for n, p in params.items()
        }
    return params


def train(tokens, config, variant, seed, steps, batch, lr):
    torch.manual_seed(0)
    model = TransformerLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1, betas=(0.9, 0.95))
    rng, T = np.random.default_rng(seed), config.context_length
    losses = []
    for step in range(steps):
        starts = rng.integers(0, len(tokens) - T - 1, batch)
        if variant == "ddp-permuted":
            starts = starts[::-1].copy()
        rows = torch.from_numpy(np.stack([tokens[s : s + T + 1] for s in starts]).astype(np.int64))
        for group in optimizer.param_groups:
            group["lr"] = lr * min(1, (step + 1) / 20)
        with torch.autocast("cpu", torch.bfloat16):
            loss = functional_call(model, weights(model, variant), (rows[:, :-1], rows[:, 1:]))[1]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="a pretokenize output directory")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--window", type=int, default=50)
    parser.add_argument("--seeds", type=int, default=3, help="orders of the batches")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    data = ShardDir(args.data)
    tokens = np.concatenate([np.asarray(open_shard(p).tokens) for p in data.shard_paths("train")])
    config = ModelConfig(vocab_size=data.vocab_size, context_length=128, d_model=128, n_layers=4, n_heads=4, d_ff=344)
    load = os.getloadavg()[0]
    w, starts = args.window, range(0, args.steps, args.window)
    runs = [
        {v: train(tokens, config, v, seed, args.steps, 16, 3e-3) for v in VARIANTS} for seed in range(1, args.seeds + 1)
    ]
    windows = [f"{i + 1}-{min(i + w, args.steps)}" for i in starts]
    print(
        f"d {config.d_model}, {config.n_layers} layers, context {config.context_length}, batch 16, {args.steps} steps, "
        f"{args.seeds} orders of the batches, {args.threads} thread(s); load {load:.2f} -> {os.getloadavg()[0]:.2f}"
    )
    print("| variant | " + " | ".join(f"steps {x}" for x in windows) + " |")
    print("|---|" + "---:|" * len(windows))
    ddp = [statistics.mean(statistics.mean(r["ddp"][i : i + w]) for r in runs) for i in starts]
    print("| ddp: mean loss | " + " | ".join(f"{x:.3f}" for x in ddp) + " |")
    for v in VARIANTS[1:]:
        cells = []
        for i in starts:  # each order's mean difference over the window: their mean (smallest, largest)
            d = [statistics.mean(a - b for a, b in zip(r[v][i : i + w], r["ddp"][i : i + w])) for r in runs]
            cells.append(f"{statistics.mean(d):+.4f} ({min(d):+.3f}, {max(d):+.3f})")
        print(f"| {v} - ddp | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
