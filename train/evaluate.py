"""Validation: the loss over a fixed set of validation sequences, in nats per token and in bits
per byte of text (eval/loss.py computes both, for `gptkit eval` too), and the final loss beside
the loss of a model that knows only token frequencies."""

from __future__ import annotations

import numpy as np
import torch

from gptkit.eval.choice import frame, score
from gptkit.eval.loss import Autocast, eval_sequences, loss_sums, summary, token_bytes
from gptkit.eval.tasks import read_hellaswag
from gptkit.model.model import TransformerLM
from gptkit.shared.errors import SettingError
from gptkit.shared.shard_data import ShardData
from gptkit.tokenizer import Tokenizer

from .processes import Dist


class Evaluator:
    """The validation loss of a model on the first `eval_tokens` tokens of the val split, the same
    sequences in every evaluation of every run; of data with a mask (chat data), on the tokens it
    counts alone (the assistant's), as in training. The ranks share the sequences, each in batches
    of its own share of the run's batch size, and add up their sums."""

    def __init__(
        self, val_data: ShardData, tokenizer: Tokenizer, context: int, eval_tokens: int, batch_size: int, dist: Dist
    ) -> None:
        """It receives the validation split `val_data` in the tokens of `tokenizer`, the run's `context`
        (tokens a sequence), `eval_tokens` (the evaluation section's), `batch_size` (of all processes
        together) and this process's place `dist`."""
        sequences, masks = eval_sequences(val_data, context, eval_tokens)
        if masks is not None and not masks[:, 1:].any():
            raise SettingError(
                "eval_tokens",
                f"{eval_tokens}: the first {masks.shape[0] * (masks.shape[1] - 1) + 1:,} validation tokens of "
                f"{val_data.shards[0].path.parent} hold no token the mask counts (the "
                "assistant's): validate on more tokens",
            )
        self.sequences = sequences[dist.rank :: dist.world]
        self.masks = None if masks is None else masks[dist.rank :: dist.world]
        self.batch_size = batch_size // dist.world
        self.token_bytes = torch.tensor(token_bytes(tokenizer), device=dist.device)
        self.dist = dist
        # rank 0's share is the largest: [0::world] takes the first of every group of `world`
        self.idle = Idle(
            sequences[:1],
            _passes(len(sequences[0 :: dist.world]), self.batch_size) - _passes(len(self.sequences), self.batch_size)
            if dist.sharded
            else 0,
        )

    def __call__(self, model: TransformerLM, autocast: Autocast) -> tuple[float, float, int]:
        """(loss in nats per token, bits per byte, tokens)."""
        model.eval()
        sums = loss_sums(model, self.sequences, self.token_bytes, self.batch_size, autocast, masks=self.masks)
        self.idle(model, autocast)
        self.dist.all_reduce(sums)
        return summary(sums)[:3]


class HellaSwag:
    """Accuracy on a HellaSwag jsonl (--eval-hellaswag), scored as `gptkit eval hellaswag` scores it.
    Every rank reads and checks the whole file (a bad line stops them all at the start), then scores
    its share of the items in its share of the run's batch size; the ranks add up their counts."""

    def __init__(
        self, path: str, tokenizer: Tokenizer, eot_id: int | None, context_length: int, batch_size: int, dist: Dist
    ) -> None:
        """It receives the file's `path`, the run's `tokenizer`, the data's end-of-text id `eot_id` (a text
        starts with it, as the run's samples do), the model's `context_length`, `batch_size` (of all
        processes together) and this process's place `dist`."""
        world = dist.world
        items = frame(read_hellaswag(path), tokenizer, eot_id, context_length, path).items
        self.items = items[dist.rank :: world]
        self.batch_size, self.dist = batch_size // world, dist
        rows = [
            sum(len(item.choices) for item in items[r::world]) for r in range(world)
        ]  # score() passes batches of rows
        first = items[0].prompt + items[0].choices[0]
        self.idle = Idle(
            np.array([first]),
            _passes(max(rows), self.batch_size) - _passes(rows[dist.rank], self.batch_size) if dist.sharded else 0,
        )

    def __call__(self, model: TransformerLM, autocast: Autocast) -> tuple[float, float, int]:
        """(acc, acc_norm, items)."""
        model.eval()
        totals = score(model, self.items, self.batch_size, autocast).totals()
        self.idle(model, autocast)
        self.dist.all_reduce(totals)
        right, right_norm, count = totals.tolist()
        return right / count, right_norm / count, int(count)


class Idle:
    """Forward passes whose results are dropped. Under FSDP every forward pass gathers weights from
    every rank, so all ranks must make as many: a rank whose share of an evaluation takes fewer
    batches than rank 0's makes up the difference on `window` (an array of one row of ids)."""

    def __init__(self, window: np.ndarray, passes: int) -> None:
        self.window, self.passes = torch.from_numpy(np.asarray(window, np.int64)), passes

    @torch.no_grad()
    def __call__(self, model: TransformerLM, autocast: Autocast) -> None:
        ids = self.window.to(next(model.parameters()).device)
        for _ in range(self.passes):
            with autocast:
                model.token_losses(ids[:, :-1], ids[:, 1:])


def _passes(rows: int, batch_size: int) -> int:
    """Forward passes of `rows` rows in batches of `batch_size`."""
    return -(-rows // batch_size)


def unigram_comparison(val_loss: float, val_bpb: float, entropy: float | None) -> str:
    """The final validation loss beside `entropy`, the unigram entropy of the training tokens
    (None: unknown)."""
    line = f"final validation loss {val_loss:.4f} nats/token, {val_bpb:.4f} bits/byte"
    if entropy is not None:
        gap = f"{entropy - val_loss:.4f} below" if val_loss <= entropy else f"{val_loss - entropy:.4f} above"
        line += (
            f"; {gap} the unigram entropy of the training tokens ({entropy:.4f}: the loss of a model that "
            f"knows only token frequencies)"
        )
    return line
