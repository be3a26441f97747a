"""Our default CPU recipe against nanoGPT's character model as nanoGPT's README runs it on a
CPU: the same text, the same held-out tail, the same CPU threads, and ours trains for as long as
the char model's 2,000 iterations took; held-out bits per byte for both, beside three compressors.

    python bench/recipe.py [TEXT ...] [--repeat 2] [--busy 0|2] [--busy-kind python] [--threads 2]
                           [--vocab-size auto] [--char-iters 2000] [--work DIR]
    python bench/recipe.py [TEXT ...] --compressors-only

TEXT: UTF-8 text files (default: ../shared/data/tinyshakespeare.txt; bench/corpora.py builds
fourteen kinds of text: English verse and prose, Python, C and JavaScript source, Russian,
Chinese and Urdu, JSON records, CSV numbers, HTML, a multilingual .po, and a 100 kB and a 30 MB
size). Each is split as nanoGPT's shakespeare_char/prepare.py splits Tiny Shakespeare, 90% to
train and the last 10% held out, except that the cut moves back to the line end at or before
90%, so no line is split.

  char  a GPT written here in nanoGPT's style (learned positions, LayerNorm, GELU MLP, tied
        head, no biases), run as nanoGPT's README runs it on a CPU: `python train.py
        config/train_shakespeare_char.py --device=cpu --compile=False --eval_iters=20
        --log_interval=1 --block_size=64 --batch_size=12 --n_layer=4 --n_head=4 --n_embd=128
        --max_iters=2000 --lr_decay_iters=2000 --dropout=0.0` (AdamW lr 1e-3, betas (0.9, 0.99),
        weight decay 0.1 on matrices and embeddings, grad clip 1.0, 100 warmup steps, cosine to
        1e-4 at iteration 2,000). Its vocabulary is the text's characters. Its length is
        nanoGPT's: iterations 0 to --max_iters, each one update (2,001 updates, the last at
        min_lr), whatever time they take; the wall time of that loop is measured. nanoGPT's
        loop also estimates the losses every 250 iterations (20 batches each of train and val)
        and saves checkpoints: neither changes the model, so both are left out, and the time
        is that of the updates alone.
  ours  the real command lines, each in a fresh process: `tokenizer train` on the train part,
        `pretokenize` of held-out + train (the held-out text is the first document, so
        `--val-tokens 1` makes it exactly the val split), `train --max-time T` where T is the
        char model's measured loop time in the same round, with no --config (the default
        recipe, train/recipe/) and only two flags of measurement: `--eval-tokens` covering
        the whole val split and `--eval-interval 0` (validation only at the end, as the char
        model's).
  ours + copy  the same run scored by `gptkit eval text --data --copy-from` its own data
        directory (eval/copy.py: the model mixed online with an unbounded n-gram over the
        training text and the held-out text before each token, as a compressor copies), after
        the run: its time is not in the budget, as neither contender's final evaluation is.

Held-out bits per byte, both over the same held-out bytes, each model reading the held-out text in
consecutive windows of its context (every window's first token is the previous one's last, so
every token but the first is predicted; an incomplete last window is left out; the table gives the
bytes covered): char: the summed cross-entropy of the predicted characters / ln 2 / their UTF-8
bytes; ours: `val_bpb` of the run's last metrics.jsonl record (special tokens excluded); ours + copy: the
same tokens, `gptkit eval`'s `bpb`.

Beside them, general-purpose compressors given the training text, the baseline a model has to beat
to have learned more than repeated strings: `xz -9e`, `bzip2 -9` and `zstd --ultra -22
--long=27` (each skipped, with a note, where its binary is missing: apt-get install -y xz-utils
bzip2 zstd), each held-out bits per byte = (compressed size of train + held out - compressed
size of train) in bits / held-out bytes. The split is the same split_text, so the bytes are the
same held-out bytes, all of them: the models score slightly fewer (not the first token, nor an
incomplete last window; the table gives both counts). bzip2 compresses 900 kB blocks
independently, so of the training text it sees only the part in the held-out text's block. With
--compressors-only no model is trained: the compressors' numbers in seconds (the compressions run
side by side, one a core; a minute or two for the 30 MB text).

The targets, per text (the summary's last columns): ours at most 0.85 times the char model's bits
per byte and never above 0.95; ours + copy below the best compressor. With --max-time T our run
includes the recipe's timing and trials (train/recipe/trials.py): they are inside T.

Wall times: both loops start the clock after the model is built; the final validation comes
after them. Our tokenizer training and encoding are listed separately and are not in the budget;
neither is the char model's trivial char-to-id map. Each contender runs in a fresh child process
with OMP_NUM_THREADS=--threads and torch.set_num_threads(--threads) (the trainer has no thread
setting: it takes torch's default, which the environment variable sets). With --busy N, N busy
processes (bench/common.py's BUSY[--busy-kind]: a Python busy loop each by default, or torch
matrix products on torch's default threads) start 2 s before each contender's process and run
beside it for the whole of its run, tokenizer and encoding not included, and stop after it; the
machine's load average (1 minute) is read before and after each contender's run (with the busy
processes going): the CPUs are shared, so on an idle run a load above the contenders' own
threads means they did not have them to themselves. The contenders take turns --repeat times
(ours always right after the char run whose time it is given) and the tables give medians. Run
it once idle (--busy 0) and once loaded (--busy 2) for both conditions.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # the repository, not bench/: `from bench.common import ...`

from bench.common import BUSY, EOT, busy_processes, cpu, load_average, run_child  # noqa: E402 (after the path is set)
from bench.recipe_char import CHAR, CHAR_ITERS, run_char, split_text  # noqa: E402
from bench.recipe_compressors import COMPRESSORS, missing_compressors, run_compressors  # noqa: E402

DEFAULT_TEXT = ROOT.parent / "shared" / "data" / "tinyshakespeare.txt"
VOCAB_SIZE = "auto"  # as `make tokenizer` chooses it (tokenizer/vocab.py): 512, 1024 or 4096 for the text
BUSY_WARMUP_S = 2  # the busy processes get going before a contender starts
TARGET_VS_CHAR = 0.85  # ours at most this times the char model's bits per byte
CEILING_VS_CHAR = 0.95  # and never above this


# -- ours: the real command lines ----------------------------------------------------------------


def prepare_ours(text_path, work, vocab_size, workers):
    """Tokenizer and shards for one text; their wall times and the val split's size."""
    text = Path(text_path).read_text(encoding="utf-8")
    if EOT in text:
        raise SystemExit(f"error: {text_path} contains {EOT}, the separator that makes the held-out tail a document")
    train_text, held_out = split_text(text)
    work.mkdir(parents=True, exist_ok=True)
    (work / "train.txt").write_text(train_text, encoding="utf-8")
    (work / "held_out_then_train.txt").write_text(held_out + EOT + train_text, encoding="utf-8")
    times = {}
    tokenizer = ["train", "--input", work / "train.txt", "--vocab-size", vocab_size, "--out", work / "tokenizer.json"]
    times["tokenizer_s"] = timed([sys.executable, "-m", "gptkit.tokenizer", *tokenizer, "--threads", workers, "-q"])
    times["encode_s"] = encode(work, work / "tokenizer.json", work / "data", workers)
    # validation on the whole held-out text in any tokenization: a token holds a byte at least (and the
    # end-of-text token after it none)
    return times, len(held_out.encode("utf-8")) + 1


def encode(work, tokenizer, out, workers):
    """The held-out text then the training text encoded with `tokenizer` into `out` (the held-out text
    the val split); the seconds it took."""
    return timed(
        [
            sys.executable,
            "-m",
            "gptkit.pretokenize",
            "--tokenizer",
            tokenizer,
            "--input",
            work / "held_out_then_train.txt",
            "--out",
            out,
            "--val-tokens",
            1,
            "--threads",
            workers,
            "--overwrite",
            "-q",
        ]
    )


def run_data(work, run, threads):
    """The data directory in the tokens the run trained on: the data's, or where the recipe cut its
    tokenizer (--merges), the same text encoded with the cut, which the run's checkpoints carry."""
    tokenizer = run / "latest" / "tokenizer.json"
    if tokenizer.read_bytes() == (work / "data" / "tokenizer.json").read_bytes():
        return work / "data"
    encode(work, tokenizer, run / "data", threads)
    return run / "data"


def run_ours(work, seconds, val_tokens, run_name, threads):
    run = work / run_name
    shutil.rmtree(run, ignore_errors=True)  # of an earlier bench in the same --work
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "gptkit.train",
            "--data",
            str(work / "data"),
            "--out",
            str(run),
            "--max-time",
            f"{seconds:.1f}s",
            "--eval-tokens",
            str(val_tokens),
            "--eval-interval",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )
    if result.returncode:
        sys.exit(f"error: train failed:\n{result.stdout}")
    lines = result.stdout.splitlines()
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "loss" in r]
    params = int(re.search(r"training ([\d,]+) parameters", result.stdout).group(1).replace(",", ""))
    data = run_data(work, run, threads)
    timed(
        [
            sys.executable,
            "-m",
            "gptkit.eval",
            "text",
            "--checkpoint",
            run / "latest",
            "--data",
            data,
            "--copy-from",
            data,
            "--threads",
            threads,
            "--out",
            run / "copy.json",
            "-q",
        ]
    )
    copied = json.loads((run / "copy.json").read_text())
    return {
        "bpb": [r for r in records if "val_bpb" in r][-1]["val_bpb"],
        "steps": steps[-1]["step"],
        "params": params,
        "train_s": steps[-1]["elapsed_s"],
        "shape": next(line for line in lines if line.startswith("recipe for ")),  # not its progress, "recipe: ..."
        "copy_bpb": copied["bpb"],
        "data": data,
    }


def timed(cmd):
    start = time.perf_counter()
    subprocess.run(list(map(str, cmd)), check=True, cwd=ROOT)
    return time.perf_counter() - start


def covered_bytes(data_dir, context):
    """The held-out bytes our validation predicts (the val split of `data_dir` in windows of `context`)."""
    from gptkit.eval.loss import eval_sequences
    from gptkit.shared.shard_dir import ShardDir
    from gptkit.train.data import ShardData, data_tokenizer

    data = ShardDir(data_dir)
    tokenizer = data_tokenizer(data)
    val = ShardData(data, "val", tokenizer.vocab_size, tokenizer.fingerprint, context)
    lengths = [0 if i in set(tokenizer.special_tokens.values()) else len(b) for i, b in enumerate(tokenizer.vocab)]
    return sum(lengths[t] for t in eval_sequences(val, context, 1 << 62)[0][:, 1:].ravel())


# -- the comparison ------------------------------------------------------------------------------


def measure(kind, args, *run_args):
    """One contender's run in a fresh process, with --busy busy processes beside it for the whole
    of it; the load average before and after (the busy processes still going)."""
    with busy_processes(args.busy, args.busy_kind):
        time.sleep(BUSY_WARMUP_S if args.busy else 0)
        before = load_average()
        result = run_child(__file__, [kind, *run_args]) if kind == "char" else run_ours(*run_args)
        after = load_average()
    return {**result, "load": (before, after)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("texts", nargs="*", type=Path, default=[DEFAULT_TEXT])
    parser.add_argument("--vocab-size", default=VOCAB_SIZE, help="Our tokenizer's vocabulary: a number, or auto.")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2, help="Rounds per text; the tables give medians.")
    parser.add_argument(
        "--busy", type=int, default=0, help="Busy processes beside each contender's run (0: idle; 2: loaded)."
    )
    parser.add_argument(
        "--busy-kind",
        choices=sorted(BUSY),
        default="python",
        help="What each busy process runs (bench/common.py's BUSY).",
    )
    parser.add_argument(
        "--char-iters",
        type=int,
        default=CHAR_ITERS,
        help="The char model's --max_iters and --lr_decay_iters: nanoGPT's README's 2000; "
        "fewer only for a quick check of the code path.",
    )
    parser.add_argument(
        "--work", type=Path, help="Where tokenizers, shards and runs go (default: a temporary directory)."
    )
    parser.add_argument("--compressors-only", action="store_true", help="Only the compressors' held-out bits per byte.")
    args = parser.parse_args()
    if args.threads < 1 or args.repeat < 1 or args.busy < 0 or args.char_iters <= CHAR["warmup_iters"]:
        parser.error(
            f"--threads and --repeat must be above 0, --busy at least 0, --char-iters above {CHAR['warmup_iters']}"
        )
    for path in args.texts:
        if not path.is_file():
            parser.error(f"{path}: no such file")
    missing = missing_compressors()
    if len(missing) == len(COMPRESSORS):
        parser.error("none of the compressors is installed: apt-get install -y xz-utils bzip2 zstd")
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    if args.compressors_only:
        print(f"machine: {cpu()}; compressors only")
    else:
        load = (
            f"{args.busy} busy {args.busy_kind} process{'es' if args.busy != 1 else ''} beside each contender"
            if args.busy
            else "idle"
        )
        print(
            f"machine: {cpu()}, {args.threads} threads; char: nanoGPT's README CPU run, --max_iters={args.char_iters}; "
            f"ours: --max-time = the char model's loop time; {load}; {args.repeat} round{'s' if args.repeat > 1 else ''}"
        )
    if missing:
        print(f"note: {', '.join(missing)} skipped: not installed (apt-get install -y xz-utils bzip2 zstd)")
    summary = {}
    with tempfile.TemporaryDirectory() as tmp:
        work_root = args.work or Path(tmp)
        for path in args.texts:
            if args.compressors_only:
                summary[path] = compressors_only(path)
            else:
                summary[path] = compare(path, work_root / path.stem, args)
    report_summary(summary)


def compressors_only(path):
    bpb, held_out_bytes = run_compressors(path)
    print(f"\n{path.name}: {path.stat().st_size:,} bytes, {held_out_bytes:,} held out")
    print("| compressor | held-out bits/byte | bytes scored |\n|---|---|---|")
    for name, value in bpb.items():
        print(f"| {name} | {value:.4f} | {held_out_bytes:,} |")
    best = min(bpb, key=bpb.get)
    print(f"best compressor: {best}, {bpb[best]:.4f} bits per byte", flush=True)
    return {**bpb, "bytes": path.stat().st_size}


def compare(path, work, args):
    times, val_tokens = prepare_ours(path, work, args.vocab_size, args.threads)
    rounds = {"char": [], "ours": []}
    for r in range(args.repeat):
        char = measure("char", args, path, args.char_iters, args.threads)
        ours = measure("ours", args, work, char["train_s"], val_tokens, f"run{r}", args.threads)
        rounds["char"].append(char)
        rounds["ours"].append(ours)
        print(
            f"{path.name} round {r + 1}: char {char['bpb']:.4f} ({char['steps']:,} steps, {char['train_s']:.1f} s), "
            f"ours {ours['bpb']:.4f} ({ours['steps']:,} steps, {ours['train_s']:.1f} s), ours + copy {ours['copy_bpb']:.4f}",
            flush=True,
        )
    run_config = json.loads((work / "run0" / "config.json").read_text())
    context = run_config["context_length"] or run_config["model"]["context_length"]
    vocab_size = run_config["model"]["vocab_size"]
    our_bytes = covered_bytes(rounds["ours"][0]["data"], context)
    return report(path, vocab_size, times, rounds, our_bytes, run_compressors(path))


def report(path, vocab_size, times, rounds, our_bytes, compressors):
    """The table of one text; its medians and compressors' bits per byte, for the summary."""

    def median(kind, key):
        return statistics.median(r[key] for r in rounds[kind])

    char, ours = rounds["char"][0], rounds["ours"][0]
    compressor_bpb, held_out_bytes = compressors
    print(
        f"\n{path.name}: {path.stat().st_size:,} bytes; our run's vocabulary {vocab_size} tokens "
        f"(the tokenizer's training {times['tokenizer_s']:.1f} s, encoding {times['encode_s']:.1f} s: not in the budget)"
    )
    print(f"  char: {char['shape']}\n  ours: {ours['shape']}, --max-time = the char model's loop time of its round")
    print(
        "| model | held-out bits/byte | each round | bytes scored | steps | parameters | training s | load before -> after |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for kind, nbytes in (("char", char["bytes"]), ("ours", our_bytes)):
        each = ", ".join(f"{r['bpb']:.4f} ({r['steps']} steps, {r['train_s']:.1f} s)" for r in rounds[kind])
        loads = ", ".join(f"{a:.2f} -> {b:.2f}" for a, b in (r["load"] for r in rounds[kind]))
        print(
            f"| {kind} | {median(kind, 'bpb'):.4f} | {each} | {nbytes:,} | {median(kind, 'steps'):.0f} | "
            f"{rounds[kind][0]['params']:,} | {median(kind, 'train_s'):.1f} | {loads} |"
        )
    each = ", ".join(f"{r['copy_bpb']:.4f}" for r in rounds["ours"])
    print(f"| ours + copy | {median('ours', 'copy_bpb'):.4f} | {each} | {our_bytes:,} | | | | |")
    for name, value in compressor_bpb.items():
        print(f"| {name} | {value:.4f} | | {held_out_bytes:,} | | | | |")
    best = min(compressor_bpb, key=compressor_bpb.get)
    for name, key in (("ours", "bpb"), ("ours + copy", "copy_bpb")):
        print(
            f"{name}: / char {median('ours', key) / median('char', 'bpb'):.3f}, / best compressor ({best}) "
            f"{median('ours', key) / compressor_bpb[best]:.3f}",
            flush=True,
        )
    return {
        "char": median("char", "bpb"),
        "char_s": median("char", "train_s"),
        "ours": median("ours", "bpb"),
        "ours + copy": median("ours", "copy_bpb"),
        **compressor_bpb,
        "bytes": path.stat().st_size,
    }


def report_summary(summary):
    """One row per text: held-out bits per byte of each contender (the char model's loop time
    beside it: our budget), of each compressor, the best compressor, the ratios and the targets."""
    models = any("ours" in row for row in summary.values())
    compressors = [c for c in COMPRESSORS if any(c in row for row in summary.values())]
    ours = ("ours", "ours + copy")
    head = ["text", "bytes"] + (["char", "char s", *ours] if models else []) + compressors + ["best compressor"]
    if models:
        head += [f"{name} / {vs}" for name in ours for vs in ("best compressor", "char")]
        head += [f"ours <= {TARGET_VS_CHAR} x char (never > {CEILING_VS_CHAR})", "ours + copy < best compressor"]
    print("\n| " + " | ".join(head) + " |")
    print(
        "|---|---:|"
        + ("---:|" * 4 if models else "")
        + "---:|" * len(compressors)
        + "---|"
        + ("---:|" * 4 + "---|" * 2 if models else "")
    )
    for path, row in summary.items():
        best = min((c for c in compressors if c in row), key=row.get)
        cells = [path.name, f"{row['bytes']:,}"]
        if models:
            cells += [f"{row['char']:.3f}", f"{row['char_s']:.1f}"] + [f"{row[name]:.3f}" for name in ours]
        cells += [f"{row[c]:.3f}" if c in row else "" for c in compressors] + [best]
        if models:
            ratios = {name: (row[name] / row[best], row[name] / row["char"]) for name in ours}
            cells += [f"{ratio:.3f}" for name in ours for ratio in ratios[name]]
            vs_char = ratios["ours"][1]
            cells.append(
                "yes"
                if vs_char <= TARGET_VS_CHAR
                else f"no ({'above the ceiling' if vs_char > CEILING_VS_CHAR else 'above the target'})"
            )
            cells.append("yes" if ratios["ours + copy"][0] < 1 else "no")
        print("| " + " | ".join(cells) + " |")


def child():
    _, kind, text_path, iters, threads = sys.argv[1:]
    import torch

    torch.set_num_threads(int(threads))
    print(json.dumps(run_char(text_path, int(iters))))


if __name__ == "__main__":
    child() if sys.argv[1:2] == ["_one"] else main()
