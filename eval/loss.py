"""The loss of a model on a stream of tokens, in nats per token and in bits per byte of text, read
in consecutive windows of its context: the one implementation of the trainer's validation
(train/evaluate.py) and of `gptkit eval text`.

A window is context + 1 tokens: the model reads the first `context` and predicts the last
`context`, so each window's first token is the previous window's last and every token of the
stream after its first is predicted once."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import NamedTuple

import numpy as np
import torch

from gptkit.model.model import TransformerLM
from gptkit.shared.shard_data import ShardData
from gptkit.tokenizer import Tokenizer

# What a model scores under: torch.autocast (bf16 on CUDA), or contextlib.nullcontext().
Autocast = AbstractContextManager[object]


class Loss(NamedTuple):
    loss: float  # nats per predicted token
    bpb: float  # bits per byte of the text the predicted tokens stand for
    tokens: int  # predicted tokens
    bytes: int  # their bytes of text (special tokens have none)


def eval_sequences(data: ShardData, context_length: int, max_tokens: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The fixed validation set: the first `max_tokens` tokens of the validation stream, as
    whole windows (the same tokens in every evaluation of every run), and their mask where the
    data has one (chat data: 1 where the loss counts the token), else None."""
    count = _windows_of(data, context_length, max_tokens)
    length = count * context_length + 1
    sequences = windows(data.span(0, length), context_length)
    data.check_ids(sequences, context_length * np.arange(count))
    return sequences, windows(data.mask_span(0, length), context_length) if data.masked else None


def _windows_of(data, context_length, max_tokens):
    return max(1, min(max_tokens, int(data.sizes.sum()) - 1) // context_length)


def text_windows(ids: Iterable[int] | np.ndarray, context_length: int) -> tuple[np.ndarray, np.ndarray | None]:
    """All of a stream of token ids in windows: the whole windows, (n, context + 1), then the
    shorter last one where the stream does not end at one, (1, k) (None: it does)."""
    ids = np.asarray(ids, np.int64)
    whole = (len(ids) - 1) // context_length
    rest = ids[whole * context_length :]
    return windows(ids[: whole * context_length + 1], context_length), (rest[None] if len(rest) > 1 else None)


def windows(flat: np.ndarray, context_length: int) -> np.ndarray:
    """(n, context + 1) consecutive windows of `flat`, n * context + 1 tokens."""
    count = (len(flat) - 1) // context_length
    return (
        np.stack([flat[i * context_length : (i + 1) * context_length + 1] for i in range(count)])
        if count
        else np.empty((0, context_length + 1), flat.dtype)
    )


def on_device(array: np.ndarray, device: torch.device) -> torch.Tensor:
    """A numpy array as a tensor on `device`. To CUDA from pinned memory, without waiting: a copy
    from pageable memory blocks the host until the GPU has done the work queued before it."""
    tensor = torch.from_numpy(array)
    if device.type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


def token_bytes(tokenizer: Tokenizer) -> list[int]:
    """The length in bytes of each token's text; 0 for special tokens, which stand for no text."""
    special = set(tokenizer.special_tokens.values())
    return [0 if i in special else len(b) for i, b in enumerate(tokenizer.vocab)]


def _losses(model, sequences, batch_size, autocast, device):
    """Each batch of the windows `sequences`: its first window's index, its targets and their
    losses, on `device`."""
    for i in range(0, len(sequences), batch_size):
        batch = on_device(sequences[i : i + batch_size], device).long()
        with autocast:
            losses = model.token_losses(batch[:, :-1], batch[:, 1:])
        yield i, batch[:, 1:], losses


@torch.no_grad()
def loss_sums(
    model: TransformerLM,
    sequences: np.ndarray,
    nbytes: torch.Tensor,
    batch_size: int,
    autocast: Autocast,
    each_batch: Callable[[int], None] | None = None,
    masks: np.ndarray | None = None,
) -> torch.Tensor:
    """Sums over the windows `sequences` (an (n, T + 1) array), in batches of `batch_size`: the
    loss, the predicted tokens, the loss of the tokens that are text, and their bytes (`nbytes`:
    token_bytes as a tensor on the model's device); a float64 tensor there, with no sync per
    batch, for the ranks to add up. `each_batch(windows done)` after each batch. `masks` (the
    masks eval_sequences gives): only the targets whose mask is 1 count, in every sum."""
    sums = torch.zeros(4, device=nbytes.device, dtype=torch.float64)
    for i, targets, losses in _losses(model, sequences, batch_size, autocast, nbytes.device):
        text = nbytes[targets]
        if masks is not None:
            counted = on_device(masks[i : i + batch_size], nbytes.device)[:, 1:]
            losses, text = losses * counted, text * counted
        sums[0] += losses.sum(dtype=torch.float64)
        sums[1] += targets.numel() if masks is None else counted.sum(dtype=torch.float64)
        sums[2] += (losses * (text > 0)).sum(dtype=torch.float64)
        sums[3] += text.sum(dtype=torch.float64)
        if each_batch:
            each_batch(min(i + batch_size, len(sequences)))
    return sums


@torch.no_grad()
def token_losses(
    model: TransformerLM,
    sequences: np.ndarray,
    batch_size: int,
    autocast: Autocast,
    device: torch.device,
    each_batch: Callable[[int], None] | None = None,
) -> np.ndarray:
    """The loss of each target of the windows `sequences`, in their order, as float64 numpy."""
    out = []
    for i, _, losses in _losses(model, sequences, batch_size, autocast, device):
        out.append(losses.double().flatten().cpu().numpy())
        if each_batch:
            each_batch(min(i + batch_size, len(sequences)))
    return np.concatenate(out) if out else np.zeros(0)


def target_sums(
    losses: np.ndarray, targets: np.ndarray, nbytes: np.ndarray, counted: np.ndarray | None = None
) -> np.ndarray:
    """loss_sums' four sums from each target's loss (numpy): `nbytes` token_bytes as an array,
    `counted` 1 where a target counts (None: all)."""
    counted = np.ones(len(targets)) if counted is None else counted
    text = nbytes[targets] * counted
    return np.array([(losses * counted).sum(), counted.sum(), (losses * counted * (text > 0)).sum(), text.sum()])


def summary(sums: torch.Tensor | np.ndarray) -> Loss:
    """The loss and bits per byte of loss_sums' sums. Bits per byte do not depend on the
    tokenizer: the summed loss of the targets that are text, in bits, over their bytes; special
    tokens count in neither."""
    loss_sum, count, text_loss, text_bytes = sums.tolist()
    return Loss(loss_sum / count, text_loss / math.log(2) / max(text_bytes, 1), int(count), int(text_bytes))
