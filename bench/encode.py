"""Benchmark `pretokenize` (corpus -> token shards) end to end against the same job done with tiktoken.

    python bench/encode.py CORPUS [CORPUS ...] [--threads 1 2] [--vocab-size 4096] [--repeat 3] [--rss-corpus BIG]
                           [--busy 0] [--tokenizer gptkit|llama3|qwen2]

A tokenizer is made once from the first corpus (not timed): trained by gptkit (`tokenizer train`),
or with --tokenizer llama3 or qwen2 built by HF's trainer from its first 10 MB in that published
file's shape, as `model import-hf` brings one in (bench/imported_tokenizers.py). Then, for each
corpus and worker count, two jobs run in fresh processes, alternately, --repeat times each:

  ours      the real CLI: gptkit pretokenize -t TOK --input CORPUS --out D --val-tokens 100000 --threads N -q
  tiktoken  this script's hidden sub-command `_tiktoken`: the same job with a tiktoken.Encoding built
            from our tokenizer's vocabulary and pattern (its normalizer applied in Python first):
            documents streamed in blocks, encoded in
            batches of about N MiB-characters by encode_ordinary, N threads each taking a share of
            the batch, each document followed by the end-of-text id, routed by the same Split rule
            and written by the same ShardSet as pretokenize (same names, same shard size, validation first as
            shard 0)

Times are wall times around the whole child process (interpreter start, imports, loading the
tokenizer, reading, encoding, writing and fsyncing the shards); medians are reported. The fixed
cost of starting each child (interpreter and imports only) is measured the same way and printed.
Every shard file of the reference must be byte-identical to ours (header included: counts, CRC,
fingerprint), or the script says MISMATCH, where, and exits 1.

Memory: one more run of each at the largest worker count on the largest corpus and on a corpus
about 4 times bigger (--rss-corpus, or the largest corpus written 4 times into the temp dir),
sampling the summed PSS of the child's process tree every ~20 ms (forked workers' shared pages
count once), plus ru_maxrss of the child's largest process. Bounded memory shows as a big/small
ratio near 1.
"""

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import version
from itertools import accumulate, chain, groupby
from operator import itemgetter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # the repository, not bench/: `from bench.common import ...`

from bench.common import EOT, busy_processes, cpu, iter_docs, sampling_interval, tree_pss_mb  # noqa: E402

BUILD_HINT = (
    "apt-get install -y bible-kjv bible-kjv-text dict-gcide && python3 ../shared/data/build_bench_corpus.py DIR"
)
BATCH_CHARS = (
    1 << 20
)  # characters per tiktoken thread in a batch (ours: jobs of 1 MiB-characters, 2 per worker in flight)
BIG_COPIES = 4
WHO = ("ours", "tiktoken")


# -- child: the reference job with tiktoken ------------------------------------------------------


# Both jobs hold out the leading documents until this many tokens: a rule the reference can follow
# document by document, where --val-fraction's falls back to a tail cut inside a document on a corpus
# of documents too uneven in size (the source code of bench/code_corpus.py).
VAL_TOKENS = 100_000


def batches(docs, chars):
    """Lists of whole documents of about `chars` characters."""
    batch, size = [], 0
    for doc in docs:
        batch.append(doc)
        size += len(doc)
        if size >= chars:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def tiktoken_job(corpus, tokenizer_json, out_dir, threads):
    import numpy as np
    import tiktoken

    from gptkit.pretokenize.encode import DEFAULT_SHARD_TOKENS
    from gptkit.pretokenize.split import Split
    from gptkit.shared.shard_set import ShardSet
    from gptkit.tokenizer import Tokenizer
    from gptkit.tokenizer.split import normalize

    ours = Tokenizer.from_file(tokenizer_json)  # read the same file; gives the vocabulary and the fingerprint
    specials = set(ours.special_tokens.values())
    ranks = {token: i for i, token in enumerate(ours.vocab) if i not in specials}
    enc = tiktoken.Encoding("ours", pat_str=ours.pattern, mergeable_ranks=ranks, special_tokens=ours.special_tokens)
    eot, split = ours.special_tokens[EOT], Split(val_tokens=VAL_TOKENS)
    shards = ShardSet(Path(out_dir), ours, eot, DEFAULT_SHARD_TOKENS)  # the writer pretokenize uses
    shards.begin()
    doc_index, val_tokens = 0, 0
    with ThreadPoolExecutor(threads) as pool:
        for batch in batches(iter_docs(corpus), BATCH_CHARS * threads):
            if ours.normalizer:
                batch = [normalize(ours.normalizer, doc) for doc in batch]
            labelled = []
            for ids in encode_batch(enc, batch, pool, threads):
                ids.append(eot)
                is_val = split.is_val(doc_index, val_tokens)
                labelled.append(("val" if is_val else "train", ids))
                val_tokens += len(ids) if is_val else 0
                doc_index += 1
            for name, run in groupby(labelled, key=itemgetter(0)):  # runs of documents, as pretokenize writes them
                docs = [ids for _, ids in run]
                shards.write(
                    name, np.fromiter(chain.from_iterable(docs), shards.dtype), list(accumulate(map(len, docs)))
                )
    shards.finish_all()
    shards.commit({})


def encode_batch(enc, docs, pool, threads):
    """The ids of each document: `threads` threads each encode a contiguous share of the documents
    with encode_ordinary (which releases the GIL). Not tiktoken's encode_ordinary_batch: it makes a
    thread-pool task of every document, which on short documents costs more than a second thread gains."""

    def encode(share):
        return [enc.encode_ordinary(doc) for doc in share]

    if threads == 1:
        return encode(docs)
    step = -(-len(docs) // threads)
    return list(chain.from_iterable(pool.map(encode, [docs[i : i + step] for i in range(0, len(docs), step)])))


def child_main(argv):
    parser = argparse.ArgumentParser(prog="bench/encode.py _tiktoken")
    parser.add_argument("corpus")
    parser.add_argument("tokenizer_json")
    parser.add_argument("out_dir")
    parser.add_argument("threads", type=int)
    a = parser.parse_args(argv)
    tiktoken_job(a.corpus, a.tokenizer_json, a.out_dir, a.threads)


# -- parent: children, memory sampling, comparison, report --------------------------------------


def command(who, tokenizer_json, corpus, out_dir, workers):
    if who == "ours":
        return [
            sys.executable,
            "-m",
            "gptkit.pretokenize",
            "-t",
            tokenizer_json,
            "--input",
            corpus,
            "--out",
            out_dir,
            "--val-tokens",
            VAL_TOKENS,
            "--threads",
            workers,
            "-q",
        ]
    return [sys.executable, __file__, "_tiktoken", corpus, tokenizer_json, out_dir, workers]


STARTUP = {  # the children's interpreter start and imports, without the job
    "ours": [
        sys.executable,
        "-c",
        "import gptkit.pretokenize.cli, gptkit.tokenizer",
    ],  # what `-m gptkit.pretokenize` imports first
    "tiktoken": [
        sys.executable,
        "-c",
        f"import sys; sys.path[0] = {str(ROOT)!r}; "
        "import argparse, numpy, tiktoken, gptkit.pretokenize.encode, gptkit.shared.shard_dir, gptkit.tokenizer",
    ],
}


def run(cmd, sample_memory=False):
    """Run a command to its end: wall seconds, peak PSS of its process tree (MB, if sampled),
    and ru_maxrss (MB) of its largest process (the child or a worker it waited for)."""
    cmd = list(map(str, cmd))
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        child = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
        peak = 0.0
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG if sample_memory else 0)
            if pid:
                break
            peak = max(peak, tree_pss_mb(child.pid))
            time.sleep(sampling_interval(time.perf_counter() - start))
        seconds = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode:
            err.seek(0)
            sys.exit(f"error: {' '.join(cmd)} failed (exit status {child.returncode}):\n{err.read().decode()}")
    return seconds, peak, usage.ru_maxrss / 1024


def shard_files(out_dir):
    return sorted(p.name for p in Path(out_dir).glob("*.bin"))


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def compare(ours_dir, ref_dir):
    """None if the two directories hold byte-identical shards, else where they first differ."""
    ours, ref = shard_files(ours_dir), shard_files(ref_dir)
    if ours != ref:
        return f"different shard files: ours {ours}, tiktoken {ref}"
    for name in ours:
        if sha256(ours_dir / name) != sha256(ref_dir / name):
            return first_difference(ours_dir / name, ref_dir / name)
    return None


def first_difference(ours_path, ref_path):
    """The first differing token of two shards: its position, the document (counted by end-of-text
    ids) it falls in, and the ids around it; or the header fields if only the headers differ."""
    import numpy as np

    from gptkit.shared.shards import open_shard

    a, b = open_shard(ours_path), open_shard(ref_path)
    n = min(len(a.tokens), len(b.tokens))
    diff = np.flatnonzero(a.tokens[:n] != b.tokens[:n])
    if not len(diff) and len(a.tokens) == len(b.tokens):
        return f"{ours_path.name}: same tokens, different headers: ours {a.header}, tiktoken {b.header}"
    pos = int(diff[0]) if len(diff) else n
    doc = int(np.count_nonzero(b.tokens[:pos] == b.header.eot_id))
    around = slice(max(0, pos - 3), pos + 8)
    return (
        f"{ours_path.name}: first difference at token {pos:,} (document {doc:,} of this shard, counted by "
        f"end-of-text ids; {len(a.tokens):,} vs {len(b.tokens):,} tokens): ours "
        f"{a.tokens[around].tolist()} vs tiktoken {b.tokens[around].tolist()} (from token {around.start:,})"
    )


def train_tokenizer(corpus, vocab_size, path):
    cmd = [
        sys.executable,
        "-m",
        "gptkit.tokenizer",
        "train",
        "--input",
        corpus,
        "--vocab-size",
        vocab_size,
        "--out",
        path,
        "--threads",
        os.cpu_count(),
        "-q",
    ]
    seconds = run(cmd)[0]
    print(
        f"tokenizer: trained on {corpus.name} in {seconds:.1f} s (not measured), vocab size {vocab_size}",
        file=sys.stderr,
    )


def jobs(tokenizer_json, corpus, out, workers, sample_memory=False):
    """Run ours and the reference once each: {who: (seconds, peak PSS MB, ru_maxrss MB)} and the
    comparison of their shards (None if identical)."""
    dirs = {who: out / who / corpus.stem for who in WHO}  # the same basename: shards are named after it
    results = {}
    for who in WHO:
        shutil.rmtree(dirs[who], ignore_errors=True)
        results[who] = run(command(who, tokenizer_json, corpus, dirs[who], workers), sample_memory)
    return results, compare(dirs["ours"], dirs["tiktoken"])


def speed_table(tokenizer_json, corpora, tmp, a):
    rows, mismatches = [], []
    for corpus in corpora:
        mb = corpus.stat().st_size / 1e6
        for workers in a.threads:
            seconds, identical = defaultdict(list), True
            for r in range(a.repeat):
                results, difference = jobs(tokenizer_json, corpus, tmp, workers)
                for who in WHO:
                    seconds[who].append(results[who][0])
                print(
                    f"  {corpus.name}, {workers} worker(s), run {r + 1}/{a.repeat}: ours {results['ours'][0]:.2f} s, "
                    f"tiktoken {results['tiktoken'][0]:.2f} s, {'identical' if not difference else 'MISMATCH'}",
                    file=sys.stderr,
                )
                if difference:
                    identical = False
                    mismatches.append(f"MISMATCH {corpus.name}, {workers} worker(s): {difference}")
                    print(mismatches[-1], file=sys.stderr)
            ours, ref = statistics.median(seconds["ours"]), statistics.median(seconds["tiktoken"])
            rows.append(
                f"| {corpus.name} | {mb:.1f} | {workers} | {ours:.2f} | {mb / ours:.1f} | {ref:.2f} | "
                f"{mb / ref:.1f} | {ref / ours:.2f} | {'yes' if identical else 'NO'} |"
            )
    print("\n| corpus | MB | workers | ours s | ours MB/s | tiktoken s | tiktoken MB/s | ratio | identical |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    print("\n".join(rows))
    print(
        "\nratio = ours throughput / tiktoken throughput (>1: ours faster). Workers: processes for ours, "
        "threads for tiktoken."
    )
    return mismatches


def startup_line(repeat):
    median = {who: statistics.median(run(STARTUP[who])[0] for _ in range(repeat)) for who in WHO}
    print(
        f"\nfixed cost in every time above (interpreter start + imports, median): ours {median['ours']:.2f} s, "
        f"tiktoken {median['tiktoken']:.2f} s"
    )


def build_big(corpus, path):
    """`corpus` written BIG_COPIES times, an end-of-text between copies (its documents repeat)."""
    with open(path, "wb") as out:
        for i in range(BIG_COPIES):
            if i:
                out.write(EOT.encode())
            with open(corpus, "rb") as f:
                shutil.copyfileobj(f, out, 1 << 24)
    return path


def memory_table(tokenizer_json, small, big, built, tmp, workers):
    print(f"\n### peak memory, {workers} workers (processes for ours, threads for tiktoken)\n")
    if built:
        print(f"{big.name}: {small.name} {BIG_COPIES} times over (documents repeat; fine for a memory test)\n")
    mismatches, peaks = [], {}
    for corpus in (small, big):
        print(f"  memory: {corpus.name} ({corpus.stat().st_size / 1e6:.0f} MB)", file=sys.stderr)
        peaks[corpus], difference = jobs(tokenizer_json, corpus, tmp, workers, sample_memory=True)
        if difference:
            mismatches.append(f"MISMATCH {corpus.name}, {workers} worker(s): {difference}")
            print(mismatches[-1], file=sys.stderr)
        shutil.rmtree(tmp / "ours" / corpus.stem), shutil.rmtree(tmp / "tiktoken" / corpus.stem)
    mb = {corpus: f"{corpus.name} ({corpus.stat().st_size / 1e6:.0f} MB)" for corpus in (small, big)}
    print(f"| measure | {mb[small]} | {mb[big]} | big/small |\n|---|---:|---:|---:|")
    for who in WHO:
        for i, what in ((1, "peak PSS of process tree, MB"), (2, "ru_maxrss of largest process, MB")):
            s, b = peaks[small][who][i], peaks[big][who][i]
            print(f"| {who}: {what} | {s:.0f} | {b:.0f} | {b / s:.2f} |")
    print(f"\nidentical shards in these runs too: {'yes' if not mismatches else 'NO'}")
    return mismatches


def machine():
    return f"machine: {cpu()}, tiktoken {version('tiktoken')}, numpy {version('numpy')}; {load()}"


def load():
    return f"load average (1 min) {os.getloadavg()[0]:.2f}"  # other work on the machine skews the times


def main():
    if sys.argv[1:2] == ["_tiktoken"]:
        return child_main(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpora", nargs="+", type=Path, metavar="CORPUS")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="processes (ours) / threads (tiktoken)")
    parser.add_argument("--vocab-size", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; medians are reported")
    parser.add_argument(
        "--rss-corpus",
        type=Path,
        metavar="BIG",
        help=f"the big corpus of the memory check [default: the largest CORPUS x {BIG_COPIES}, in a temp dir]",
    )
    parser.add_argument("--busy", type=int, default=0, help="busy processes beside every measurement")
    parser.add_argument(
        "--tokenizer", choices=["gptkit", "llama3", "qwen2"], default="gptkit", help="trained by gptkit, or imported"
    )
    a = parser.parse_args()
    missing = [str(p) for p in [*a.corpora, *filter(None, [a.rss_corpus])] if not p.is_file()]
    if missing:
        print(
            f"error: no such corpus: {', '.join(missing)}\nbuild the bench corpora (1/5/36 MB) with:\n  {BUILD_HINT}",
            file=sys.stderr,
        )
        sys.exit(2)
    corpora = [p.resolve() for p in a.corpora]
    sys.stdout.reconfigure(line_buffering=True)  # keep stdout in step with the progress lines on stderr
    print(machine())
    print(
        f"tokenizer {a.tokenizer}, vocab size {a.vocab_size} (made from {corpora[0].name}), special token {EOT}, "
        f"workers {' '.join(map(str, a.threads))}, repeat {a.repeat} (medians)"
    )
    print(f"{a.busy} busy processes beside")
    with tempfile.TemporaryDirectory(prefix="bench-encode-") as tmp, busy_processes(a.busy):
        tmp = Path(tmp)
        tokenizer_json = tmp / "tokenizer.json"
        if a.tokenizer == "gptkit":
            train_tokenizer(corpora[0], a.vocab_size, tokenizer_json)
        else:  # HF's trainer: imported here, not in the children that are timed
            from bench.imported_tokenizers import build_file

            build_file(a.tokenizer, corpora[0], a.vocab_size, tokenizer_json)
        mismatches = speed_table(tokenizer_json, corpora, tmp, a)
        startup_line(a.repeat)
        small = max(corpora, key=lambda p: p.stat().st_size)
        big = a.rss_corpus.resolve() if a.rss_corpus else build_big(small, tmp / f"{small.stem}_x{BIG_COPIES}.txt")
        mismatches += memory_table(tokenizer_json, small, big, not a.rss_corpus, tmp, max(a.threads))
    print(f"\nat the end: {load()}")
    if mismatches:
        print("\n" + "\n".join(mismatches))
        sys.exit("MISMATCH: the shards of ours and of the tiktoken reference differ (see above)")
    print("\nall shards identical: ours == tiktoken reference, byte for byte")


if __name__ == "__main__":
    main()
