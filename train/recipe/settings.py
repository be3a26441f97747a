"""The recipe's layer of a run's settings (recipe_settings) and what it did to choose them (Recipe):
each vocabulary's shape chosen by the climb (ladder.py, timed by timing.py), then the vocabularies
tried against each other (trials.py), within RECIPE_SHARE of the budget."""

from __future__ import annotations

import functools
import sys
import time
from dataclasses import dataclass
from typing import Any

import torch

from gptkit.runtime.threads import Threads
from gptkit.shared.errors import GptkitError
from gptkit.shared.shard_data import ShardData
from gptkit.shared.shard_dir import ShardDir
from gptkit.shared.text import counted
from gptkit.tokenizer import Tokenizer
from gptkit.tokenizer.cut import Unmerge, cut_split

from ..processes import Dist
from ..sections import DEFAULT_BUDGET, Batch, Length, parse_duration
from .ladder import Choice, choose
from .repeats import Repeats
from .report import tokens
from .timing import TimedShapes, step_timer
from .trials import ENOUGH_STEPS, Score, Trial, candidates, cut_sizes, halving

RECIPE_SHARE = 0.2  # of the budget: the timing and the trials together, about


@dataclass(frozen=True)
class Recipe:
    """What the recipe chose, how, and the trials' winner, which the run goes on from."""

    choice: Choice
    budget: str  # as the run's line says it
    where: str  # the device, and a CPU's threads
    fixed_steps: int | None = None  # the run's length where it is given in steps or tokens
    trials: tuple[tuple[Score, ...], ...] = ()  # each round's scores, where cuts were tried
    not_tried: str = ""  # why no cuts were tried
    spent: float = 0.0  # seconds of the budget the recipe took: the run trains for the rest
    weights: dict[str, torch.Tensor] | None = None  # the trials' winner, in host memory: the run goes on from it


def recipe_settings(
    length: Length, batch: Batch, seed: int, data: ShardDir, tokenizer: Tokenizer, dist: Dist, threads: Threads
) -> tuple[dict[str, Any], Recipe]:
    """(the recipe's layer of settings, the Recipe) for a run whose model is not given: chosen for its
    data (`data`, a ShardDir of `tokenizer`'s tokens), its budget (`length`'s max_time, or DEFAULT_BUDGET
    where no length is given) and this process's device (`dist`), timed with `threads`. Where `batch`
    gives no merges, the cuts of the tokenizer (trials.CUT_SIZES) are tried on the data, from `seed`, and
    the best is taken. The budget is the recipe's length, its own time included (Recipe.spent); a length
    of the run's own overrides it (settle.from_layers). The process that logs shows what it does as it
    goes, on standard error (timing.py, trials.py), from its first line on."""
    started = time.monotonic()
    budget = length.max_time or DEFAULT_BUDGET
    budget_text = budget if length.max_time else f"{budget} (the default budget)"
    seconds = parse_duration(budget)
    device, quiet = dist.device, not dist.master
    where = f"{device.type} ({counted(threads.count, 'thread')})" if device.type == "cpu" else str(device)
    full = ShardData(data, "train", tokenizer.vocab_size, tokenizer.fingerprint, 1, verify=False)
    val = ShardData(data, "val", tokenizer.vocab_size, tokenizer.fingerprint, 1, verify=False)
    cuts, not_tried = cut_sizes(batch.merges, length, data, tokenizer, full, val)
    given = batch.merges if batch.merges is not None else len(tokenizer.merges)
    plan = (
        f"timing model shapes for {len(cuts)} vocabularies, then trials of them"
        if len(cuts) > 1
        else f"timing model shapes ({'no trials: ' + not_tried if not_tried else 'one vocabulary'})"
    )
    if not quiet:  # its timing and trials may take minutes before the run's first line
        print(
            f"recipe: choosing the model for {tokens(int(full.starts[-1]))} training tokens and {budget_text} on {where}: "
            f"{plan}; --model or --config skips it",
            file=sys.stderr,
            flush=True,
        )
    # each cut with the shape it would train: a smaller vocabulary makes faster steps, which buy a larger model
    shapes = {merges: _choose(full, tokenizer, merges, seconds, dist, threads) for merges in cuts or [given]}
    merges, chosen = next(iter(shapes.items()))
    rounds: list[list[Score]] = []
    weights = None
    if len(cuts) > 1:
        start = functools.partial(Trial, dist=dist, seed=seed)
        tried = candidates(shapes, data, tokenizer, val)
        left = RECIPE_SHARE * seconds - dist.largest(time.monotonic() - started)
        slowest = max(shape.seconds_per_step for shape in shapes.values())
        best, rounds = halving(tried, left, start, ENOUGH_STEPS * slowest, quiet)
        merges = cuts[tried.index(best.candidate)]
        chosen = shapes[merges]
        if dist.world == 1:  # the processes' trials differ in their steps: a run of several starts afresh
            weights = {name: t.detach().to("cpu", copy=True) for name, t in best.model.state_dict().items()}
    steps = None  # the budget's, as timed
    if length.max_time is None and (length.max_steps or length.max_tokens):  # in steps or tokens: evaluations fit it
        tokens_per_step = (
            (batch.batch_size or chosen.shape.batch) * (batch.context_length or chosen.shape.context) * batch.grad_accum
        )
        steps = length.max_steps or -(-(length.max_tokens or 0) // tokens_per_step)
    recipe = Recipe(
        chosen,
        budget=budget_text,
        where=where,
        fixed_steps=steps,
        trials=tuple(tuple(r) for r in rounds),
        not_tried=not_tried,
        spent=dist.largest(time.monotonic() - started),
        weights=weights,
    )
    cut = {"merges": merges} if merges != len(tokenizer.merges) else {}
    return {**chosen.settings(steps), **cut, "max_time": budget}, recipe


def _choose(full: ShardData, tokenizer: Tokenizer, merges: int, seconds: float, dist: Dist, threads: Threads) -> Choice:
    """choose() for the data `full` (the training split in `tokenizer`'s tokens) cut to `merges`."""
    vocab_size, train = tokenizer.vocab_size, full
    if merges != len(tokenizer.merges):
        unmerge = Unmerge(tokenizer, merges)
        vocab_size, train = unmerge.tokenizer.vocab_size, cut_split(full, unmerge, 1)
    shown = TimedShapes("bytes" if merges == 0 else f"{vocab_size:,}", quiet=not dist.master)
    timer = step_timer(vocab_size, dist, threads, seconds, shown)
    chosen = choose(int(train.starts[-1]), vocab_size, seconds, timer, Repeats.of(train))
    if chosen is None:
        raise GptkitError(
            f"the recipe's smallest model does not fit {dist.device}: give a model, with a batch that fits"
        )
    shown.close(chosen.shape, chosen.dropout)
    return chosen
