"""Benchmark our BPE tokenizer against rustbpe and HF `tokenizers` (training), and tiktoken and HF (encoding).

    python bench/tokenizer.py CORPUS [CORPUS ...] [--vocab-size 10000] [--threads 2] [--repeat 3]
                              [--tasks train encode] [--busy 0]

rustbpe is nanochat's BPE trainer (Rust, rayon threads), given the same documents, the GPT-2 pattern
and as many merges as ours (its vocabulary has no special token); its merges are not compared (its
tie-break is its own). --busy N: N busy Python loops beside every measurement.

Every measurement runs in a fresh child process (this script, hidden sub-command `_one`) that
times only the call under test and prints JSON. While a training child runs, the parent samples
the summed PSS of its process tree (the child and its workers) every ~20 ms. Encoding speed is
MB/s of UTF-8 input; the ids of all three tokenizers are checked identical. Medians over --repeat.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from importlib.metadata import version
from itertools import chain
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # the repository, not bench/: `from bench.common import ...`

from bench.common import EOT, busy_processes, cpu, iter_docs, load_average, sampling_interval, tree_pss_mb  # noqa: E402

BUILD_HINT = (
    "apt-get install -y bible-kjv bible-kjv-text dict-gcide && python3 ../shared/data/build_bench_corpus.py DIR"
)
ENCODE_MODES = ("ours", "ours_batch", "tiktoken", "tiktoken_batch", "hf", "hf_batch")  # ours first: it forks


# -- child: one measurement ----------------------------------------------------------------------


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - start, result


def train_ours(path, vocab_size, workers, tokenizer_json, tie_break):
    from gptkit.shared.corpus import Corpus
    from gptkit.tokenizer.train import train_bpe

    seconds, tok = timed(
        lambda: train_bpe(Corpus([path]), vocab_size, tie_break=tie_break, workers=workers, quiet=True)
    )
    tok.save(tokenizer_json)
    return seconds


def train_hf(path, vocab_size, tokenizer_json):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    def train():
        hf = Tokenizer(models.BPE())
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=[EOT],
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        )
        hf.train_from_iterator(iter_docs(path), trainer=trainer)
        return hf

    seconds, hf = timed(train)
    hf.save(str(tokenizer_json))
    return seconds


def train_rustbpe(path, vocab_size):
    import rustbpe

    from gptkit.tokenizer.split import GPT2_PATTERN

    def train():
        tokenizer = rustbpe.Tokenizer()
        tokenizer.train_from_iterator(iter_docs(path), vocab_size - 1, pattern=GPT2_PATTERN)  # no special token
        return tokenizer

    return timed(train)[0]


def flat(ids_per_doc):
    """Per-document id lists as one uint32 array and the documents' lengths (compact to compare)."""
    import numpy as np

    return np.fromiter(chain.from_iterable(ids_per_doc), np.uint32), [len(ids) for ids in ids_per_doc]


def first_difference(a, b):
    """The first position where two id arrays differ, or None."""
    import numpy as np

    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if len(diff) else (n if len(a) != len(b) else None)


def mismatch(name, ref_name, ids, ref, doc=None):
    """A report of where `ids` first differ from `ref`, or None if they are equal."""
    pos = first_difference(ids, ref)
    if pos is None:
        return None
    where = f"token {pos}" if doc is None else f"document {doc}, token {pos}"
    return (
        f"MISMATCH {name} vs {ref_name} at {where}: {ids[pos : pos + 5].tolist()} vs {ref[pos : pos + 5].tolist()} "
        f"({len(ids)} vs {len(ref)} tokens)"
    )


def batch_mismatch(name, ref_name, got, ref):
    (ids, lengths), (ref_ids, ref_lengths) = got, ref
    if lengths == ref_lengths and (ids == ref_ids).all():
        return None
    start = ref_start = 0
    for doc, (n, ref_n) in enumerate(zip(lengths, ref_lengths)):
        report = mismatch(name, ref_name, ids[start : start + n], ref_ids[ref_start : ref_start + ref_n], doc)
        if report:
            return report
        start, ref_start = start + n, ref_start + ref_n
    return None


def encode_all(path, tokenizer_json, workers, repeat):
    """Time each encoding mode on the whole corpus; check that all modes give the same ids."""
    import numpy as np
    import tiktoken
    import tokenizers

    from gptkit.tokenizer.bpe import Tokenizer
    from gptkit.tokenizer.split import GPT2_PATTERN

    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        text = f.read()
    docs = text.split(EOT)
    ours = Tokenizer.from_file(tokenizer_json)
    specials = set(ours.special_tokens.values())
    ranks = {token: i for i, token in enumerate(ours.vocab) if i not in specials}
    tik = tiktoken.Encoding("ours", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens=ours.special_tokens)
    hf = tokenizers.Tokenizer.from_file(str(tokenizer_json))
    runs = {  # a fresh Tokenizer per run for ours: its caches start cold; only the call is timed
        "ours": lambda: timed(Tokenizer.from_file(tokenizer_json).encode, text),
        "ours_batch": lambda: timed(Tokenizer.from_file(tokenizer_json).encode_batch, docs, workers=workers),
        "tiktoken": lambda: timed(tik.encode, text, allowed_special="all"),
        "tiktoken_batch": lambda: timed(tik.encode_ordinary_batch, docs, num_threads=workers),
        "hf": lambda: timed(lambda: hf.encode(text).ids),
        "hf_batch": lambda: timed(lambda: [e.ids for e in hf.encode_batch(docs)]),
    }
    seconds, ids = {}, {}
    for mode in ENCODE_MODES:
        seconds[mode] = []
        for _ in range(repeat):
            elapsed, result = runs[mode]()
            seconds[mode].append(elapsed)
        ids[mode] = flat(result) if mode.endswith("_batch") else np.array(result, np.uint32)
        del result
    reports = [
        mismatch("ours encode", "tiktoken encode", ids["ours"], ids["tiktoken"]),
        mismatch("HF encode", "tiktoken encode", ids["hf"], ids["tiktoken"]),
        batch_mismatch("ours encode_batch", "tiktoken batch", ids["ours_batch"], ids["tiktoken_batch"]),
        batch_mismatch("HF encode_batch", "tiktoken batch", ids["hf_batch"], ids["tiktoken_batch"]),
    ]
    return {
        "mb": len(text.encode("utf-8")) / 1e6,
        "tokens": len(ids["tiktoken"]),
        "docs": len(docs),
        "seconds": seconds,
        "mismatches": [r for r in reports if r],
    }


def child_main(argv):
    parser = argparse.ArgumentParser(prog="bench/tokenizer.py _one")
    parser.add_argument("task", choices=["train-ours", "train-hf", "train-rustbpe", "encode"])
    parser.add_argument("path")
    parser.add_argument("tokenizer_json", help="written by train-ours and train-hf, read by encode")
    parser.add_argument("--vocab-size", type=int)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--repeat", type=int)
    parser.add_argument("--tie-break", default="lexicographic", help="train-ours: train_bpe's tie_break")
    a = parser.parse_args(argv)
    if a.task == "encode":
        out = encode_all(a.path, a.tokenizer_json, a.threads, a.repeat)
    else:
        seconds = {
            "train-ours": lambda: train_ours(a.path, a.vocab_size, a.threads, a.tokenizer_json, a.tie_break),
            "train-hf": lambda: train_hf(a.path, a.vocab_size, a.tokenizer_json),
            "train-rustbpe": lambda: train_rustbpe(a.path, a.vocab_size),
        }[a.task]()
        out = {"seconds": seconds}
    out["ru_maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


# -- parent: children, memory sampling, report ---------------------------------------------------


def run_child(args, workers):
    """Run this script's `_one` sub-command; its JSON result, with the peak RSS of its process tree."""
    env = {**os.environ, "RAYON_NUM_THREADS": str(workers)}
    cmd = [sys.executable, __file__, "_one", *map(str, args)]
    with tempfile.TemporaryFile("w+") as out:
        start = time.perf_counter()
        child = subprocess.Popen(cmd, stdout=out, env=env)
        peak = 0.0
        while child.poll() is None:
            peak = max(peak, tree_pss_mb(child.pid))
            time.sleep(sampling_interval(time.perf_counter() - start))
        if child.returncode:
            sys.exit(f"error: child {' '.join(cmd)} failed with exit status {child.returncode}")
        out.seek(0)
        result = json.loads(out.read().splitlines()[-1])
    return {**result, "peak_tree_mb": peak}


def bench_corpus(path, tmp, a):
    tokenizer_json = Path(tmp) / f"{path.stem}.tokenizer.json"
    runs = defaultdict(list)
    trainers = ("ours", "rustbpe", "hf") if "train" in a.tasks else ()
    for r in range(a.repeat):  # alternate the trainers so that noise hits them alike
        for who in trainers:
            out = tokenizer_json if who == "ours" else tokenizer_json.with_suffix(f".{who}.json")
            run = run_child(
                [f"train-{who}", path, out, "--vocab-size", a.vocab_size, "--threads", a.threads], a.threads
            )
            runs[who].append(run)
            print(
                f"  {path.name}: train {who} {r + 1}/{a.repeat}: {run['seconds']:.2f} s, "
                f"peak {run['peak_tree_mb']:.0f} MB",
                file=sys.stderr,
            )
    train = {
        who: {
            key: statistics.median(run[key] for run in runs[who]) for key in ("seconds", "peak_tree_mb", "ru_maxrss_mb")
        }
        for who in runs
    }
    if "encode" not in a.tasks:
        return train, None, None
    if not tokenizer_json.exists():  # encoding alone: train the tokenizer, untimed
        run_child(["train-ours", path, tokenizer_json, "--vocab-size", a.vocab_size, "--threads", a.threads], a.threads)
    print(f"  {path.name}: encoding ({len(ENCODE_MODES)} modes x {a.repeat})", file=sys.stderr)
    encode = run_child(["encode", path, tokenizer_json, "--threads", a.threads, "--repeat", a.repeat], a.threads)
    speed = {mode: encode["mb"] / statistics.median(s) for mode, s in encode["seconds"].items()}
    return train, encode, speed


def print_report(path, train, encode, speed, workers):
    w, rows = workers, []
    for ref in ("rustbpe", "hf") if train else ():
        rows += [
            (f"train: wall time, s (ref: {ref})", train["ours"]["seconds"], train[ref]["seconds"]),
            (
                f"train: peak memory (PSS) of process tree, MB (ref: {ref})",
                train["ours"]["peak_tree_mb"],
                train[ref]["peak_tree_mb"],
            ),
        ]
    if encode:
        ours_best = max(speed["ours"], speed["ours_batch"])
        rows += [
            ("encode 1 process, MB/s (ref: tiktoken 1 thread)", speed["ours"], speed["tiktoken"]),
            (
                f"encode batch, {w} workers, MB/s (ref: tiktoken batch, {w} threads)",
                speed["ours_batch"],
                speed["tiktoken_batch"],
            ),
            ("encode best, MB/s (ref: tiktoken best)", ours_best, max(speed["tiktoken"], speed["tiktoken_batch"])),
            ("encode 1 process, MB/s (ref: HF encode)", speed["ours"], speed["hf"]),
            (
                f"encode batch, {w} workers, MB/s (ref: HF encode_batch, {w} threads)",
                speed["ours_batch"],
                speed["hf_batch"],
            ),
            ("encode best, MB/s (ref: HF best)", ours_best, max(speed["hf"], speed["hf_batch"])),
        ]
        print(
            f"\n### {path.name}: {encode['mb']:.2f} MB, {encode['docs']} documents, {encode['tokens']} tokens "
            f"({encode['mb'] * 1e6 / encode['tokens']:.2f} bytes/token)\n"
        )
    else:
        print(f"\n### {path.name}: {path.stat().st_size / 1e6:.2f} MB\n")
    print("| task | ours | reference | ratio (ours/ref) |\n|---|---:|---:|---:|")
    for task, ours, ref in rows:
        print(f"| {task} | {ours:.2f} | {ref:.2f} | {ours / ref:.2f} |")
    print(f"\ntraining: lower ratio is better; encoding: higher ratio is better. Load (1 min): {load_average():.2f}")
    if encode:
        print(
            "\n".join(encode["mismatches"])
            or "ids: ours == tiktoken == HF (whole text, and per document in batch mode)"
        )


def machine():
    return (
        f"machine: {cpu()}, tokenizers {version('tokenizers')}, tiktoken {version('tiktoken')}, "
        f"rustbpe {version('rustbpe')}"
    )


def main():
    if sys.argv[1:2] == ["_one"]:
        return child_main(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpora", nargs="+", type=Path, metavar="CORPUS")
    parser.add_argument("--vocab-size", type=int, default=10000)
    parser.add_argument("--threads", type=int, default=2, help="processes (ours) / threads (HF, tiktoken)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; medians are reported")
    parser.add_argument("--tasks", nargs="+", choices=["train", "encode"], default=["train", "encode"])
    parser.add_argument("--busy", type=int, default=0, help="busy processes beside every measurement")
    a = parser.parse_args()
    missing = [str(p) for p in a.corpora if not p.is_file()]
    if missing:
        print(
            f"error: no such corpus: {', '.join(missing)}\nbuild the bench corpora (1/5/36 MB) with:\n  {BUILD_HINT}",
            file=sys.stderr,
        )
        sys.exit(2)
    print(machine())
    print(
        f"vocab size {a.vocab_size}, special token {EOT}, workers {a.threads}, repeat {a.repeat} (medians), "
        f"{a.busy} busy processes beside"
    )
    failed = False
    with tempfile.TemporaryDirectory(prefix="bench-tokenizer-") as tmp, busy_processes(a.busy):
        for path in a.corpora:
            train, encode, speed = bench_corpus(path, tmp, a)
            print_report(path, train, encode, speed, a.threads)
            failed |= bool(encode and encode["mismatches"])
    if failed:
        sys.exit("MISMATCH: the tokenizers disagree (see above)")


if __name__ == "__main__":
    main()
