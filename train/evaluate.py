"""Validation: the loss over a fixed set of validation sequences, in nats per token and in bits
per byte of text, and the final loss beside the loss of a model that knows only token frequencies."""
from __future__ import annotations

import math

import torch
import torch.distributed as dist

from .data import eval_sequences


class Evaluator:
    """The validation loss of a model on the first `eval_tokens` tokens of the val split, the same
    sequences in every evaluation of every run. The ranks share the sequences, each in batches of
    its own batch size, and add up their sums."""

    def __init__(self, val_data, tokenizer, context_length, config, rank, world, device, ddp):
        self.sequences = eval_sequences(val_data, context_length, config.eval_tokens)[rank::world]
        self.batch_size = config.batch_size // world
        self.token_bytes = torch.tensor(token_bytes(tokenizer), device=device)
        self.device, self.ddp = device, ddp

    @torch.no_grad()
    def __call__(self, model, autocast) -> tuple[float, float, int]:
        """(loss in nats per token, bits per byte, tokens). Bits per byte do not depend on the
        tokenizer: the summed loss of the targets that are text, in bits, over their bytes;
        special tokens count in neither."""
        model.eval()
        sums = torch.zeros(4, device=self.device, dtype=torch.float64)  # loss, targets, loss on text, text bytes
        for i in range(0, len(self.sequences), self.batch_size):
            batch = torch.from_numpy(self.sequences[i : i + self.batch_size]).to(self.device).long()
            targets = batch[:, 1:]
            with autocast:
                losses = model.token_losses(batch[:, :-1], targets)
            nbytes = self.token_bytes[targets]
            sums[0] += losses.sum(dtype=torch.float64)  # all of it stays on the device: no sync per batch
            sums[1] += targets.numel()
            sums[2] += (losses * (nbytes > 0)).sum(dtype=torch.float64)
            sums[3] += nbytes.sum(dtype=torch.float64)
        if self.ddp:
            dist.all_reduce(sums)
        loss_sum, count, text_loss, text_bytes = sums.tolist()
        return loss_sum / count, text_loss / math.log(2) / max(text_bytes, 1), int(count)


def token_bytes(tokenizer):
    """The length in bytes of each token's text; 0 for special tokens, which stand for no text."""
    special = set(tokenizer.special_tokens.values())
    return [0 if i in special else len(b) for i, b in enumerate(tokenizer.vocab)]


def unigram_comparison(val_loss, val_bpb, entropy):
    """The final validation loss beside `entropy`, the unigram entropy of the training tokens
    (None: unknown)."""
    line = f"final validation loss {val_loss:.4f} nats/token, {val_bpb:.4f} bits/byte"
    if entropy is not None:
        gap = f"{entropy - val_loss:.4f} below" if val_loss <= entropy else f"{val_loss - entropy:.4f} above"
        line += (f"; {gap} the unigram entropy of the training tokens ({entropy:.4f}: the loss of a model that "
                 f"knows only token frequencies)")
    return line
