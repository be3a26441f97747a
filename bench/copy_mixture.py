"""How much a copy mechanism would give the recipe's model where compressors beat it (issue 28):
the held-out bits per byte of a trained run alone, and mixed with an unbounded n-gram (an
"infinity-gram", Liu et al. 2024) over the training tokens and the held-out tokens before each
position, as a compressor given the training text sees them. Not part of gptkit: a measurement
for whoever builds one.

    python bench/copy_mixture.py TEXT... --work DIR   # after `bench/recipe.py TEXT... --work DIR`

For each held-out position the n-gram takes the longest context (up to MAX_N tokens) that occurred
before, and predicts the tokens that followed it, by their counts. The mixture is
(1 - w) p_model + w p_ngram at the target, w chosen by the matched length and the context's count
(LENGTHS x COUNTS), each half of the held-out tokens scored with the weights that fit the other
half best; the table gives the whole held-out text's bits per byte, the model's alone and xz's,
bzip2's and zstd's (bench/recipe.py's split) beside them. Contexts and pairs are 40-bit hashes (a
false match about one lookup in a million at these sizes).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import cpu, load_average  # noqa: E402 (after the path is set)
from bench.recipe import run_compressors  # noqa: E402

MAX_N = 32
LENGTHS = (1, 2, 3, 5, 9, 17)  # buckets of the matched length start here
COUNTS = (1, 2, 4)  # and of the context's count
WEIGHTS = np.linspace(0, 0.95, 20)
HASH_BITS, POSITION_BITS = 40, 24
BATCH = 32  # windows a forward pass


def model_probs(run, tokens):
    """p_model(tokens[i]) for i >= 1, the stream in windows of the model's context (as gptkit eval)."""
    import torch

    from gptkit.eval.loss import text_windows
    from gptkit.model.checkpoint import load_model

    model, _ = load_model(run / "latest")
    whole, last = text_windows(tokens, model.config.context_length)
    probs = []
    with torch.inference_mode():
        for windows in (whole, last):
            for start in range(0, 0 if windows is None else len(windows), BATCH):
                batch = torch.from_numpy(windows[start:start + BATCH])
                logits = model(batch[:, :-1])[0].float()
                probs.append(torch.softmax(logits, -1).gather(-1, batch[:, 1:, None])[..., 0].flatten().numpy())
    return np.concatenate([[0.0], *probs])


def ngram_probs(stream, first):
    """For each position i >= first of `stream` (int64): (p of stream[i] by the longest context
    ending at i - 1 seen before i, its length, that context's count); 0, 0, 0 where none was."""
    m = len(stream)
    if m >= 1 << POSITION_BITS:
        sys.exit(f"error: {m:,} tokens: more than the {1 << POSITION_BITS:,} positions a key holds")
    at = np.arange(m, dtype=np.uint64)
    targets = np.arange(first, m)
    prob, length, count = np.zeros(m - first), np.zeros(m - first, np.int64), np.zeros(m - first, np.int64)
    context = np.zeros(m, np.uint64)  # hash of the n tokens ending at j (j >= n - 1)
    power = np.uint64(1)
    tokens = stream.astype(np.uint64)
    with np.errstate(over="ignore"):
        for n in range(1, MAX_N + 1):
            context[n - 1:] += tokens[: m - n + 1] * power
            power *= np.uint64(1_000_003)
            # each position j predicts j + 1 from the context ending at j
            j = np.arange(n - 1, m - 1)
            ctx = (context[j] * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(64 - HASH_BITS)
            pair = ((context[j] + tokens[j + 1] * np.uint64(0xC2B2AE3D27D4EB4F)) * np.uint64(0x9E3779B97F4A7C15)) \
                >> np.uint64(64 - HASH_BITS)
            seen_ctx = np.sort((ctx << np.uint64(POSITION_BITS)) | at[j + 1])
            seen_pair = np.sort((pair << np.uint64(POSITION_BITS)) | at[j + 1])
            # the queries: the context ending at i - 1, among the occurrences whose next token is before i
            q = targets[targets - 1 >= n - 1] - 1
            keys_ctx, keys_pair = ctx[q - (n - 1)], pair[q - (n - 1)]
            before = at[q + 1]
            c = np.searchsorted(seen_ctx, (keys_ctx << np.uint64(POSITION_BITS)) | before) \
                - np.searchsorted(seen_ctx, keys_ctx << np.uint64(POSITION_BITS))
            k = np.searchsorted(seen_pair, (keys_pair << np.uint64(POSITION_BITS)) | before) \
                - np.searchsorted(seen_pair, keys_pair << np.uint64(POSITION_BITS))
            found = c > 0
            rows = (q + 1 - first)[found]
            prob[rows], length[rows], count[rows] = k[found] / c[found], n, c[found]
    return prob, length, count


def buckets(length, count):
    return np.searchsorted(LENGTHS, length, side="right") * (len(COUNTS) + 1) + np.searchsorted(COUNTS, count, side="right")


def fitted_mixture(p_model, p_ngram, bucket, fit):
    """The mixture with the weight of each bucket that minimizes the loss on the positions `fit`."""
    weights = {}
    for b in np.unique(bucket[fit]):
        rows = fit & (bucket == b)
        losses = [-np.log(np.maximum((1 - w) * p_model[rows] + w * p_ngram[rows], 1e-300)).sum() for w in WEIGHTS]
        weights[b] = WEIGHTS[int(np.argmin(losses))]
    w = np.array([weights.get(b, 0.0) for b in bucket])
    return (1 - w) * p_model + w * p_ngram


def cross_fitted(p_model, p_ngram, bucket):
    """Each half of the positions mixed with the weights fitted on the other half."""
    second = np.arange(len(p_model)) >= len(p_model) // 2
    return np.where(second, fitted_mixture(p_model, p_ngram, bucket, ~second), fitted_mixture(p_model, p_ngram, bucket, second))


def measure(work):
    from gptkit.eval.loss import token_bytes
    from gptkit.shared.shard_dir import ShardDir
    from gptkit.shared.shards import open_shard
    from gptkit.train.data import data_tokenizer

    data = ShardDir(work / "data")
    tokenizer = data_tokenizer(data)
    train, held_out = (np.concatenate([np.asarray(open_shard(p).tokens, np.int64) for p in data.shard_paths(split)])
                       for split in ("train", "val"))
    nbytes = np.array(token_bytes(tokenizer))
    p_model = model_probs(work / "run0", held_out)[1:]
    p_ngram, length, count = ngram_probs(np.concatenate([train, held_out]), len(train) + 1)
    targets = held_out[1:]
    mixed = cross_fitted(p_model, p_ngram, buckets(length, count))
    bits = lambda p: -np.log2(np.maximum(p, 1e-300)).sum() / nbytes[targets].sum()
    return {"model": bits(p_model), "mixed": bits(mixed), "matched": float((length >= 8).mean()), "tokens": len(targets)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("texts", nargs="+", type=Path)
    parser.add_argument("--work", type=Path, required=True, help="bench/recipe.py's --work: a directory per text, its run0 trained.")
    args = parser.parse_args()
    print(f"machine: {cpu()}; load {load_average():.2f}")
    print("| text | held-out tokens | positions matching 8+ tokens | model | model + n-gram | mixed / model | "
          "best compressor | model / best compressor | mixed / best compressor |")
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|")
    for text in args.texts:
        got = measure(args.work / text.stem)
        compressors, _ = run_compressors(text)
        best = min(compressors, key=compressors.get)
        print(f"| {text.name} | {got['tokens']:,} | {100 * got['matched']:.0f}% | {got['model']:.3f} | {got['mixed']:.3f} | "
              f"{got['mixed'] / got['model']:.3f} | {compressors[best]:.3f} ({best}) | {got['model'] / compressors[best]:.3f} | "
              f"{got['mixed'] / compressors[best]:.3f} |")
    print(f"load {load_average():.2f}")


if __name__ == "__main__":
    main()
