"""The recipe's dropout rule (train/recipe.py, dropout_for) against runs with and without dropout:
`gptkit train` at fixed steps on a rung of the recipe's ladder, each run a whole schedule, scored on
the data's validation split in held-out bits per byte, beside the passes, the parameter-passes and
the dropout the rule gives them.

    python bench/dropout.py DATA... --rung 1 --passes 27 [--dropout 0 0.2] [--context 256] [--threads 1]

DATA: pretokenize output directories (e.g. `bench/recipe.py`'s WORK/<text>/data). --rung: the
ladder's index (0: d 64 x 2 layers, 1: d 96 x 3); --passes or --steps sets the length. A
fixed-step result does not depend on the load, so several of these may run side by side.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import cpu  # noqa: E402 (after the path is set)
from gptkit.model.config import ModelConfig  # noqa: E402
from gptkit.model.info import model_cost  # noqa: E402
from gptkit.shared.shard_dir import ShardDir  # noqa: E402
from gptkit.train.recipe import LADDER, dropout_for  # noqa: E402


def trained(data, shape, vocab_size, steps, dropout, threads, work):
    """The final held-out bits per byte of `gptkit train` on `data` at `shape` for `steps` steps."""
    config = work / "config.json"
    config.write_text(json.dumps({"model": {**shape.model(vocab_size), "dropout": dropout}, "batch_size": shape.batch,
                                  "lr": shape.lr, "max_steps": steps, "eval_interval": 0, "eval_tokens": 10**8,
                                  "checkpoint_interval": 0}))
    run = work / "run"
    subprocess.run([sys.executable, "-m", "gptkit", "train", "--config", str(config), "--data", str(data), "--out", str(run),
                    "--threads", str(threads), "--device", "cpu"], check=True, stdout=subprocess.DEVNULL)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return next(row["val_bpb"] for row in reversed(rows) if "val_bpb" in row)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="+", type=Path)
    parser.add_argument("--rung", type=int, default=0, help="the ladder's index (0: d 64 x 2 layers)")
    length = parser.add_mutually_exclusive_group(required=True)
    length.add_argument("--passes", type=float, help="passes over each text's training tokens")
    length.add_argument("--steps", type=int)
    parser.add_argument("--context", type=int, help="the rung's tokens a step at this context (default: the rung's)")
    parser.add_argument("--dropout", type=float, nargs="+", default=[0.0, 0.2])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    shape = LADDER[args.rung]
    if args.context:
        shape = shape.at_context(args.context)
    print(f"machine: {cpu()}, {args.threads} thread(s); d {shape.d_model} x {shape.n_layers} layers, "
          f"batch {shape.batch} x {shape.context}, lr {shape.lr:g}")
    print("| text | parameters | passes (steps) | parameter-passes | the rule's dropout | "
          + " | ".join(f"dropout {d:g}" for d in args.dropout) + " |")
    print("|---|---:|---:|---:|---:|" + "---:|" * len(args.dropout))
    for data in args.data:
        shards = ShardDir(str(data))
        vocab_size, tokens = shards.vocab_size, shards.tokens("train")
        steps = args.steps or round(args.passes * tokens / (shape.batch * shape.context))
        passes = steps * shape.batch * shape.context / tokens
        params = model_cost(ModelConfig(**shape.model(vocab_size))).params
        bits = []
        for dropout in args.dropout:
            with tempfile.TemporaryDirectory() as tmp:
                bits.append(trained(data, shape, vocab_size, steps, dropout, args.threads, Path(tmp)))
        print(f"| {data.parent.name if data.name == 'data' else data.name} | {params / 1e6:.2f}M | {passes:.1f} ({steps:,}) "
              f"| {passes * params / 1e6:.1f}M | {dropout_for(passes, params):g} | " + " | ".join(f"{b:.3f}" for b in bits) + " |",
              flush=True)


if __name__ == "__main__":
    main()
