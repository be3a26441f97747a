"""bench/recipe.py's char contender: a GPT written here in nanoGPT's style (learned positions,
LayerNorm, GELU MLP, tied head, no biases), trained as nanoGPT's README trains its character model
on a CPU, and nanoGPT's split of a text into train and held-out parts (every contender's).

torch is imported inside the functions: bench/recipe.py's parent imports this module for its
settings and split_text, and only its child processes run the model.
"""

import math
import time
from pathlib import Path

HELD_OUT = 0.1
SEED = 1337

# nanoGPT's README CPU command over config/train_shakespeare_char.py
CHAR = dict(
    n_layer=4,
    n_head=4,
    n_embd=128,
    block_size=64,
    batch_size=12,
    lr=1e-3,
    min_lr=1e-4,
    warmup_iters=100,
    betas=(0.9, 0.99),
    weight_decay=0.1,
    grad_clip=1.0,
)
CHAR_ITERS = 2000  # --max_iters=2000 --lr_decay_iters=2000


def split_text(text):
    """(train, held out): the held-out part is the last 10% of the characters, from a line start."""
    cut = text.rfind("\n", 0, int(len(text) * (1 - HELD_OUT))) + 1
    if cut == 0:
        raise SystemExit("error: the text has no line end in its first 90%, so no line-aligned held-out tail")
    return text[:cut], text[cut:]


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
            x = x + self.attn_out(
                F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, d)
            )
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
                    std = (
                        0.02 / math.sqrt(2 * c["n_layer"])
                        if name.endswith(("attn_out.weight", "down.weight"))
                        else 0.02
                    )
                    nn.init.normal_(p, 0.0, std)

        def forward(self, ids):
            x = self.tokens(ids) + self.positions(torch.arange(ids.shape[1]))
            for block in self.blocks:
                x = block(x)
            return self.head(self.norm(x))

    return CharGPT()


def char_lr(step, total):
    """nanoGPT's get_lr: linear warmup, then cosine from lr to min_lr at step `total` (lr_decay_iters)."""
    c = CHAR
    if step < c["warmup_iters"]:
        return c["lr"] * (step + 1) / (c["warmup_iters"] + 1)
    ratio = min(1.0, (step - c["warmup_iters"]) / max(1, total - c["warmup_iters"]))
    return c["min_lr"] + 0.5 * (1 + math.cos(math.pi * ratio)) * (c["lr"] - c["min_lr"])


def run_char(text_path, iters):
    """Train the char model on the train part as nanoGPT's loop does with --max_iters=--lr_decay_iters
    =`iters` (iterations 0 to `iters`, an update each); its held-out bits per byte and loop time."""
    import numpy as np
    import torch
    from torch.nn import functional as F

    text = Path(text_path).read_text(encoding="utf-8")
    train_text, held_out = split_text(text)
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    chars = np.unique(codes)  # as prepare.py: the characters of the whole text, sorted
    ids = torch.from_numpy(np.searchsorted(chars, codes).astype(np.int64))
    train_ids, val_ids = ids[: len(train_text)], ids[len(train_text) :]
    torch.manual_seed(SEED)
    model = char_model(len(chars))
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": CHAR["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}],
        lr=CHAR["lr"],
        betas=CHAR["betas"],
    )
    T, B = CHAR["block_size"], CHAR["batch_size"]
    rng = np.random.default_rng(SEED)
    start = time.perf_counter()
    for step in range(iters + 1):  # nanoGPT: `if iter_num > max_iters: break` after each update
        for group in optimizer.param_groups:
            group["lr"] = char_lr(step, iters)
        starts = torch.from_numpy(rng.integers(0, len(train_ids) - T - 1, size=B))
        rows = torch.stack([train_ids[s : s + T + 1] for s in starts])
        logits = model(rows[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), rows[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CHAR["grad_clip"])
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    train_seconds = time.perf_counter() - start

    model.eval()
    count = (len(val_ids) - 1) // T
    windows = torch.stack([val_ids[i * T : (i + 1) * T + 1] for i in range(count)])
    loss_sum = 0.0
    with torch.no_grad():
        for batch in windows.split(64):
            logits = model(batch[:, :-1])
            loss_sum += F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1), reduction="sum"
            ).item()
    predicted = held_out[1 : count * T + 1]
    nbytes = len(predicted.encode("utf-8"))
    return {
        "bpb": loss_sum / math.log(2) / nbytes,
        "steps": iters + 1,
        "params": sum(p.numel() for p in model.parameters()),
        "train_s": train_seconds,
        "bytes": nbytes,
        "shape": f"char, vocab {len(chars)}, d {CHAR['n_embd']}, "
        f"{CHAR['n_layer']} layers, batch {B} x {T}, nanoGPT's --max_iters={iters} (iterations 0 to {iters})",
    }
