"""Scoring a text with a model that keeps learning from it, as a compressor adapts to what it has
read: dynamic evaluation (Krause et al. 2018).

The windows are read in order, one at a time. Each is scored, and then copies of the model take
one step of SGD on it, one copy at each of LEARNING_RATES, before the next window is scored. The
rate that suits a model and a text is not known before reading it (too high and a copy diverges),
so the probabilities are a Bayesian mixture of the copies and the model as trained: each copy's
weight at a token is its probability of all the tokens before it. So every token's probability
depends only on the text before it, the summed losses are a code length the text could be decoded
from, and that code is at most log(1 + len(LEARNING_RATES)) nats longer than the best copy's or
the model's own.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from gptkit.model.model import TransformerLM

from .loss import Autocast, on_device

LEARNING_RATES = (0.01, 0.03, 0.1)


def adapted_losses(
    model: TransformerLM,
    parts: Sequence[np.ndarray],
    autocast: Autocast,
    device: torch.device,
    each_window: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The loss of each target of the windows `parts` (a list of (n, T + 1) arrays, read in order)
    under the mixture, and under the model as trained alone: two float64 numpy arrays.
    `each_window(windows done)` after each window. The model is left as it was."""
    copies = [copy.deepcopy(model).requires_grad_(True) for _ in LEARNING_RATES]
    optimizers = [torch.optim.SGD(c.parameters(), lr=lr) for c, lr in zip(copies, LEARNING_RATES)]
    # filled in place: small tensors kept from each window, between the steps' large ones, keep the
    # allocator from reusing the space they leave (the process grew by about 1 MB a window)
    losses = np.empty((1 + len(copies), sum(part[:, 1:].size for part in parts)))
    start, done = 0, 0
    for part in parts:
        for window in part:
            ids = on_device(window[None], device).long()
            end = start + ids.shape[1] - 1
            with autocast:
                losses[0, start:end] = model.token_losses(ids[:, :-1], ids[:, 1:])[0].cpu().numpy()
            for row, (c, optimizer) in enumerate(zip(copies, optimizers), 1):
                with autocast:
                    loss = _losses(c, ids)
                losses[row, start:end] = loss.detach().cpu().numpy()
                optimizer.zero_grad(set_to_none=True)
                loss.mean().backward()
                optimizer.step()
            start, done = end, done + 1
            if each_window:
                each_window(done)
    return mixture(losses), losses[0]


def _losses(model, ids):
    """The cross-entropy of each target of the window `ids` (1, T + 1), in float32, with its
    gradients (TransformerLM.token_losses has none)."""
    logits, _ = model(ids[:, :-1])
    return F.cross_entropy(logits.float().flatten(0, 1), ids[0, 1:], reduction="none")


def mixture(losses: np.ndarray) -> np.ndarray:
    """The loss of each position under the Bayesian mixture of the predictors whose losses are the
    rows of `losses` (nats, each position in order), from equal priors. A loss that is not finite
    (a copy that diverged) counts as probability 0."""
    losses = np.where(np.isfinite(losses), losses, np.inf)
    before = np.cumsum(np.c_[np.zeros(len(losses)), losses[:, :-1]], axis=1)  # each row's loss of the tokens before
    log_weights = -before - np.logaddexp.reduce(-before, axis=0)
    return -np.logaddexp.reduce(log_weights - losses, axis=0)
