"""Multiple-choice scoring as llm.c's dev/data/hellaswag.py scores HellaSwag: each choice's tokens
follow the context's (the two encoded apart), the model reads the whole row, and only the
choice's tokens are scored. `acc` picks the choice of the lowest summed loss, `acc_norm` the
lowest mean loss per choice token (lm-evaluation-harness's acc_norm divides by the choice's
length in bytes instead: the numbers differ).

The context is framed as `sample` frames a prompt (model/generate.py, prompt_ids): after the
token the checkpoint puts before a text, for gptkit's own checkpoints the end-of-text id, which
starts every training document. A row longer than the model's context is not what llm.c meets
(GPT-2's 1,024 tokens hold every HellaSwag item); here the context is cut on the left, the same
for every choice of the item, until the longest choice fits, and the cut items are counted.

`hellaswag_accuracy` and `choice_accuracy` are `gptkit eval hellaswag` and `eval choice` as a
library:

    from gptkit.eval import choice_accuracy

    result = choice_accuracy("runs/demo/latest", "mine.jsonl", quiet=True)
    print(f"acc {result.acc:.4f}, acc_norm {result.acc_norm:.4f} ({result.items} items)")
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import NamedTuple

import numpy as np
import torch

from gptkit.model.generate import prompt_ids
from gptkit.model.model import TransformerLM
from gptkit.shared.errors import InputError, SettingError
from gptkit.shared.files import looked_up
from gptkit.shared.progress import Progress
from gptkit.tokenizer import Tokenizer

from .loss import Autocast, on_device
from .results import check_out, recorded, write_results
from .scorer import Checkpoint, StrPath, check_count, checkpoint_path, scorer_of
from .tasks import HELLASWAG_FILE, Item, read_choice, read_hellaswag

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Accuracy:
    """The share of the items whose right choice the model picks, by either rule."""

    acc: float  # picking the choice of the lowest summed loss
    acc_norm: float  # picking the lowest mean loss per choice token
    items: int  # items scored
    cut: int  # items whose context was cut on the left to fit the model's context


def hellaswag_accuracy(
    checkpoint: Checkpoint,
    file: StrPath = HELLASWAG_FILE,
    *,
    limit: int | None = None,
    batch_size: int = 32,
    device: str = "auto",
    threads: int | None = None,
    out: StrPath | None = None,
    overwrite: bool = False,
    quiet: bool = False,
) -> Accuracy:
    """The accuracy of `checkpoint` (a checkpoint directory, or a Scorer) on HellaSwag's jsonl
    `file` (tasks.py: download_hellaswag puts the validation set at the default), its first
    `limit` items (None: all). `batch_size` rows (an item's context and one choice) a forward
    pass; `device`, `threads`: as Scorer.load; `out`: a results file to write too (results.py),
    replacing only an earlier one unless `overwrite`; `quiet`: no progress line on stderr."""
    check_count("limit", limit)
    check_count("batch_size", batch_size)
    if not looked_up(file, "file").is_file():
        hint = " (fetch it with `gptkit eval download hellaswag`)" if str(file) == HELLASWAG_FILE else ""
        raise SettingError("file", f"{file}: no such file{hint}")
    return _accuracy(
        "hellaswag", checkpoint, file, read_hellaswag(file, limit), batch_size, device, threads, out, overwrite, quiet
    )


def choice_accuracy(
    checkpoint: Checkpoint,
    file: StrPath,
    *,
    limit: int | None = None,
    batch_size: int = 32,
    device: str = "auto",
    threads: int | None = None,
    out: StrPath | None = None,
    overwrite: bool = False,
    quiet: bool = False,
) -> Accuracy:
    """The accuracy of `checkpoint` on multiple-choice items of your own, a jsonl `file` of one
    {"context": text, "choices": [texts], "label": index} a line (tasks.py, read_choice), scored
    as HellaSwag is: each choice follows its context as written. The other arguments: as
    hellaswag_accuracy."""
    check_count("limit", limit)
    check_count("batch_size", batch_size)
    if not looked_up(file, "file").is_file():
        raise SettingError("file", f"{file}: no such file")
    return _accuracy(
        "choice", checkpoint, file, read_choice(file, limit), batch_size, device, threads, out, overwrite, quiet
    )


def _accuracy(
    task, checkpoint, file, items: list[Item], batch_size, device, threads, out, overwrite, quiet
) -> Accuracy:
    """The Accuracy of the `items` read from `file`, with a progress line named `task`."""
    check_out(out, overwrite, [("file", file), ("checkpoint", checkpoint_path(checkpoint))])
    scorer = scorer_of(checkpoint, device, threads)
    framing = frame(items, scorer.tokenizer, scorer.bos_id, scorer.context_length, file)
    progress = Progress(task, "items", total=len(items), quiet=quiet)
    scores = score(scorer.model, framing.items, batch_size, scorer.autocast, scorer.each_batch(progress))
    progress.close()
    if not scores.finite():
        raise scorer.refusal(
            f"its losses on {file} are not all finite (its weights hold NaN or infinite values, or "
            "its computation overflows): nothing to score"
        )
    right, right_norm, count = scores.totals().tolist()
    result = Accuracy(right / count, right_norm / count, int(count), framing.cut)
    if out is not None:
        write_results(
            out,
            {
                "task": task,
                "checkpoint": recorded(scorer.checkpoint, "checkpoint"),
                "file": recorded(file, "file"),
                **asdict(result),
            },
        )
    return result


@dataclass(frozen=True)
class Framed:
    """An item as token ids: every row is `prompt` + one of `choices`."""

    prompt: list[int]
    choices: list[list[int]]
    label: int


class Framing(NamedTuple):
    items: list[Framed]
    cut: int  # items whose context was cut on the left to fit


def frame(
    items: Sequence[Item], tokenizer: Tokenizer, bos_id: int | None, context_length: int, path: StrPath
) -> Framing:
    """`items` (eval/tasks.py) as token ids for a model of `context_length`; an item that cannot
    fit, or has nothing to predict its first choice token from, is an InputError naming its line
    of `path`."""
    framed, cut = [], 0
    for item in items:
        prompt = prompt_ids(tokenizer, item.context, bos_id)
        choices = [tokenizer.encode(choice, allowed_special=()) for choice in item.choices]
        room = context_length + 1 - max(map(len, choices))  # the model reads every token of a row but its last
        if room < 1:
            longest = max(range(len(choices)), key=lambda i: len(choices[i]))
            raise InputError(
                f"{path} line {item.line}: choice {longest} has {len(choices[longest]):,} tokens, leaving no "
                f"room for the context in the model's context of {context_length:,}"
            )
        if not prompt:
            raise InputError(
                f"{path} line {item.line}: an empty context, and the checkpoint records no token to start "
                "a text with (no end-of-text token, no bos_id)"
            )
        if len(prompt) > room:
            prompt, cut = prompt[-room:], cut + 1
        framed.append(Framed(prompt, choices, item.label))
    if cut:
        log.warning(
            f"{path}: {cut:,} of {len(items):,} items are longer than the model's context of {context_length:,} "
            "tokens: their contexts were cut on the left to fit"
        )
    return Framing(framed, cut)


class Scores(NamedTuple):
    """Per item and choice, on the model's device: the summed loss of the choice's tokens and
    their number (inf and 0 where an item has fewer choices than the most); the right choices."""

    sums: torch.Tensor  # (items, most choices), float64
    counts: torch.Tensor  # (items, most choices), float64
    labels: torch.Tensor  # (items,)

    def predictions(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(the choice of the lowest summed loss, of the lowest mean loss per token), per item;
        ties go to the first."""
        return self.sums.argmin(1), (self.sums / self.counts).argmin(1)

    def finite(self) -> bool:
        """Whether every choice's loss is a number: an argmin over NaN (a model whose weights hold
        one) picks whatever it meets first, a score of nothing."""
        return bool((self.sums.isfinite() | (self.counts == 0)).all())

    def totals(self) -> torch.Tensor:
        """[right by acc, right by acc_norm, items], a float64 tensor for the ranks to add up."""
        acc, acc_norm = self.predictions()
        return torch.stack(
            [
                (acc == self.labels).sum(),
                (acc_norm == self.labels).sum(),
                torch.tensor(len(self.labels), device=self.labels.device),
            ]
        ).double()


@torch.no_grad()
def score(
    model: TransformerLM,
    items: Sequence[Framed],
    batch_size: int,
    autocast: Autocast,
    each_batch: Callable[[int], None] | None = None,
) -> Scores:
    """The losses of every choice of `items` (Framed), `batch_size` rows (item, choice) a forward
    pass, right-padded: a causal model's positions do not see the padding after them.
    `each_batch(items done)` after each batch."""
    device = next(model.parameters()).device
    rows = [
        (i, j, item.prompt + choice, len(item.prompt))
        for i, item in enumerate(items)
        for j, choice in enumerate(item.choices)
    ]
    last_row = np.cumsum([len(item.choices) for item in items])  # of each item, + 1
    losses = []
    for b in range(0, len(rows), batch_size):
        batch = rows[b : b + batch_size]
        width = max(len(ids) for _, _, ids, _ in batch) - 1
        inputs = np.zeros((len(batch), width), np.int64)
        targets = np.full((len(batch), width), -1, np.int64)  # -1: not scored (token_losses gives it 0)
        for r, (_, _, ids, start) in enumerate(batch):
            inputs[r, : len(ids) - 1] = ids[:-1]
            targets[r, start - 1 : len(ids) - 1] = ids[start:]
        with autocast:
            row_losses = model.token_losses(on_device(inputs, device), on_device(targets, device))
        losses.append(row_losses.sum(1, dtype=torch.float64))
        if each_batch:
            each_batch(bisect.bisect_right(last_row, b + len(batch)))
    most = max((len(item.choices) for item in items), default=1)
    sums = torch.full((len(items), most), torch.inf, dtype=torch.float64, device=device)
    counts = torch.zeros((len(items), most), dtype=torch.float64, device=device)
    if rows:
        where = tuple(torch.tensor(index, device=device) for index in zip(*[(i, j) for i, j, *_ in rows]))
        sums[where] = torch.cat(losses)
        counts[where] = torch.tensor([len(ids) - start for *_, ids, start in rows], dtype=torch.float64, device=device)
    return Scores(sums, counts, torch.tensor([item.label for item in items], dtype=torch.long, device=device))
