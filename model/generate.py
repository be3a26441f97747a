"""Autoregressive decoding with a KV cache: temperature, top-k and nucleus (top-p) sampling.

The prompt is run once (prefill); its cache is copied for every sample of the batch, and
each step then feeds one new token per sample. When the context is full the window slides:
the cache is rebuilt from the last half of the context, so a long generation costs one
prefill every context/2 tokens rather than one per token.

The model and the choice of the next token run on the model's device; the host waits for it
once a step, for the tokens it yields. On CUDA the model computes in bf16 (autocast, which casts
float32 weights each step; its KV cache is bf16 too): float32 reads twice the bytes and has no
fused attention kernel for grouped-query attention; and each one-token step is a CUDA graph,
captured once and replayed (GraphedStep). On a CPU it stays float32 and eager. The random numbers come from a CPU generator: a seed gives
the same draws on every device, so a printed seed reproduces a sample anywhere, up to the
devices' differences in the logits themselves (bf16's rounding on CUDA may reorder candidates
of nearly equal probability).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn as nn

from .model import KVCache, TransformerLM

if TYPE_CHECKING:
    from gptkit.tokenizer import Tokenizer


def prompt_ids(tokenizer: Tokenizer, text: str, bos_id: int | None) -> list[int]:
    """The ids of a text framed as the model saw its documents: `bos_id` first, where there is one
    (checkpoint.bos_id: for gptkit's own checkpoints the end-of-text token, which ends, and so
    starts, every training document; an imported model's own BOS, or none), then the text's ids
    (special-token strings in it are text)."""
    return ([bos_id] if bos_id is not None else []) + tokenizer.encode(text, allowed_special=())


def filter_probs(probs: torch.Tensor, top_p: float = 1.0, top_k: int | None = None) -> torch.Tensor:
    """Keep the `top_k` most likely tokens, then the smallest set of the most likely whose
    probabilities add up to at least `top_p` (never fewer than one); renormalize.
    `probs` is (..., vocab)."""
    if top_k is not None and top_k < probs.shape[-1]:
        kth = torch.topk(probs, top_k, dim=-1).values[..., -1:]
        probs = torch.where(probs >= kth, probs, 0.0)
    if top_p < 1.0:
        sorted_probs, order = _sorted_descending(probs)
        before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs  # mass of the more likely tokens
        keep_sorted = before < top_p * sorted_probs.sum(-1, keepdim=True)
        keep_sorted[..., 0] = True
        keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
        probs = torch.where(keep, probs, 0.0)
    return probs / probs.sum(-1, keepdim=True)


def _sorted_descending(probs):
    """`torch.sort(probs, descending=True)` along the last dim. On a CPU numpy's quicksort does it
    about 6x faster for a row of a vocabulary (0.08 vs 0.45 ms for 10,000), a third of a small
    model's decoding step."""
    if probs.device.type != "cpu":
        return torch.sort(probs, dim=-1, descending=True)
    order = torch.from_numpy(np.argsort(-probs.numpy(), axis=-1))
    return probs.gather(-1, order), order


def next_tokens(
    logits: torch.Tensor, temperature: float, top_p: float, top_k: int | None, generator: torch.Generator
) -> torch.Tensor:
    """One token per row of `logits` (batch, vocab), on their device: greedy at temperature 0,
    else sampled with uniform numbers from the CPU `generator`."""
    if temperature == 0:
        return logits.argmax(-1)
    # Shifted so the largest logit is 0: at a temperature near 0 the others go to -inf, not the
    # largest to +inf (inf - inf would make every probability NaN).
    logits = logits.float()
    probs = filter_probs(torch.softmax((logits - logits.amax(-1, keepdim=True)) / temperature, dim=-1), top_p, top_k)
    return _draw(probs, generator)


def _draw(probs, generator):
    """An index per row, drawn with the row's probabilities: the inverse of its cumulative
    distribution at one uniform number (as torch.multinomial, at a tenth of its cost)."""
    cdf = probs.double().cumsum(-1)
    u = torch.rand(*probs.shape[:-1], 1, generator=generator, dtype=cdf.dtype)
    if cdf.is_cuda:  # from pinned memory: a pageable copy would wait for the device's queue
        u = u.pin_memory().to(cdf.device, non_blocking=True)
    u = u * cdf[..., -1:]
    index = torch.searchsorted(cdf, u, right=True).squeeze(-1)
    last_possible = probs.shape[-1] - 1 - (probs.flip(-1) > 0).int().argmax(-1)  # u may round up to the total
    return torch.minimum(index, last_possible)


@torch.inference_mode()
def generate(
    model: TransformerLM,
    prompt: Sequence[int],
    *,
    max_new_tokens: int,
    num_samples: int = 1,
    temperature: float = 0.8,
    top_p: float = 0.9,
    top_k: int | None = None,
    seed: int = 0,
) -> Iterator[torch.Tensor]:
    """Yield the next token of each of `num_samples` continuations of `prompt` (a list of ids,
    at most the context length), a (num_samples,) CPU tensor per step. Stop iterating to stop.
    The KV cache holds the positions the prompt and the new tokens need, at most the context."""
    config, device = model.config, next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    last_logits = functools.partial(logits_of_last, model)
    window = torch.tensor(prompt, device=device).unsqueeze(0).expand(num_samples, -1)
    cache = KVCache(config, 1, capacity=len(prompt) + max_new_tokens)
    logits = last_logits(window[:1], cache).expand(num_samples, -1)
    cache.expand(num_samples)
    step = (
        GraphedStep(last_logits, cache) if graphed(model, device) else lambda token: last_logits(token[:, None], cache)
    )
    for _ in range(max_new_tokens):
        token = next_tokens(logits, temperature, top_p, top_k, generator)
        yield token.cpu()  # the step's one wait for the device
        window = torch.cat([window, token[:, None]], dim=1)[:, -config.context_length :]
        if cache.length == config.context_length:  # full: slide the window by half
            window = window[:, -(config.context_length // 2) :]
            cache.length = 0  # refilled in place: a captured step keeps the cache's addresses
            logits = last_logits(window, cache)
        else:
            logits = step(token)


def logits_of_last(model: TransformerLM, ids: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """The float32 logits (B, vocab) of the last of `ids` (B, T) that continue `cache`: on CUDA
    computed in bf16 under autocast, entered for the call alone (a caller's code between steps
    must not run under it). No cache of cast weights: a CUDA graph's capture cannot keep one
    (torch.cuda.graph's docs), and a step casts each weight once anyway."""
    autocast = (
        torch.autocast("cuda", torch.bfloat16, cache_enabled=False)
        if ids.device.type == "cuda"
        else contextlib.nullcontext()
    )
    with autocast:
        return model(ids, cache=cache, last_only=True)[0][:, -1].float()


def graphed(model: nn.Module, device: torch.device) -> bool:
    """Whether decoding steps run as CUDA graphs: on CUDA, unless the parameters are sharded
    (FSDP's hooks gather them with collectives, which a graph cannot replay)."""
    if device.type != "cuda":
        return False
    from torch.distributed.tensor import DTensor

    return not any(isinstance(p, DTensor) for p in model.parameters())


class GraphedStep:
    """A batch's one-token step as a CUDA graph: captured at the first call (after a run on a side
    stream, as capture asks), replayed at every call with the token and position copied into its
    inputs. Eager, a small model's step waits for the host to launch its few hundred kernels; a
    replay launches them at once (bench: make gpu-check's sampling row)."""

    def __init__(self, last_logits: Callable[[torch.Tensor, KVCache], torch.Tensor], cache: KVCache) -> None:
        assert cache.keys is not None, "a step follows the prefill"
        self.last_logits, self.cache = last_logits, cache
        self.graph: torch.cuda.CUDAGraph | None = None
        self.logits: torch.Tensor | None = None  # the graph's output, rewritten at each replay
        self.ids = torch.zeros(cache.shape[1], 1, dtype=torch.long, device=cache.keys.device)
        self.position = torch.zeros(1, dtype=torch.long, device=cache.keys.device)

    def __call__(self, token: torch.Tensor) -> torch.Tensor:
        self.ids.copy_(token[:, None])
        self.position.fill_(self.cache.length)
        if self.graph is None:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side), self.cache.at(self.position):
                self.last_logits(self.ids, self.cache)
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph, capture_error_mode="thread_local"), self.cache.at(self.position):
                self.logits = self.last_logits(self.ids, self.cache)
        self.graph.replay()  # writes this position's keys and values (again, at the first call)
        self.cache.length += 1
        assert self.logits is not None  # captured above
        return self.logits
