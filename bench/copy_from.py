"""`gptkit eval text --copy-from` and `--adapt` on the recipe's trained runs (issue 28): the
held-out bits per byte of the model alone, learning as it reads (eval/adapt.py), with what it
copies (eval/copy.py) and with both, beside xz, bzip2 and zstd given the same training text, and
the seconds each evaluation took.

    python bench/copy_from.py TEXT... --work DIR [--busy 2]   # after `bench/recipe.py TEXT... --work DIR`

Each text's run is DIR/<text's stem>/run0 (its data: DIR/<stem>/data), scored on its whole
validation split four times in fresh processes: `gptkit eval text`, with `--adapt`, with
`--copy-from` and with both, with --busy N busy processes beside them. The bits do not depend on
the load; the seconds do.
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


def scored(work, threads, *flags):
    """(gptkit eval's results, its seconds) for the run in `work`, with `flags`."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "eval.json"
        cmd = [
            sys.executable,
            "-m",
            "gptkit",
            "eval",
            "text",
            "--checkpoint",
            str(work / "run0" / "latest"),
            "--data",
            str(work / "data"),
            "--threads",
            str(threads),
            "--quiet",
            "--out",
            str(out),
        ]
        start = time.perf_counter()
        subprocess.run(cmd + [str(f) for f in flags], check=True, stdout=subprocess.DEVNULL)
        return json.loads(out.read_text()), time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("texts", nargs="+", type=Path)
    parser.add_argument(
        "--work", type=Path, required=True, help="bench/recipe.py's --work: a directory per text, its run0 trained."
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--busy", type=int, default=0, help="Busy processes beside each evaluation.")
    args = parser.parse_args()
    print(f"machine: {cpu()}; {args.threads} thread(s); {args.busy} busy process(es); load {load_average():.2f}")
    print(
        "| text | held-out tokens | copied from (training tokens) | model | + adapt | + copy | + both | best compressor | "
        "+ adapt / best | + copy / best | + both / best | eval s: model, + adapt, + copy, + both | load |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---|---:|")
    for text in args.texts:
        work = args.work / text.stem
        copy = ("--copy-from", work / "data")
        with busy_processes(args.busy):
            runs = [scored(work, args.threads, *flags) for flags in ((), ("--adapt",), copy, ("--adapt", *copy))]
            load = load_average()
        compressors, _ = run_compressors(text)
        best = min(compressors, key=compressors.get)
        alone, both = runs[0][0], runs[-1][0]
        for result, _ in runs[1:]:
            assert abs(result["model_bpb"] - alone["bpb"]) < 1e-6, (result["model_bpb"], alone["bpb"])  # the same model
        bpb = [result["bpb"] for result, _ in runs]
        print(
            f"| {text.name} | {both['tokens']:,} | {both['copy_tokens']:,} | "
            + " | ".join(f"{b:.3f}" for b in bpb)
            + f" | {compressors[best]:.3f} ({best}) | "
            + " | ".join(f"{b / compressors[best]:.3f}" for b in bpb[1:])
            + " | "
            + ", ".join(f"{seconds:.1f}" for _, seconds in runs)
            + f" | {load:.2f} |",
            flush=True,
        )
    print(f"load {load_average():.2f}")


if __name__ == "__main__":
    main()
