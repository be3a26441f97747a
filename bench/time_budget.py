"""A --max-time run on an idle machine and on a busy one: the same command, the same text, the
held-out bits per byte each reaches, and whether the budget and the schedule held.

    python bench/time_budget.py [TEXT] [--budget 2m] [--loads idle python] [--work DIR]

TEXT: default ../shared/data/tinyshakespeare.txt. Its tokenizer (1024 tokens, the Makefile's
size for a text under 4 MB) and shards (pretokenize's default split: the held-out tail) are made
once, untimed. Then for each load, in a fresh process, the command a user runs:
`gptkit train --data D --out RUN --max-time BUDGET` (the recipe, the default threads: no
--threads, no OMP_NUM_THREADS). Loads: `idle`; `python`, two processes each running a Python
busy loop beside it; `torch`, two processes each multiplying matrices with torch on its default
threads. Reported from the run's own log and metrics.jsonl: the recipe's shape, the steps, the
training loop's time against the budget (the last step's `elapsed_s`) and the command's, the
warmup (steps until the peak learning rate), the last learning rate against min_lr, the
re-plans, evaluations and checkpoints, and the final held-out bits per byte; then the ratio of
each load's bits per byte to the idle run's. The load average (1 minute) is read at the end.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # the repository, not bench/: `from bench.common import ...`

from bench.common import busy_processes, cpu, load_average  # noqa: E402 (after the path is set)

DEFAULT_TEXT = ROOT.parent / "shared" / "data" / "tinyshakespeare.txt"
GPTKIT = [sys.executable, "-m", "gptkit"]
ENV = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}


def prepare(text, work):
    data = work / "data"
    if not data.exists():
        tokenizer = work / "tokenizer.json"
        subprocess.run(
            [*GPTKIT, "tokenizer", "train", "--input", text, "--vocab-size", "1024", "--out", tokenizer, "-q"],
            check=True,
            env=ENV,
        )
        subprocess.run(
            [*GPTKIT, "pretokenize", "--tokenizer", tokenizer, "--input", text, "--out", data, "--quiet"],
            check=True,
            env=ENV,
        )
    return data


def run(data, out, budget):
    started = time.perf_counter()
    result = subprocess.run(
        [*GPTKIT, "train", "--data", data, "--out", out, "--max-time", budget],
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    wall = time.perf_counter() - started
    if result.returncode:
        sys.exit(f"error: the run failed:\n{result.stdout}")
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    config = json.loads((out / "config.json").read_text())
    logs = [r for r in records if "loss" in r]
    lrs = [r["lr"] for r in logs]
    recipe = next(line for line in result.stdout.splitlines() if line.startswith("recipe for "))
    shape = (
        re.search(r"d \d+, \d+ layers", recipe).group(0) + ", ctx " + re.search(r"batch \d+ x (\d+)", recipe).group(1)
    )
    return {
        "shape": shape,
        "steps": logs[-1]["step"],
        "loop_s": logs[-1]["elapsed_s"],
        # the recipe's timing and trials, inside the budget too (train/recipe.py)
        "recipe_s": next((r["recipe"]["spent_s"] for r in records if "recipe" in r), 0.0),
        "wall_s": wall,
        "peak_at": next(r["step"] for r in logs if r["lr"] >= 0.999 * config["lr"])
        if max(lrs) >= 0.999 * config["lr"]
        else None,
        "last_lr_over_min": lrs[-1] / config["min_lr"],
        "replans": sum("replan" in r for r in records),
        "evals": sum("val_loss" in r for r in records),
        "checkpoints": len(list((out / "checkpoints").iterdir())),
        "bpb": [r["val_bpb"] for r in records if "val_bpb" in r][-1],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("text", nargs="?", type=Path, default=DEFAULT_TEXT)
    parser.add_argument("--budget", default="2m")
    parser.add_argument("--loads", nargs="+", default=["idle", "python"], choices=["idle", "python", "torch"])
    parser.add_argument("--work", type=Path, help="keep the data and runs here (default: a temporary directory)")
    args = parser.parse_args()
    if not args.text.exists():
        sys.exit(f"error: {args.text} is absent")
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        data = prepare(args.text, work)
        print(f"machine: {cpu()}; {args.text.name}, --max-time {args.budget}")
        print(
            "\n| load | shape | steps | recipe s | loop s | command s | peak lr at step | last lr / min_lr | re-plans | evals "
            "| checkpoints | held-out bpb | bpb / idle | load avg |"
        )
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        idle_bpb = None
        for load in args.loads:
            out = work / f"run-{load}"
            subprocess.run(["rm", "-rf", str(out)], check=True)
            with busy_processes(0 if load == "idle" else 2, "python" if load == "idle" else load):
                r = run(data, out, args.budget)
                load_avg = load_average()
            idle_bpb = r["bpb"] if load == "idle" else idle_bpb
            ratio = f"{r['bpb'] / idle_bpb:.3f}" if idle_bpb else "-"
            print(
                f"| {load} | {r['shape']} | {r['steps']:,} | {r['recipe_s']:.1f} | {r['loop_s']:.1f} | {r['wall_s']:.1f} | "
                f"{r['peak_at']} | "
                f"{r['last_lr_over_min']:.3f} | {r['replans']} | {r['evals']} | {r['checkpoints']} | {r['bpb']:.4f} | "
                f"{ratio} | {load_avg:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
