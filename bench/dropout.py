"""The recipe's dropout rule (train/recipe/ladder.py, dropout_for) against runs with and without dropout:
`gptkit train` at fixed steps on a rung of the recipe's ladder, each run a whole schedule, scored on
the data's validation split in held-out bits per byte, beside the passes, the parameter-passes and
the dropout the rule gives them. First, what dropout costs a step of the rung here: none, the
recipe's (not on the attention weights), and nanoGPT's (on them too), medians, with the load.

    python bench/dropout.py DATA... --rung 1 --passes 27 [--dropout 0 0.2] [--attention] [--context 256] [--threads 1]
    python bench/dropout.py --rung 2 --threads 2 [--busy 2]          # the step times alone

DATA: pretokenize output directories (e.g. `bench/recipe.py`'s WORK/<text>/data). --rung: the
ladder's index (0: d 64 x 2 layers, 1: d 96 x 3); --passes or --steps sets the length. A
fixed-step result does not depend on the load, so several of these may run side by side; the
step times do (--busy N: N busy processes beside them).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import busy_processes, cpu, load_average  # noqa: E402 (after the path is set)
from gptkit.model.config import ModelConfig  # noqa: E402
from gptkit.model.info import model_cost  # noqa: E402
from gptkit.model.model import TransformerLM  # noqa: E402
from gptkit.shared.shard_dir import ShardDir  # noqa: E402
from gptkit.train.recipe.ladder import DROPOUT, LADDER, dropout_for  # noqa: E402


def step_times(shape, threads, vocab_size=1024, steps=10):
    """Median seconds of a training step of `shape` without dropout, with the recipe's, and with nanoGPT's."""
    import torch

    torch.set_num_threads(threads)
    times = {}
    for name, config in (
        ("none", shape.model(vocab_size)),
        ("the recipe's", shape.model(vocab_size, DROPOUT)),
        ("nanoGPT's", {**shape.model(vocab_size), "dropout": DROPOUT}),
    ):
        model = TransformerLM(ModelConfig(**config)).train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        batch = torch.randint(vocab_size, (shape.batch, shape.context + 1))
        seconds = []
        for _ in range(steps + 2):  # two warm-up steps
            started = time.perf_counter()
            model(batch[:, :-1], batch[:, 1:])[1].backward()
            optimizer.step()
            optimizer.zero_grad()
            seconds.append(time.perf_counter() - started)
        times[name] = statistics.median(seconds[2:])
    return times


def trained(data, shape, vocab_size, steps, dropout, attention, threads, work):
    """The final held-out bits per byte of `gptkit train` on `data` at `shape` for `steps` steps, with
    `dropout` as the recipe puts it (`attention`: on the attention weights too)."""
    config = work / "config.json"
    model = {**shape.model(vocab_size, dropout), **({"attention_dropout": dropout} if attention else {})}
    config.write_text(
        json.dumps(
            {
                "model": model,
                "batch_size": shape.batch,
                "lr": shape.lr,
                "max_steps": steps,
                "eval_interval": 0,
                "eval_tokens": 10**8,
                "checkpoint_interval": 0,
            }
        )
    )
    run = work / "run"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "gptkit",
            "train",
            "--config",
            str(config),
            "--data",
            str(data),
            "--out",
            str(run),
            "--threads",
            str(threads),
            "--device",
            "cpu",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return next(row["val_bpb"] for row in reversed(rows) if "val_bpb" in row)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="*", type=Path)
    parser.add_argument("--rung", type=int, default=0, help="the ladder's index (0: d 64 x 2 layers)")
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--passes", type=float, help="passes over each text's training tokens")
    length.add_argument("--steps", type=int)
    parser.add_argument("--context", type=int, help="the rung's tokens a step at this context (default: the rung's)")
    parser.add_argument("--dropout", type=float, nargs="+", default=[0.0, 0.2])
    parser.add_argument(
        "--attention", action="store_true", help="drop the attention weights too, as nanoGPT (the recipe does not)"
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--busy", type=int, default=0, help="busy processes beside the step times")
    args = parser.parse_args()
    if args.data and not (args.passes or args.steps):
        parser.error("DATA needs --passes or --steps")
    shape = LADDER[args.rung]
    if args.context:
        shape = shape.at_context(args.context)
    print(
        f"machine: {cpu()}, {args.threads} thread(s); d {shape.d_model} x {shape.n_layers} layers, "
        f"batch {shape.batch} x {shape.context}, lr {shape.lr:g}"
    )
    with busy_processes(args.busy):
        times = step_times(shape, args.threads)
        load = load_average()
    print(
        f"a step ({args.busy} busy processes beside it, load {load:.1f}): "
        + ", ".join(f"dropout {name} {1000 * t:.0f} ms ({t / times['none']:.2f}x)" for name, t in times.items())
    )
    if not args.data:
        return
    print(
        "| text | parameters | passes (steps) | parameter-passes | the rule's dropout | "
        + " | ".join(f"dropout {d:g}{' (attention too)' if args.attention and d else ''}" for d in args.dropout)
        + " |"
    )
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
                bits.append(trained(data, shape, vocab_size, steps, dropout, args.attention, args.threads, Path(tmp)))
        print(
            f"| {data.parent.name if data.name == 'data' else data.name} | {params / 1e6:.2f}M | {passes:.1f} ({steps:,}) "
            f"| {passes * params / 1e6:.1f}M | {dropout_for(passes, params):g} | "
            + " | ".join(f"{b:.3f}" for b in bits)
            + " |",
            flush=True,
        )


if __name__ == "__main__":
    main()
