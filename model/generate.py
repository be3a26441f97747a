"""Autoregressive decoding with a KV cache: temperature, top-k and nucleus (top-p) sampling.

The prompt is run once (prefill); its cache is copied for every sample of the batch, and
each step then feeds one new token per sample. When the context is full the window slides:
the cache is rebuilt from the last half of the context, so a long generation costs one
prefill every context/2 tokens rather than one per token.

The model and the choice of the next token run on the model's device. The random numbers come
from a CPU generator, one uniform number per sample and token, and the sums that sampling takes
(the nucleus's mass, the draw's cumulative distribution) are taken over probabilities in fixed
point: integers add exactly in any order, so a seed gives the same draws from the same
probabilities on every device, and on CUDA under --deterministic too (torch has no deterministic
floating-point cumsum there). A printed seed reproduces a sample anywhere, up to the devices'
differences in the logits themselves (bf16's rounding on CUDA may reorder candidates of nearly
equal probability).

On a CPU the model stays float32 and each step is eager. On CUDA it computes in bf16 (autocast;
the KV cache is bf16 too), and a step (the model's one token and the choice of the next) is one
CUDA graph, captured at its first use and replayed: eager, a small model's step waits for the host
to launch its few hundred kernels. The host queues the next step before it waits for this one's
tokens, so the device never waits for the host between steps. A Decoder keeps its last graph and
cache for the next generation of the same shape and settings (a Sampler's); `generate` decodes once.
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

# The scale of the fixed-point probabilities: a probability is an integer count of 2**-52, so that
# a distribution's total stays below 2**53, where float64 holds every integer.
FIXED = 2.0**52


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
        counts = _fixed(sorted_probs)
        mass = counts.cumsum(-1)
        before = mass - counts  # mass of the more likely tokens
        keep_sorted = before < top_p * mass[..., -1:]
        keep_sorted[..., 0] = True
        keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
        probs = torch.where(keep, probs, 0.0)
    return probs / probs.sum(-1, keepdim=True)


def _fixed(probs: torch.Tensor) -> torch.Tensor:
    """Probabilities as int64 counts of 1 / FIXED."""
    return (probs.double() * FIXED).round().long()


def _sorted_descending(probs):
    """`torch.sort(probs, descending=True)` along the last dim. On a CPU numpy's quicksort does it
    about 6x faster for a row of a vocabulary (0.08 vs 0.45 ms for 10,000), a third of a small
    model's decoding step."""
    if probs.device.type != "cpu":
        return torch.sort(probs, dim=-1, descending=True)
    order = torch.from_numpy(np.argsort(-probs.numpy(), axis=-1))
    return probs.gather(-1, order), order


def uniforms(generator: torch.Generator, rows: int, device: torch.device) -> torch.Tensor:
    """One uniform number in [0, 1) per row, (rows, 1) float64 on `device`, drawn from the CPU
    `generator`: the same numbers for a seed on every device."""
    u = torch.rand(rows, 1, generator=generator, dtype=torch.float64)
    return u.pin_memory().to(device, non_blocking=True) if device.type == "cuda" else u  # pageable would wait


def choose(
    logits: torch.Tensor, temperature: float, top_p: float, top_k: int | None, u: torch.Tensor | None
) -> torch.Tensor:
    """One token per row of `logits` (batch, vocab), on their device: greedy at temperature 0,
    else drawn with the uniform numbers `u` (batch, 1). No host sync: a CUDA graph captures it."""
    if temperature == 0:
        return logits.argmax(-1)
    assert u is not None, "sampling draws with uniform numbers"
    # Shifted so the largest logit is 0: at a temperature near 0 the others go to -inf, not the
    # largest to +inf (inf - inf would make every probability NaN).
    logits = logits.float()
    probs = filter_probs(torch.softmax((logits - logits.amax(-1, keepdim=True)) / temperature, dim=-1), top_p, top_k)
    return _draw(probs, u)


def next_tokens(
    logits: torch.Tensor, temperature: float, top_p: float, top_k: int | None, generator: torch.Generator | None
) -> torch.Tensor:
    """`choose` with a row's uniform number drawn from the CPU `generator` (not used at temperature 0)."""
    u = None if temperature == 0 or generator is None else uniforms(generator, logits.shape[0], logits.device)
    return choose(logits, temperature, top_p, top_k, u)


def _draw(probs, u):
    """An index per row, drawn with the row's probabilities: where the uniform number `u` falls
    in the row's cumulative distribution (as torch.multinomial, at a tenth of its cost), in fixed
    point: the first index whose cumulative count passes u times the total."""
    cdf = _fixed(probs).cumsum(-1)
    total = cdf[..., -1:]
    target = torch.minimum((u * total).long(), total - 1)  # u < 1, but u * total may round up to it
    return torch.searchsorted(cdf, target, right=True).squeeze(-1)


def generate(model: TransformerLM, prompt: Sequence[int], **settings) -> Iterator[torch.Tensor]:
    """Decoder(model).generate(prompt, ...): one generation, nothing kept for the next."""
    return Decoder(model).generate(prompt, **settings)


class Decoder:
    """Generations from one model, one at a time (not thread-safe). On CUDA it keeps its last
    step (graph and KV cache) for the next generation of the same batch, length and settings."""

    def __init__(self, model: TransformerLM) -> None:
        self.model = model
        self.device = next(model.parameters()).device
        self.last: tuple[tuple, Step] | None = None

    @torch.inference_mode()
    def generate(
        self,
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
        context = self.model.config.context_length
        generator = torch.Generator().manual_seed(seed)
        draw = (lambda: None) if temperature == 0 else (lambda: uniforms(generator, num_samples, self.device))
        sampling = (temperature, top_p, top_k)
        pick = functools.partial(choose, temperature=temperature, top_p=top_p, top_k=top_k)
        step = self._step(num_samples, min(len(prompt) + max_new_tokens, context), sampling, pick)
        cache = step.cache
        prefill = KVCache(self.model.config, 1, capacity=len(prompt))
        first = logits_of_last(self.model, torch.tensor([list(prompt)], device=self.device), prefill)
        cache.fill(prefill)
        step.ids.copy_(pick(first.expand(num_samples, -1), u=draw())[:, None])
        tokens = Reader(step.ids)
        history = [torch.tensor(prompt).expand(num_samples, -1)]  # for the slides: the window's tokens
        for made in range(1, max_new_tokens + 1):
            full = cache.length == context
            if made < max_new_tokens and not full:
                step(draw())  # queued before this step's tokens are read: the device goes on meanwhile
                tokens.queue()
            token = tokens.take()
            history.append(token[:, None])
            yield token
            if made < max_new_tokens and full:  # slide the window by half, refilling the cache in place
                window = torch.cat(history, dim=1)[:, -(context // 2) :]
                history = [window]
                cache.length = 0
                logits = logits_of_last(self.model, window.to(self.device), cache)
                step.ids.copy_(pick(logits, u=draw())[:, None])
                tokens.queue()

    def _step(self, rows: int, capacity: int, sampling: tuple, pick: Callable) -> Step:
        """The step for this generation: the last one if it is for the same shapes and `sampling`
        settings, else a new one (and its cache)."""
        key = (rows, capacity, *sampling)
        if self.last is None or self.last[0] != key:
            self.last = None  # the old graph and cache go before the new ones are made
            cache = KVCache(self.model.config, rows, capacity=capacity)
            self.last = key, Step(self.model, cache, pick, fixed_shapes=graphed(self.model, self.device))
        return self.last[1]


class Step:
    """One decoding step of a batch: the model's logits for the tokens in `ids` (rows, 1) after
    the cache's positions, and the next tokens chosen (`pick`) into `ids`.

    With `fixed_shapes` (on CUDA) the step takes its position from a device tensor and attends over
    the whole capacity with the later positions masked (KVCache.at): the same shapes, addresses and
    kernels at every position, so that a CUDA graph captured at the first step replays it anywhere,
    also after the window slides and refills the cache in place. Otherwise (a CPU) a plain step
    over the positions filled."""

    def __init__(self, model: TransformerLM, cache: KVCache, pick: Callable, fixed_shapes: bool) -> None:
        self.model, self.cache, self.pick, self.fixed_shapes = model, cache, pick, fixed_shapes
        device = next(model.parameters()).device
        self.ids = torch.zeros(cache.shape[1], 1, dtype=torch.long, device=device)
        self.position = torch.zeros(1, dtype=torch.long, device=device)
        self.u = torch.zeros(cache.shape[1], 1, dtype=torch.float64, device=device)
        # Not under deterministic algorithms (a --deterministic run's samples): torch swaps in other
        # kernels for some ops there (scatter's), which are not known to be capturable.
        self.captures = fixed_shapes and device.type == "cuda" and not torch.are_deterministic_algorithms_enabled()
        self.graph: torch.cuda.CUDAGraph | None = None

    def __call__(self, u: torch.Tensor | None) -> None:
        """Feed `ids` at the cache's length, choose the next tokens into `ids` with the uniform
        numbers `u` (None: greedy), and advance the cache."""
        if u is not None:
            self.u.copy_(u, non_blocking=True)
        if not self.fixed_shapes:
            self._plain()  # the model advances the cache
            return
        self.position.fill_(self.cache.length)
        if self.captures and self.graph is None:
            self._capture()
        if self.graph is not None:
            self.graph.replay()
        else:
            self._at_position()
        self.cache.length += 1

    def _plain(self) -> None:
        self.ids.copy_(self.pick(logits_of_last(self.model, self.ids, self.cache), u=self.u)[:, None])

    def _at_position(self) -> None:
        with self.cache.at(self.position):
            logits = logits_of_last(self.model, self.ids, self.cache)
        self.ids.copy_(self.pick(logits, u=self.u)[:, None])

    def _capture(self) -> None:
        """Run the step once on a side stream (as capture asks), then capture it. The run writes
        `ids`, which the replay that follows must read as they were."""
        ids = self.ids.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self._at_position()
        torch.cuda.current_stream().wait_stream(side)
        self.ids.copy_(ids)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, capture_error_mode="thread_local"):
            self._at_position()


class Reader:
    """The host's copies of a device tensor (the step's tokens), queued behind the work that made
    them and taken in order: on CUDA a copy into pinned memory, two in flight at most, each read
    once its event has passed; on a CPU the tensor itself, copied at once."""

    def __init__(self, source: torch.Tensor) -> None:
        self.source, self.cuda = source, source.is_cuda
        self.slots = (
            [torch.empty(source.shape[0], dtype=source.dtype).pin_memory() for _ in range(2)] if self.cuda else []
        )
        self.queued: list[tuple[torch.Tensor, torch.cuda.Event | None]] = []
        self.turn = 0
        self.queue()

    def queue(self) -> None:
        if not self.cuda:
            self.queued.append((self.source[:, 0].clone(), None))
            return
        slot = self.slots[self.turn]
        self.turn ^= 1
        slot.copy_(self.source[:, 0], non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        self.queued.append((slot, event))

    def take(self) -> torch.Tensor:
        values, event = self.queued.pop(0)
        if event is not None:
            event.synchronize()  # the step's one wait for the device
            values = values.clone()  # the slot is written again two copies later
        return values


def logits_of_last(model: TransformerLM, ids: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """The float32 logits (B, vocab) of the last of `ids` (B, T) that continue `cache`: on CUDA
    computed in bf16 under autocast, entered for the call alone (a caller's code between steps
    must not run under it). No cache of cast weights: a CUDA graph's capture cannot keep one
    (torch.cuda.graph's docs); decoding_weights casts them once instead."""
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


def decoding_weights(model: TransformerLM) -> TransformerLM:
    """A model loaded to decode under bf16 autocast (on CUDA), its linear layers' weights and biases
    cast to bf16 once, as autocast casts them at every step: the same products and logits, without
    reading the float32 weights and writing their bf16 copies at each step (a small model's step is
    bound by memory). Norms and embeddings stay float32, as autocast leaves them; a head tied to the
    embedding gets a bf16 copy of its own."""
    if model.lm_head.weight is model.embedding.weight:
        model.lm_head.weight = nn.Parameter(model.embedding.weight.detach().clone(), requires_grad=False)
    for module in model.modules():
        if isinstance(module, nn.Linear):
            module.to(torch.bfloat16)
    return model
