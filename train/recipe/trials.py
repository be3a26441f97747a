"""The recipe's vocabulary trials: the cuts of the data's tokenizer it tries (cut_sizes), each a
candidate run at the shape chosen for it (candidates), trained briefly on the user's own training tokens
and scored on the start of its validation split in bits per byte, which do not depend on the
tokenizer. Successive halving (Jamieson & Talwalkar, 2016) spends the trials' time: every candidate
trains for one unit, the better half trains on for twice as long, and so on until one is left,
which goes on as the run: the time of the candidates dropped is what the trials cost.

A short trial favors what learns fastest at first: on Tiny Shakespeare a 4,096-token vocabulary led a
1,024-token one after 20 s of trial, yet scored 2.27 against 2.17 bits per byte after 110 s. Going on
from where each round stopped makes the last comparison three times as long as starting each round
afresh would, for the same cost.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from gptkit.eval.loss import loss_sums, summary, token_bytes, windows
from gptkit.model.config import ModelConfig
from gptkit.model.model import TransformerLM
from gptkit.shared.progress import Progress
from gptkit.shared.shard_data import ShardData
from gptkit.shared.shard_dir import ShardDir
from gptkit.tokenizer import Tokenizer
from gptkit.tokenizer.cut import Unmerge, cut_split, cuttable

from ..data import Loader
from ..optim import build_optimizers
from ..processes import Dist
from ..sections import Batch, Length, Optim
from .ladder import LADDER, Choice

# The vocabularies tried, where the user gives no merges: the data's tokenizer cut to each of these sizes
# below its own (special tokens included), its bytes alone, and itself whole. Rules chose the size
# before, fitted on the benchmark's kinds of text; on a kind outside them one scored worse than a
# character model. Each cut's shapes are timed (timing.TIMING_SHARE at most each), and the trials take
# what is left of settings.RECIPE_SHARE of the budget.
CUT_SIZES = (1024, 4096, 16384)
CUT_TOKENS = 1 << 25  # training tokens at most, for the cuts (held in memory, up to ~4x as many tokens)
WARMUP = 0.5  # of the first round: a trial's linear warmup
VAL_TOKENS = 1 << 14  # of the data's own tokenization: the held-out text every candidate is scored on
# Steps of the last round that rank the candidates as the whole run would: on the benchmark's texts the
# last round ranked them right from 120-230 steps, and 50-130 steps ranked them wrong (bytes ahead on
# glibc's locale tables, 4,096 tokens on Tiny Shakespeare). Where the budget buys more, the trials stop
# there and the run has the rest.
ENOUGH_STEPS = 256


@dataclass(frozen=True)
class Tokens:
    """A candidate's tokenization of the run's data: its tokenizer, the training split, and the
    held-out text every candidate is scored on (the same bytes in each tokenization)."""

    tokenizer: Tokenizer
    train: ShardData
    val: np.ndarray  # token ids of the held-out text


@dataclass(frozen=True)
class Candidate:
    """What a trial trains: a model of `model` on `tokens`, at batch `batch` and peak learning rate `lr`."""

    name: str  # what the recipe's line calls it
    tokens: Tokens
    model: ModelConfig
    batch: int
    lr: float


@dataclass(frozen=True)
class Score:
    name: str
    seconds: float  # the trial's time
    steps: int  # the steps it made in that time
    bpb: float  # held-out bits per byte at its end

    def record(self) -> dict:
        return {"candidate": self.name, "seconds": round(self.seconds, 2), "steps": self.steps, "bpb": self.bpb}


class Trial:
    """A candidate in training: its model and optimizer, and the time and steps it has had. A trial warms
    up over its first `warmup` seconds, then trains at the peak learning rate, so that a round's
    survivors go on where they were and are scored alike. `agree(value)`: the largest value among the
    run's processes, so that all of them see the same scores."""

    def __init__(self, candidate: Candidate, warmup: float, dist: Dist, seed: int) -> None:
        """`dist`: this process's place; every process trains the candidate whole."""
        self.candidate, self.warmup, self.device, self.agree = candidate, warmup, dist.device, dist.largest
        device = dist.device
        self.autocast = (
            torch.autocast("cuda", torch.bfloat16) if device.type == "cuda" else torch.autocast("cpu", enabled=False)
        )
        torch.manual_seed(seed)
        self.model = TransformerLM(candidate.model).to(device)
        self.optimizers = build_optimizers(self.model, Optim(lr=candidate.lr))
        self.loader = Loader(candidate.tokens.train, Batch(batch_size=candidate.batch), seed, Dist())
        self.seconds, self.steps = 0.0, 0

    def train(self, seconds: float, progress: Progress | None = None) -> None:
        """Train for `seconds` more (two steps at least), counting each step on `progress`."""
        self.model.train()
        started, first = time.monotonic(), self.steps
        while (elapsed := time.monotonic() - started) < seconds or self.steps < first + 2:
            batch = torch.from_numpy(self.loader.batch(self.steps).astype(np.int64)).to(self.device)
            with self.autocast:
                _, loss = self.model(batch[:, :-1], batch[:, 1:])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.optimizers.step(min(1.0, max((self.seconds + elapsed) / self.warmup, 0.01)))
            self.model.zero_grad(set_to_none=True)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            self.steps += 1
            if progress is not None:
                progress.update(progress.done + 1, self.candidate.name)
        self.seconds += time.monotonic() - started

    @torch.no_grad()
    def score(self) -> Score:
        """Its held-out bits per byte now (the largest among the run's processes)."""
        self.model.eval()
        tokens = self.candidate.tokens
        sequences = windows(tokens.val, self.candidate.model.context_length)
        nbytes = torch.tensor(token_bytes(tokens.tokenizer), device=self.device)
        bpb = summary(loss_sums(self.model, sequences, nbytes, max(1, self.candidate.batch), self.autocast)).bpb
        return Score(self.candidate.name, self.seconds, self.steps, self.agree(bpb))


def cut_sizes(
    merges: int | None, length: Length, data: ShardDir, tokenizer: Tokenizer, train: ShardData, val: ShardData
) -> tuple[list[int], str]:
    """The merges of the cuts of `tokenizer` that the recipe tries on the splits `train` and `val`,
    fewest first, the data's own last (none where it tries none), and why it tries none: the run's
    `merges` given, or its `length` in steps or tokens."""
    if merges is not None:
        return [], f"--merges {merges} given"
    if length.max_time is None and (length.max_steps or length.max_tokens):
        return [], "the run's length is given in steps or tokens, which trials would add to"
    if data.has_mask:
        return [], "chat data, whose mask follows its own tokens"
    if not cuttable(tokenizer):
        return [], f"{data.tokenizer} does not list its tokens in the order its merges made them"
    if train.starts[-1] > CUT_TOKENS:
        return [], f"{train.starts[-1]:,} training tokens, more than the {CUT_TOKENS:,} a cut is tried on (in memory)"
    if val.starts[-1] <= max(shape.context for shape in LADDER):
        return [], f"{val.starts[-1]:,} validation tokens, too few to score a trial on"
    total = len(tokenizer.merges)
    specials = len(tokenizer.special_tokens)
    cuts = [0, *(size - 256 - specials for size in CUT_SIZES if 0 < size - 256 - specials < total)]
    return ([*cuts, total] if total > 0 else []), "" if total > 0 else f"{data.tokenizer} has no merges"


def candidates(shapes: dict[int, Choice], data: ShardDir, tokenizer: Tokenizer, val: ShardData) -> list[Candidate]:
    """The trials' candidates: each cut of `tokenizer` (`shapes`: the Choice made for each, by its
    merges) at its shape and learning rate, without dropout, scored on the same held-out bytes (the first
    of the validation split `val`)."""
    held_out = val.span(0, min(VAL_TOKENS, int(val.starts[-1])))
    made = []
    for merges, chosen in shapes.items():
        shape = chosen.shape
        train = ShardData(data, "train", tokenizer.vocab_size, tokenizer.fingerprint, shape.context, verify=False)
        unmerge = Unmerge(tokenizer, merges)
        cut = unmerge.tokenizer
        tokens = Tokens(cut, cut_split(train, unmerge, shape.context), unmerge(held_out, np.int64))
        name = f"{'bytes' if merges == 0 else f'{cut.vocab_size:,}'} (d {shape.d_model} x {shape.n_layers})"
        made.append(Candidate(name, tokens, ModelConfig(**shape.model(cut.vocab_size)), shape.batch, shape.lr))
    return made


def halving(
    candidates: Sequence[Candidate],
    seconds: float,
    start: Callable[[Candidate, float], Trial],
    enough: float = math.inf,
    quiet: bool = True,
) -> tuple[Trial, list[list[Score]]]:
    """The best of `candidates` by successive halving, and each round's scores. Each round trains the
    candidates left twice as long as the round before (the first: one unit), then keeps the better half;
    the candidates dropped take `seconds` in all, or less where the last two have trained for `enough`
    seconds each by then, and the last one left goes on as the run. `start(candidate, warmup)`: its
    Trial, warming up for `warmup` seconds. Unless `quiet`, each round shows its steps as they go
    (shared/progress.py), then its scores in a line."""
    sizes = [len(candidates)]
    while sizes[-1] > 1:
        sizes.append(-(-sizes[-1] // 2))
    # a candidate dropped after round r has trained 2^(r+1) - 1 units
    dropped = sum((n - kept) * (2 ** (r + 1) - 1) for r, (n, kept) in enumerate(zip(sizes, sizes[1:])))
    unit = min(seconds / max(1, dropped), enough / max(1, 2 ** (len(sizes) - 1) - 1))
    alive = [start(c, WARMUP * unit) for c in candidates]
    rounds: list[list[Score]] = []
    while len(alive) > 1:
        name = f"round {len(rounds) + 1} of {len(sizes) - 1}"
        progress = Progress(f"recipe: {name}", "steps", quiet=quiet)
        for trial in alive:
            trial.train(unit * 2 ** len(rounds), progress)
        scores = [trial.score() for trial in alive]
        rounds.append(scores)
        progress.close(f"recipe: trials, {name}, held-out bits per byte: {scored(scores)}")
        order = sorted(range(len(alive)), key=lambda i: scores[i].bpb)
        alive = [alive[i] for i in order[: -(-len(alive) // 2)]]
    return alive[0], rounds


def scored(scores: Sequence[Score]) -> str:
    """A round's scores, best first, and the time each candidate had trained."""
    ranked = ", ".join(f"{s.name} {s.bpb:.3f}" for s in sorted(scores, key=lambda s: s.bpb))
    return f"{ranked} ({scores[0].seconds:.0f} s each)"
