"""Encoding with imported tokenizers: ours against HF `tokenizers` and tiktoken, in MB/s.

    python bench/encode_imported.py CORPUS [--kinds llama3 qwen2] [--train-mb 10] [--vocab-size 32000]
                                    [--threads 1 2] [--repeat 3] [--busy 0]

For each kind (bench/imported_tokenizers.py: Llama 3's shape, with every split of a token a merge
and ignore_merges; Qwen2's, with NFC), HF's trainer builds a tokenizer.json from the corpus's first
--train-mb MB of documents (not timed). Then four encoders encode all the corpus's documents (split
at <|endoftext|>), each in a fresh child process that reads the corpus and loads its encoder before
the clock starts, with N workers:

  ours      gptkit: Tokenizer.from_file(json).encode_batch(docs, allowed_special=(), workers=N), N
            processes; the engine (tiktoken, tokenizer/engine.py) where it applies (the table says
            whether it did), building it included
  own       the same with engine=False: our own encoder, which a tokenizer the engine does not take gets
  hf        tokenizers.Tokenizer.from_file(json).encode_batch(docs, add_special_tokens=False), N rayon threads
  tiktoken  tiktoken.Encoding(the file's pattern, ranks = the file's ids).encode_ordinary_batch(docs,
            num_threads=N), after the file's normalizer (NFC) in Python

The encoders take turns, --repeat times; medians are reported, of wall time and of CPU time (the
process's threads and its workers: on a machine that other work shares, the steadier of the two).
Every run's ids (a digest of all
documents' ids and lengths) must be the same for all four, or the script says MISMATCH and exits 1.
--busy N: N busy Python loops beside every measurement.
"""

import argparse
import hashlib
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # the repository, not bench/: `from bench.common import ...`

from bench.common import EOT, busy_processes, cpu, iter_docs, load_average  # noqa: E402
from bench.imported_tokenizers import KINDS, build_file  # noqa: E402

MODES = ("ours", "own", "hf", "tiktoken")


# -- child: one measurement ----------------------------------------------------------------------


def encoder(mode, tokenizer_json, threads):
    """A function docs -> list of id lists, its setup done here (not timed), and for ours whether the
    engine applies."""
    from gptkit.tokenizer import Tokenizer, split

    ours = Tokenizer.from_file(tokenizer_json)
    if mode in ("ours", "own"):
        if mode == "own":
            ours = Tokenizer(
                ours.vocab,
                ours.merges,
                ours.special_tokens,
                pattern=ours.pattern,
                normalizer=ours.normalizer,
                ignore_merges=ours.ignore_merges,
                engine=False,
            )
        # The engine built here, before the clock (as tiktoken's Encoding is) and before the workers fork.
        engine = ours.build_engine()
        return lambda docs: ours.encode_batch(docs, allowed_special=(), workers=threads), engine
    if mode == "hf":
        import tokenizers

        hf = tokenizers.Tokenizer.from_file(str(tokenizer_json))
        return lambda docs: [e.ids for e in hf.encode_batch(docs, add_special_tokens=False)], None
    import tiktoken

    specials = set(ours.special_tokens.values())
    ranks = {token: i for i, token in enumerate(ours.vocab) if i not in specials}
    enc = tiktoken.Encoding("file", pat_str=ours.pattern, mergeable_ranks=ranks, special_tokens={})

    def encode(docs):
        if ours.normalizer:
            docs = [split.normalize(ours.normalizer, doc) for doc in docs]
        return enc.encode_ordinary_batch(docs, num_threads=threads)

    return encode, None


def child_main(argv):
    import numpy as np

    mode, tokenizer_json, corpus, threads = argv[0], argv[1], argv[2], int(argv[3])
    docs = list(iter_docs(corpus))
    start = time.perf_counter()
    encode, uses_engine = encoder(mode, tokenizer_json, threads)
    setup = time.perf_counter() - start
    start, cpu_start = time.perf_counter(), cpu_seconds()
    ids = encode(docs)
    seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu_start
    digest = hashlib.sha256(np.array([len(d) for d in ids], np.int64).tobytes())
    for doc in ids:
        digest.update(np.array(doc, np.uint32).tobytes())
    print(
        json.dumps(
            {"seconds": seconds, "cpu": cpu, "setup": setup, "digest": digest.hexdigest(), "engine": uses_engine}
        )
    )


def cpu_seconds():
    """CPU time of this process's threads and of its children that ended (ours' workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


# -- parent --------------------------------------------------------------------------------------


def run_child(mode, tokenizer_json, corpus, threads):
    env = {**os.environ, "RAYON_NUM_THREADS": str(threads)}
    cmd = [sys.executable, __file__, "_one", mode, str(tokenizer_json), str(corpus), str(threads)]
    result = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env)
    if result.returncode:
        sys.exit(f"error: {' '.join(cmd)} failed with exit status {result.returncode}")
    return json.loads(result.stdout.splitlines()[-1])


def measure(kind, tokenizer_json, corpus, mb, threads, repeat):
    seconds, cpu, setup, digests, engine = defaultdict(list), defaultdict(list), defaultdict(list), set(), None
    for r in range(repeat):  # the encoders take turns so that drift hits them alike
        for mode in MODES:
            out = run_child(mode, tokenizer_json, corpus, threads)
            seconds[mode].append(out["seconds"])
            setup[mode].append(out["setup"])
            cpu[mode].append(out["cpu"])
            digests.add(out["digest"])
            engine = out["engine"] if mode == "ours" else engine
            print(
                f"  {kind}, {threads} worker(s), run {r + 1}/{repeat}: {mode} {out['seconds']:.2f} s "
                f"({mb / out['seconds']:.1f} MB/s)",
                file=sys.stderr,
            )
    speed = {mode: mb / statistics.median(s) for mode, s in seconds.items()}
    per_cpu = {mode: mb / statistics.median(s) for mode, s in cpu.items()}
    setup_s = {mode: statistics.median(s) for mode, s in setup.items()}
    return speed, per_cpu, setup_s, engine, len(digests) == 1


def main():
    if sys.argv[1:2] == ["_one"]:
        return child_main(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path, metavar="CORPUS")
    parser.add_argument("--kinds", nargs="+", choices=list(KINDS), default=list(KINDS))
    parser.add_argument("--train-mb", type=float, default=10, help="MB of the corpus HF's trainer builds from")
    parser.add_argument("--vocab-size", type=int, default=32000)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="processes (ours) / threads")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; medians are reported")
    parser.add_argument("--busy", type=int, default=0, help="busy processes beside every measurement")
    a = parser.parse_args()
    if not a.corpus.is_file():
        sys.exit(f"error: no such corpus: {a.corpus} (bench/code_corpus.py builds one)")
    sys.stdout.reconfigure(line_buffering=True)
    mb = sum(len(doc.encode("utf-8")) for doc in iter_docs(a.corpus)) / 1e6
    print(f"machine: {cpu()}, tokenizers {version('tokenizers')}, tiktoken {version('tiktoken')}")
    print(
        f"corpus {a.corpus.name}: {mb:.1f} MB of documents split at {EOT}; vocab size {a.vocab_size}, "
        f"workers {' '.join(map(str, a.threads))}, repeat {a.repeat} (medians), {a.busy} busy processes beside; "
        f"load average (1 min) {load_average():.2f}\n"
    )
    rows, cpu_rows, setup_rows, mismatch = [], [], [], False
    with tempfile.TemporaryDirectory(prefix="bench-encode-imported-") as tmp, busy_processes(a.busy):
        for kind in a.kinds:
            tokenizer_json = Path(tmp) / f"{kind}.json"
            build_file(kind, a.corpus, a.vocab_size, tokenizer_json, a.train_mb)
            for threads in a.threads:
                speed, per_cpu, setup, engine, identical = measure(
                    kind, tokenizer_json, a.corpus, mb, threads, a.repeat
                )
                mismatch |= not identical
                c = per_cpu
                cpu_rows.append(
                    f"| {kind} | {threads} | "
                    + " | ".join(f"{c[m]:.1f}" for m in MODES)
                    + f" | {c['ours'] / c['tiktoken']:.2f} "
                    f"| {c['ours'] / c['hf']:.2f} |"
                )
                setup_rows.append(f"| {kind} | {threads} | " + " | ".join(f"{setup[m]:.2f}" for m in MODES) + " |")
                s = speed
                rows.append(
                    f"| {kind} | {threads} | {'yes' if engine else 'no'} | {s['ours']:.1f} | {s['own']:.1f} | "
                    f"{s['hf']:.1f} | {s['tiktoken']:.1f} | **{s['ours'] / s['tiktoken']:.2f}** | "
                    f"**{s['ours'] / s['hf']:.2f}** | {s['own'] / s['hf']:.2f} | {'yes' if identical else 'NO'} |"
                )
    print(
        "\n| kind | workers | engine | ours MB/s | own MB/s | HF MB/s | tiktoken MB/s | ours / tiktoken | ours / HF "
        "| own / HF | ids identical |"
    )
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    print("\n".join(rows))
    print("\nMB per CPU-second (the process and its workers; less swayed by other work on the machine)\n")
    print("| kind | workers | " + " | ".join(MODES) + " | ours / tiktoken | ours / HF |")
    print("| --- | ---: |" + " ---: |" * (len(MODES) + 2))
    print("\n".join(cpu_rows))
    print("\nsetup, s (reading the file, building the encoder: not in the MB/s above)\n")
    print("| kind | workers | " + " | ".join(MODES) + " |\n| --- | ---: |" + " ---: |" * len(MODES))
    print("\n".join(setup_rows))
    print(f"\nat the end: load average (1 min) {load_average():.2f}")
    if mismatch:
        sys.exit("MISMATCH: the encoders' ids differ (see the identical column)")
    print("ids: ours == own == HF == tiktoken, every run")


if __name__ == "__main__":
    main()
