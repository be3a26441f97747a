"""Train our BPE and HF `tokenizers` on text that is one long line without spaces (a DNA
sequence, a base64 blob, a run of letters): a single pre-token of megabytes, the shape that
made training quadratic. Prints wall times, their ratio, seconds per MB at each size (flat
when the time is linear in the input) and, under `--tie-break hf`, whether the two merge lists
are identical (under the default, CS336's rule, they differ wherever a tie is broken). HF's
trainer is itself quadratic on this shape (each merge inserts into and removes from the
word's vector of symbols), so it runs only up to --hf-max-mb.

    python bench/tokenizer_long_lines.py [--sizes 0.03 0.1 0.3 1 10] [--hf-max-mb 0.3] [--vocab-size 1024] [--repeat 3]
                                         [--tie-break lexicographic|hf]

Each training runs in a fresh child process (bench/tokenizer.py's `_one`), one worker each.
"""

import argparse
import base64
import json
import os
import random
import statistics
import string
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # the repository, not bench/: `from bench.common import ...`

from bench.common import cpu, load_average, run_child  # noqa: E402 (after the path is set)

TOKENIZER_BENCH = str(ROOT / "bench" / "tokenizer.py")


def dna(n, rng):
    return "".join(rng.choices("ACGT", k=n))


def base64_blob(n, rng):
    return base64.b64encode(rng.randbytes(n * 3 // 4 + 3)).decode()[:n]


def letters(n, rng):
    """Lowercase letters drawn by English-like frequencies: one pre-token, many distinct pairs."""
    weights = [
        8.2,
        1.5,
        2.8,
        4.3,
        12.7,
        2.2,
        2.0,
        6.1,
        7.0,
        0.2,
        0.8,
        4.0,
        2.4,
        6.7,
        7.5,
        1.9,
        0.1,
        6.0,
        6.3,
        9.1,
        2.8,
        1.0,
        2.4,
        0.2,
        2.0,
        0.1,
    ]
    return "".join(rng.choices(string.ascii_lowercase, weights, k=n))


SHAPES = {"dna": dna, "base64": base64_blob, "letters": letters}


def merges(tokenizer_json):
    """As lists of two strings: HF writes a merge as a list, we write it as "a b"."""
    merges = json.loads(Path(tokenizer_json).read_text(encoding="utf-8"))["model"]["merges"]
    return [m.split(" ") if isinstance(m, str) else m for m in merges]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[0.03, 0.1, 0.3, 1, 10], help="line lengths in MB")
    parser.add_argument("--hf-max-mb", type=float, default=0.3, help="the longest line given to HF's trainer")
    parser.add_argument("--vocab-size", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; medians are reported")
    parser.add_argument(
        "--tie-break", choices=["lexicographic", "hf"], default="lexicographic", help="ours: train_bpe's tie_break"
    )
    a = parser.parse_args()
    os.environ["RAYON_NUM_THREADS"] = "1"  # HF's trainer on one thread, as ours on one worker
    print(f"machine: {cpu()}; load average {load_average():.2f} at the start")
    print(f"vocab size {a.vocab_size}, tie-break {a.tie_break}, 1 worker, medians of {a.repeat}\n")
    print("| line | MB | ours, s | HF, s | ratio (ours/HF) | ours, s/MB | merges identical |")
    print("|---|---:|---:|---:|---:|---:|---|")
    same_everywhere = True
    with tempfile.TemporaryDirectory(prefix="bench-long-lines-") as tmp:
        for shape, make in SHAPES.items():
            for mb in a.sizes:
                text = Path(tmp, f"{shape}-{mb}mb.txt")
                text.write_text(make(int(mb * 1e6), random.Random(0)) + "\n", encoding="ascii")
                ours_json, hf_json = Path(tmp, "ours.json"), Path(tmp, "hf.json")
                runs = (("ours", ours_json), ("hf", hf_json)) if mb <= a.hf_max_mb else (("ours", ours_json),)
                seconds = {who: [] for who, _ in runs}
                for _ in range(a.repeat):  # alternate, so that noise hits both alike
                    for who, out in runs:
                        run = run_child(
                            TOKENIZER_BENCH,
                            [
                                f"train-{who}",
                                text,
                                out,
                                "--vocab-size",
                                a.vocab_size,
                                "--threads",
                                1,
                                "--tie-break",
                                a.tie_break,
                            ],
                        )
                        seconds[who].append(run["seconds"])
                ours = statistics.median(seconds["ours"])
                if "hf" in seconds:
                    hf = statistics.median(seconds["hf"])
                    identical = "-"  # under CS336's rule the merges differ from HF's by design
                    if a.tie_break == "hf":
                        same = merges(ours_json) == merges(hf_json)
                        same_everywhere &= same
                        identical = "yes" if same else "NO"
                    versus = f"{hf:.2f} | {ours / hf:.2f} | {ours / mb:.2f} | {identical}"
                else:
                    versus = f"- | - | {ours / mb:.2f} | -"
                print(f"| {shape} | {mb:g} | {ours:.2f} | {versus} |", flush=True)
    print(f"\nload average {load_average():.2f} at the end")
    if not same_everywhere:
        sys.exit("MISMATCH: the merges differ from HF tokenizers'")


if __name__ == "__main__":
    main()
