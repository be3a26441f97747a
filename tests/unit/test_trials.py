"""The recipe's trials (train/recipe/trials.py): successive halving goes on with the better half, the time of
those dropped is the time given, and a trial is scored in held-out bits per byte."""

import numpy as np
import pytest

from gptkit.model.config import ModelConfig
from gptkit.shared.shard_data import ShardData
from gptkit.shared.shard_dir import ShardDir
from gptkit.tokenizer.cut import Unmerge, cut_split
from gptkit.train.budget import MIN_LEFT, Planner
from gptkit.train.config import TrainConfig
from gptkit.train.data import data_tokenizer
from gptkit.train.processes import Dist
from gptkit.train.recipe.trials import WARMUP, Candidate, Score, Tokens, Trial, halving


class Fake:
    """A trial of a candidate (named by a letter) that scores `bpb[name]` whatever its time."""

    def __init__(self, candidate, warmup, bpb):
        self.candidate, self.warmup, self.bpb, self.seconds = candidate, warmup, bpb, 0.0

    def train(self, seconds, progress=None):
        self.seconds += seconds

    def score(self):
        return Score(self.candidate.name, self.seconds, 1, self.bpb[self.candidate.name])


def named(*names):
    return [Candidate(n, None, None, 1, 1.0) for n in names]


def test_halving_goes_on_with_the_better_half_for_twice_as_long_each_round():
    bpb = {"a": 3.0, "b": 1.0, "c": 2.0, "d": 4.0, "e": 0.5}
    trials = []

    def start(candidate, warmup):
        trials.append(Fake(candidate, warmup, bpb))
        return trials[-1]

    best, rounds = halving(named("a", "b", "c", "d", "e"), 120.0, start)
    assert best.candidate.name == "e"
    assert [[s.name for s in r] for r in rounds] == [["a", "b", "c", "d", "e"], ["e", "b", "c"], ["e", "b"]]
    # each round trains those left twice as long as the round before, going on where they were: 1, 3, 7 units
    assert [[s.seconds for s in r] for r in rounds] == [[10.0] * 5, [30.0] * 3, [70.0] * 2]
    # those dropped (a and d after 1 unit, c after 3, b after 7) take the time given: 12 units of 10 s
    assert sum(t.seconds for t in trials if t is not best) == pytest.approx(120.0)
    assert all(t.warmup == pytest.approx(WARMUP * 10.0) for t in trials)


def test_halving_stops_where_the_last_two_have_trained_enough():
    """Time for 10 s units (4 dropped: a after 1, c after 3), but 24 s is enough for the last two, who
    train 1 + 2 units: units of 8 s."""
    bpb = {"a": 3.0, "b": 1.0, "c": 2.0}
    best, rounds = halving(named("a", "b", "c"), 40.0, lambda c, w: Fake(c, w, bpb), enough=24.0)
    assert best.candidate.name == "b" and best.seconds == pytest.approx(24.0)
    assert [s.seconds for s in rounds[0]] == [pytest.approx(8.0)] * 3
    best, rounds = halving(named("a", "b", "c"), 40.0, lambda c, w: Fake(c, w, bpb), enough=1_000.0)
    assert best.seconds == pytest.approx(30.0)


def test_halving_one_candidate_tries_nothing():
    best, rounds = halving(named("a"), 60.0, lambda c, w: Fake(c, w, {"a": 1.0}))
    assert best.candidate.name == "a" and best.seconds == 0 and rounds == []


def test_a_trial_scores_the_same_held_out_bytes_in_any_cut(data):
    """Bytes and the data's whole tokenizer, each trained a few steps, then a few more: both scores are
    bits per byte of the same held-out text, of a model that has learned little (uniform over bytes: 8)."""
    tokenizer = data_tokenizer(ShardDir(data))
    full = ShardData(ShardDir(data), "train", tokenizer.vocab_size, tokenizer.fingerprint, 32)
    val = ShardData(ShardDir(data), "val", tokenizer.vocab_size, tokenizer.fingerprint, 32)
    held_out = val.span(0, 500)
    for merges in (0, len(tokenizer.merges)):
        unmerge = Unmerge(tokenizer, merges)
        cut = unmerge.tokenizer
        model = ModelConfig(vocab_size=cut.vocab_size, context_length=32, d_model=32, n_layers=1, n_heads=2, d_ff=64)
        tokens = Tokens(cut, cut_split(full, unmerge, 32), unmerge(held_out, np.int64))
        trial = Trial(Candidate("x", tokens, model, 4, 1e-3), 0.01, Dist(), 0)
        trial.train(0.01)
        first = trial.score()
        trial.train(0.01)
        assert first.steps >= 2 and trial.score().steps >= first.steps + 2
        assert 1 < first.bpb < 12 and trial.seconds > first.seconds


def test_the_recipe_s_time_comes_out_of_the_run_s_budget():
    config = TrainConfig.of(data="d", out="o", max_time="100s", lr=1e-3, min_lr=1e-4)
    planner = Planner(config.length, config.lr_schedule, 1e-3, 1_000)
    planner.spend(17.5)
    assert planner.seconds == pytest.approx(82.5)
    planner.spend(1_000)
    assert planner.seconds == pytest.approx(MIN_LEFT * 82.5)
