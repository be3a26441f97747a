"""eval/adapt.py: the mixture equals the Bayesian mixture computed position by position and costs
at most log(predictors) nats over the best of them; the adapted losses equal copies of the model
stepped by hand with SGD after each window; no token's loss depends on a later window; the model
is left as it was."""

import contextlib
import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gptkit.eval import adapt
from gptkit.model.config import ModelConfig
from gptkit.model.model import TransformerLM

CPU = torch.device("cpu")


def test_the_mixture_is_the_bayesian_mixture_position_by_position():
    rng = np.random.default_rng(0)
    losses = rng.exponential(2.0, (4, 300))
    losses[2, 150:] *= 0.2  # one predictor becomes the best halfway
    got = adapt.mixture(losses)
    for t in range(losses.shape[1]):
        weights = np.exp(-losses[:, :t].sum(axis=1))
        weights /= weights.sum()
        assert got[t] == pytest.approx(-math.log((weights * np.exp(-losses[:, t])).sum()), rel=1e-9)
    assert got.sum() <= losses.sum(axis=1).min() + math.log(len(losses)) + 1e-9
    assert got[-50:].mean() == pytest.approx(losses[2, -50:].mean(), rel=1e-3)  # the weight moved to the best


def test_a_predictor_that_diverges_counts_as_probability_zero():
    rng = np.random.default_rng(1)
    losses = rng.exponential(1.0, (2, 100))
    diverged = losses.copy()
    diverged[1, 40:] = np.nan
    diverged[1, 60:] = np.inf
    got = adapt.mixture(diverged)
    np.testing.assert_allclose(got[:40], adapt.mixture(losses)[:40], rtol=1e-12)
    assert np.isfinite(got).all()
    weight = 1 / (1 + np.exp(losses[0, :40].sum() - losses[1, :40].sum()))  # the first row's, before 40
    assert got[40] == pytest.approx(losses[0, 40] - math.log(weight), rel=1e-9)
    np.testing.assert_allclose(got[41:], losses[0, 41:], rtol=1e-9)  # then the first row's alone


def small_model(seed=0, context=16, vocab=50):
    torch.manual_seed(seed)
    return TransformerLM(
        ModelConfig(vocab_size=vocab, context_length=context, d_model=32, n_layers=2, n_heads=2, d_ff=64)
    ).eval()


def by_hand(model, windows, lr):
    """Each window's losses, then a step of SGD on their mean, written out."""
    model = copy.deepcopy(model)
    out = []
    for window in windows:
        ids = torch.from_numpy(window[None]).long()
        logits, _ = model(ids[:, :-1])
        losses = F.cross_entropy(logits[0].float(), ids[0, 1:], reduction="none")
        out.append(losses.detach().double().numpy())
        grads = torch.autograd.grad(losses.mean(), list(model.parameters()))
        with torch.no_grad():
            for p, g in zip(model.parameters(), grads):
                p -= lr * g
    return np.concatenate(out)


def test_the_losses_are_copies_stepped_with_sgd_after_each_window_and_the_model_is_left_alone():
    model = small_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rng = np.random.default_rng(2)
    phrase = rng.integers(0, 50, 23)
    stream = np.tile(phrase, 12)  # a text that repeats: adapting to it pays
    parts = [
        np.stack([stream[i : i + 17] for i in range(0, 160, 16)]),
        stream[None, 160:170],
    ]  # and a shorter last window
    done = []
    mixed, alone = adapt.adapted_losses(model, parts, contextlib.nullcontext(), CPU, done.append)
    windows = [*parts[0], parts[1][0]]
    rows = [by_hand(model, windows, 0.0)] + [by_hand(model, windows, lr) for lr in adapt.LEARNING_RATES]
    np.testing.assert_allclose(alone, rows[0], rtol=1e-5)
    np.testing.assert_allclose(mixed, adapt.mixture(np.stack(rows)), rtol=1e-4)
    assert done == list(range(1, len(windows) + 1)) and len(mixed) == 10 * 16 + 9
    assert mixed.sum() < alone.sum() - 100  # it learned the phrase
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert not any(p.requires_grad and p.grad is not None for p in model.parameters())


def test_no_loss_depends_on_a_later_window():
    model = small_model(seed=1)
    rng = np.random.default_rng(3)
    stream = rng.integers(0, 50, 6 * 16 + 1)
    later = stream.copy()
    later[3 * 16 + 5 :] = rng.integers(0, 50, len(stream) - 3 * 16 - 5)
    first, _ = adapt.adapted_losses(
        model, [np.stack([stream[i : i + 17] for i in range(0, 96, 16)])], contextlib.nullcontext(), CPU
    )
    second, _ = adapt.adapted_losses(
        model, [np.stack([later[i : i + 17] for i in range(0, 96, 16)])], contextlib.nullcontext(), CPU
    )
    np.testing.assert_array_equal(first[: 3 * 16 + 4], second[: 3 * 16 + 4])
    assert (first[3 * 16 + 4 :] != second[3 * 16 + 4 :]).any()
