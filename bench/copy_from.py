"""`gptkit eval text --copy-from` on the recipe's trained runs (issue 28): the held-out bits per
byte of the model alone and of the model with what it copies (eval/copy.py), beside xz, bzip2
and zstd given the same training text, and the seconds each evaluation took.

    python bench/copy_from.py TEXT... --work DIR [--busy 2]   # after `bench/recipe.py TEXT... --work DIR`

Each text's run is DIR/<text's stem>/run0 (its data: DIR/<stem>/data), scored on its whole
validation split twice in fresh processes: `gptkit eval text` and `gptkit eval text --copy-from`,
with --busy N busy processes beside both. The bits do not depend on the load; the seconds do.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import busy_processes, cpu, load_average  # noqa: E402 (after the path is set)
from bench.recipe import run_compressors  # noqa: E402


def scored(work, threads, copy):
    """(gptkit eval's results, its seconds) for the run in `work`."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "eval.json"
        cmd = [sys.executable, "-m", "gptkit", "eval", "text", "--checkpoint", str(work / "run0" / "latest"), "--data",
               str(work / "data"), "--threads", str(threads), "--quiet", "--out", str(out)]
        start = time.perf_counter()
        subprocess.run(cmd + (["--copy-from", str(work / "data")] if copy else []), check=True, stdout=subprocess.DEVNULL)
        return json.loads(out.read_text()), time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("texts", nargs="+", type=Path)
    parser.add_argument("--work", type=Path, required=True, help="bench/recipe.py's --work: a directory per text, its run0 trained.")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--busy", type=int, default=0, help="Busy processes beside each evaluation.")
    args = parser.parse_args()
    print(f"machine: {cpu()}; {args.threads} thread(s); {args.busy} busy process(es); load {load_average():.2f}")
    print("| text | held-out tokens | copied from (training tokens) | model | model + copy | copy / model | best compressor | "
          "model / best | model + copy / best | eval s, model | eval s, + copy | load |")
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for text in args.texts:
        work = args.work / text.stem
        with busy_processes(args.busy):
            alone, alone_s = scored(work, args.threads, copy=False)
            both, both_s = scored(work, args.threads, copy=True)
            load = load_average()
        compressors, _ = run_compressors(text)
        best = min(compressors, key=compressors.get)
        model, mixed = alone["bpb"], both["bpb"]
        assert abs(both["model_bpb"] - model) < 1e-6, (both["model_bpb"], model)  # the same model, scored the same
        print(f"| {text.name} | {both['tokens']:,} | {both['copy_tokens']:,} | {model:.3f} | {mixed:.3f} | {mixed / model:.3f} | "
              f"{compressors[best]:.3f} ({best}) | {model / compressors[best]:.3f} | {mixed / compressors[best]:.3f} | "
              f"{alone_s:.1f} | {both_s:.1f} | {load:.2f} |", flush=True)
    print(f"load {load_average():.2f}")


if __name__ == "__main__":
    main()
