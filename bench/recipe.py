"""Our default CPU recipe against a nanoGPT-style character model: the same text, the same
held-out tail, the same minutes of the same CPU threads; held-out bits per byte for both.

    python bench/recipe.py [TEXT ...] [--minutes 2] [--vocab-size N] [--threads 2] [--repeat 1] [--work DIR]
    python bench/recipe.py [TEXT ...] --compressors-only

TEXT: UTF-8 text files (default: ../shared/data/tinyshakespeare.txt; bench/corpora.py builds four
kinds of text of its size: English verse and prose, Python source, Russian). Each is split as
nanoGPT's shakespeare_char/prepare.py splits Tiny Shakespeare, 90% to train and the last 10% held
out, except that the cut moves back to the line end at or before 90%, so no line is split.

  char  a GPT written here in nanoGPT's style (learned positions, LayerNorm, GELU MLP, tied
        head, no biases), in the shape of nanoGPT's README CPU command for Shakespeare:
        `--block_size=64 --batch_size=12 --n_layer=4 --n_head=4 --n_embd=128 --dropout=0.0
        --max_iters=2000 --lr_decay_iters=2000` over config/train_shakespeare_char.py (AdamW lr
        1e-3, betas (0.9, 0.99), weight decay 0.1 on matrices and embeddings, grad clip 1.0, 100
        warmup steps, cosine to 1e-4). Its vocabulary is the text's characters. Its length is
        the budget, not 2,000 steps: the steps are planned from its measured step time (at every
        tenth of the budget), so its cosine ends when the minutes do, however many steps fit.
  ours  the real command lines, each in a fresh process: `tokenizer train` on the train part,
        `pretokenize` of held-out + train (the held-out text is the first document, so
        `--val-tokens 1` makes it exactly the val split), `train --max-time` with no --config
        (the default recipe, train/recipe.py) and only two flags of measurement:
        `--eval-tokens` covering the whole val split and `--eval-interval 0` (validation only
        at the end, as the char model's).

Held-out bits per byte, both over the same held-out bytes, each model reading the held-out text in
consecutive windows of its context (every window's first token is the previous one's last, so
every token but the first is predicted; an incomplete last window is left out; the table gives the
bytes covered): char: the summed cross-entropy of the predicted characters / ln 2 / their UTF-8
bytes; ours: `val_bpb` of the run's last metrics.jsonl record (special tokens excluded).

Beside them, general-purpose compressors given the training text, the baseline a model has to beat
to have learned more than repeated strings: `xz -9e`, `bzip2 -9` and `zstd --ultra -22
--long=27` (each skipped, with a note, where its binary is missing), each held-out bits per byte
= (compressed size of train + held out - compressed size of train) in bits / held-out bytes. The
split is the same split_text, so the bytes are the same held-out bytes, all of them: the models
score slightly fewer (not the first token, nor an incomplete last window; the table gives both
counts). bzip2 compresses 900 kB blocks independently, so of the training text it sees only the
part in the held-out text's block. With --compressors-only no model is trained: the compressors'
numbers in seconds.

Wall times: the training budget is the same for both (their loops start the clock after the
model is built); the final validation comes after it. Our tokenizer training and encoding are
listed separately and are not in the budget; neither is the char model's trivial char-to-id map.
Each contender runs in a fresh child process with OMP_NUM_THREADS=--threads and
torch.set_num_threads(--threads) (the trainer has no thread setting: it takes torch's default,
which the environment variable sets). The machine's load average (1 minute) is read before and
after each run: the CPUs are shared, so a load above 0 means the contenders did not have them
to themselves. With --repeat N the contenders take turns N times and the table gives medians.
"""
import argparse
import json
import math
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

from bench.common import EOT, cpu, run_child  # noqa: E402 (after the path is set)

DEFAULT_TEXT = ROOT.parent / "shared" / "data" / "tinyshakespeare.txt"
HELD_OUT = 0.1
VOCAB_SIZE = "auto"  # as `make tokenizer` chooses it (tokenizer/vocab.py): 1024 or 4096 for the text
SEED = 1337

# nanoGPT's README CPU command over config/train_shakespeare_char.py
CHAR = dict(n_layer=4, n_head=4, n_embd=128, block_size=64, batch_size=12, lr=1e-3, min_lr=1e-4, warmup_iters=100,
            betas=(0.9, 0.99), weight_decay=0.1, grad_clip=1.0)
PLAN_EVERY = 0.1  # of the budget: the char model re-plans its length this often

# Command lines that compress stdin to stdout. One thread each: xz 5.6+ and zstd may default to
# several, and xz then cuts its input into blocks compressed without each other's context.
COMPRESSORS = {"xz -9e": ["xz", "-9e", "-T1", "-c"], "bzip2 -9": ["bzip2", "-9", "-c"],
               "zstd -22 --long=27": ["zstd", "--ultra", "-22", "--long=27", "-T1", "-c", "-q"]}


def split_text(text):
    """(train, held out): the held-out part is the last 10% of the characters, from a line start."""
    cut = text.rfind("\n", 0, int(len(text) * (1 - HELD_OUT))) + 1
    if cut == 0:
        raise SystemExit("error: the text has no line end in its first 90%, so no line-aligned held-out tail")
    return text[:cut], text[cut:]


# -- the char model (a child process) ------------------------------------------------------------

def char_model(vocab_size):
    import torch
    from torch import nn
    from torch.nn import functional as F

    c = CHAR

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            d = c["n_embd"]
            self.norm1, self.norm2 = nn.LayerNorm(d, bias=False), nn.LayerNorm(d, bias=False)
            self.qkv, self.attn_out = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
            self.up, self.down = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)

        def forward(self, x):
            B, T, d = x.shape
            heads = self.qkv(self.norm1(x)).view(B, T, 3, c["n_head"], d // c["n_head"]).transpose(1, 3)
            q, k, v = heads.unbind(2)
            x = x + self.attn_out(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, d))
            return x + self.down(F.gelu(self.up(self.norm2(x))))

    class CharGPT(nn.Module):
        def __init__(self):
            super().__init__()
            d = c["n_embd"]
            self.tokens, self.positions = nn.Embedding(vocab_size, d), nn.Embedding(c["block_size"], d)
            self.blocks = nn.ModuleList(Block() for _ in range(c["n_layer"]))
            self.norm = nn.LayerNorm(d, bias=False)
            self.head = nn.Linear(d, vocab_size, bias=False)
            self.head.weight = self.tokens.weight  # tied, as nanoGPT's
            for name, p in self.named_parameters():
                if p.dim() == 2:  # GPT-2's init: N(0, 0.02), the residual projections scaled by depth
                    std = 0.02 / math.sqrt(2 * c["n_layer"]) if name.endswith(("attn_out.weight", "down.weight")) else 0.02
                    nn.init.normal_(p, 0.0, std)

        def forward(self, ids):
            x = self.tokens(ids) + self.positions(torch.arange(ids.shape[1]))
            for block in self.blocks:
                x = block(x)
            return self.head(self.norm(x))

    return CharGPT()


def char_lr(step, total):
    """nanoGPT's get_lr: linear warmup, then cosine from lr to min_lr at step `total`."""
    c = CHAR
    if step < c["warmup_iters"]:
        return c["lr"] * (step + 1) / (c["warmup_iters"] + 1)
    ratio = min(1.0, (step - c["warmup_iters"]) / max(1, total - c["warmup_iters"]))
    return c["min_lr"] + 0.5 * (1 + math.cos(math.pi * ratio)) * (c["lr"] - c["min_lr"])


def run_char(text_path, seconds):
    """Train the char model for `seconds` on the train part; its held-out bits per byte."""
    import numpy as np
    import torch
    from torch.nn import functional as F

    train_text, held_out = split_text(Path(text_path).read_text(encoding="utf-8"))
    chars = sorted(set(train_text + held_out))  # as prepare.py: the characters of the whole text
    index = {ch: i for i, ch in enumerate(chars)}
    train_ids = torch.tensor([index[ch] for ch in train_text])
    val_ids = torch.tensor([index[ch] for ch in held_out])
    torch.manual_seed(SEED)
    model = char_model(len(chars))
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": CHAR["weight_decay"]},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=CHAR["lr"], betas=CHAR["betas"])
    T, B = CHAR["block_size"], CHAR["batch_size"]
    rng = np.random.default_rng(SEED)
    step, total, next_plan = 0, None, PLAN_EVERY
    start = time.perf_counter()
    while total is None or step < total:
        for group in optimizer.param_groups:
            group["lr"] = char_lr(step, total or 10**9)
        starts = torch.from_numpy(rng.integers(0, len(train_ids) - T - 1, size=B))
        rows = torch.stack([train_ids[s : s + T + 1] for s in starts])
        logits = model(rows[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), rows[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CHAR["grad_clip"])
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            break
        if elapsed >= next_plan * seconds:  # plan the length from the steps per second so far
            total, next_plan = max(step + 1, round(step * seconds / elapsed)), next_plan + PLAN_EVERY
    train_seconds = time.perf_counter() - start

    model.eval()
    count = (len(val_ids) - 1) // T
    windows = torch.stack([val_ids[i * T : (i + 1) * T + 1] for i in range(count)])
    loss_sum = 0.0
    with torch.no_grad():
        for batch in windows.split(64):
            logits = model(batch[:, :-1])
            loss_sum += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1), reduction="sum").item()
    predicted = held_out[1 : count * T + 1]
    nbytes = len(predicted.encode("utf-8"))
    return {"bpb": loss_sum / math.log(2) / nbytes, "steps": step, "params": sum(p.numel() for p in model.parameters()),
            "train_s": train_seconds, "bytes": nbytes, "shape": f"char, vocab {len(chars)}, d {CHAR['n_embd']}, "
            f"{CHAR['n_layer']} layers, batch {B} x {T}"}


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
    times["tokenizer_s"] = timed([sys.executable, "-m", "gptkit.tokenizer", "train", "--input", work / "train.txt", "--vocab-size",
                                  vocab_size, "--out", work / "tokenizer.json", "--threads", workers, "-q"])
    times["encode_s"] = timed([sys.executable, "-m", "gptkit.pretokenize", "--tokenizer", work / "tokenizer.json", "--input",
                               work / "held_out_then_train.txt", "--out", work / "data", "--val-tokens", 1,
                               "--threads", workers, "--overwrite", "-q"])
    manifest = json.loads((work / "data" / "manifest.json").read_text())
    return times, manifest["totals"]["val"]["tokens"]


def run_ours(work, minutes, val_tokens, run_name):
    run = work / run_name
    shutil.rmtree(run, ignore_errors=True)  # of an earlier bench in the same --work
    result = subprocess.run([sys.executable, "-m", "gptkit.train", "--data", str(work / "data"), "--out", str(run),
                             "--max-time", f"{minutes:g}m", "--eval-tokens", str(val_tokens), "--eval-interval", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    if result.returncode:
        sys.exit(f"error: train failed:\n{result.stdout}")
    lines = result.stdout.splitlines()
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "loss" in r]
    params = int(re.search(r"training ([\d,]+) parameters", result.stdout).group(1).replace(",", ""))
    return {"bpb": [r for r in records if "val_bpb" in r][-1]["val_bpb"], "steps": steps[-1]["step"], "params": params,
            "train_s": steps[-1]["elapsed_s"], "shape": next(line for line in lines if line.startswith("recipe"))}


def timed(cmd):
    start = time.perf_counter()
    subprocess.run(list(map(str, cmd)), check=True, cwd=ROOT)
    return time.perf_counter() - start


def covered_bytes(work, context):
    """The held-out bytes our validation predicts (the val split in windows of `context`)."""
    from gptkit.eval.loss import eval_sequences
    from gptkit.shared.shard_dir import ShardDir
    from gptkit.train.data import ShardData, data_tokenizer

    data = ShardDir(work / "data")
    tokenizer = data_tokenizer(data)
    val = ShardData(data, "val", tokenizer.vocab_size, tokenizer.fingerprint, context)
    lengths = [0 if i in set(tokenizer.special_tokens.values()) else len(b) for i, b in enumerate(tokenizer.vocab)]
    return sum(lengths[t] for t in eval_sequences(val, context, 1 << 62)[:, 1:].ravel())


# -- compressors ---------------------------------------------------------------------------------

def run_compressors(path):
    """{compressor: held-out bits per byte given the training text} of those installed, and the
    held-out bytes they score."""
    train, held_out = (part.encode("utf-8") for part in split_text(path.read_text(encoding="utf-8")))
    bpb = {}
    for name, cmd in COMPRESSORS.items():
        if shutil.which(cmd[0]):
            bpb[name] = 8 * (compressed_size(cmd, train + held_out) - compressed_size(cmd, train)) / len(held_out)
    return bpb, len(held_out)


def compressed_size(cmd, data):
    return len(subprocess.run(cmd, input=data, stdout=subprocess.PIPE, check=True).stdout)


def missing_compressors():
    return [name for name, cmd in COMPRESSORS.items() if not shutil.which(cmd[0])]


# -- the comparison ------------------------------------------------------------------------------

def measure(kind, *args):
    before = os.getloadavg()[0]
    result = run_child(__file__, [kind, *args]) if kind == "char" else run_ours(*args)
    return {**result, "load": (before, os.getloadavg()[0])}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("texts", nargs="*", type=Path, default=[DEFAULT_TEXT])
    parser.add_argument("--minutes", type=float, default=2.0, help="The training budget of each contender.")
    parser.add_argument("--vocab-size", default=VOCAB_SIZE, help="Our tokenizer's vocabulary: a number, or auto.")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--work", type=Path, help="Where tokenizers, shards and runs go (default: a temporary directory).")
    parser.add_argument("--compressors-only", action="store_true", help="Only the compressors' held-out bits per byte.")
    args = parser.parse_args()
    if args.minutes <= 0 or args.threads < 1 or args.repeat < 1:
        parser.error("--minutes, --threads and --repeat must be above 0")
    for path in args.texts:
        if not path.is_file():
            parser.error(f"{path}: no such file")
    missing = missing_compressors()
    if len(missing) == len(COMPRESSORS):
        parser.error(f"none of the compressors is installed: {', '.join(c[0] for c in COMPRESSORS.values())}")
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    if args.compressors_only:
        print(f"machine: {cpu()}; compressors only")
    else:
        print(f"machine: {cpu()}, {args.threads} threads; budget {args.minutes:g} min per contender")
    if missing:
        print(f"note: {', '.join(missing)} skipped: not installed")
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
    print(f"best compressor: {best}, {bpb[best]:.4f} bits per byte")
    return {**bpb, "bytes": path.stat().st_size}


def compare(path, work, args):
    times, val_tokens = prepare_ours(path, work, args.vocab_size, args.threads)
    rounds = {"char": [], "ours": []}
    for r in range(args.repeat):
        rounds["char"].append(measure("char", path, args.minutes * 60, args.threads))
        rounds["ours"].append(measure("ours", work, args.minutes, val_tokens, f"run{r}"))
    run_config = json.loads((work / "run0" / "config.json").read_text())
    context = run_config["context_length"] or run_config["model"]["context_length"]
    vocab_size = run_config["model"]["vocab_size"]
    return report(path, vocab_size, times, rounds, covered_bytes(work, context), run_compressors(path))


def report(path, vocab_size, times, rounds, our_bytes, compressors):
    """The table of one text; its medians and compressors' bits per byte, for the summary."""
    def median(kind, key):
        return statistics.median(r[key] for r in rounds[kind])

    char, ours = rounds["char"][0], rounds["ours"][0]
    compressor_bpb, held_out_bytes = compressors
    print(f"\n{path.name}: {path.stat().st_size:,} bytes; our tokenizer {vocab_size} tokens "
          f"(training {times['tokenizer_s']:.1f} s, encoding {times['encode_s']:.1f} s: not in the budget)")
    print(f"  char: {char['shape']}\n  ours: {ours['shape']}")
    print("| model | held-out bits/byte | each round | bytes scored | steps | parameters | training s | load before -> after |")
    print("|---|---|---|---|---|---|---|---|")
    for kind, nbytes in (("char", char["bytes"]), ("ours", our_bytes)):
        each = ", ".join(f"{r['bpb']:.4f} ({r['steps']} steps)" for r in rounds[kind])
        loads = ", ".join(f"{a:.2f} -> {b:.2f}" for a, b in (r["load"] for r in rounds[kind]))
        print(f"| {kind} | {median(kind, 'bpb'):.4f} | {each} | {nbytes:,} | {median(kind, 'steps'):.0f} | "
              f"{rounds[kind][0]['params']:,} | {median(kind, 'train_s'):.1f} | {loads} |")
    for name, value in compressor_bpb.items():
        print(f"| {name} | {value:.4f} | | {held_out_bytes:,} | | | | |")
    print(f"ours / char bits per byte: {median('ours', 'bpb') / median('char', 'bpb'):.3f}")
    best = min(compressor_bpb, key=compressor_bpb.get)
    print(f"best compressor: {best}, {compressor_bpb[best]:.4f}; ours / best compressor: "
          f"{median('ours', 'bpb') / compressor_bpb[best]:.3f}")
    return {"char": median("char", "bpb"), "ours": median("ours", "bpb"), **compressor_bpb,
            "bytes": path.stat().st_size}


def report_summary(summary):
    """One row per text: held-out bits per byte of each contender, the best compressor and the ratios."""
    columns = [c for c in ("char", "ours", *COMPRESSORS) if any(c in row for row in summary.values())]
    print(f"\n| text | bytes | {' | '.join(columns)} | best compressor |"
          + (" ours / best compressor | ours / char |" if "ours" in columns else ""))
    print("|---|---:|" + "---:|" * len(columns) + "---|" + ("---:|---:|" if "ours" in columns else ""))
    for path, row in summary.items():
        best = min((c for c in COMPRESSORS if c in row), key=row.get)
        line = f"| {path.name} | {row['bytes']:,} | " + " | ".join(f"{row[c]:.3f}" if c in row else "" for c in columns)
        line += f" | {best} |"
        if "ours" in columns:
            line += f" {row['ours'] / row[best]:.3f} | {row['ours'] / row['char']:.3f} |"
        print(line)


def child():
    _, kind, text_path, seconds, threads = sys.argv[1:]
    import torch

    torch.set_num_threads(int(threads))
    print(json.dumps(run_char(text_path, float(seconds))))


if __name__ == "__main__":
    child() if sys.argv[1:2] == ["_one"] else main()
