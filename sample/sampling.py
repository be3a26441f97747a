"""A checkpoint's continuations of a prompt, as text that streams: what `gptkit sample` prints,
for any caller.

    from gptkit.sample.sampling import Settings, sample

    samples = sample("runs/demo/latest", "Once upon a time", Settings(max_new_tokens=50, seed=1))
    for i, piece in samples:  # sample i's text, piece by piece as it is generated
        print(piece, end="")

A Sampler keeps the model loaded for one call of its `sample` after another (a server's). Its
`chat` answers a list of messages ({"role", "content"}) with the checkpoint's chat template
(tokenizer/chat.py: the one it carries beside its tokenizer.json, else gptkit's own where its
tokenizer has the chat tokens), the reply ending at the template's end of turn.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import random
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

from gptkit.model.checkpoint import TOKENIZER_FILE, bos_id, checkpoint_directory, eot_id, load_model
from gptkit.model.generate import Decoder, decoding_weights, prompt_ids
from gptkit.model.info import describe, sampling_memory
from gptkit.runtime.device import Memory, resolve_device
from gptkit.runtime.threads import torch_threads
from gptkit.shared.errors import InputError, SettingError
from gptkit.shared.files import StrPath
from gptkit.tokenizer.chat import ChatTemplate

from .settings import Settings
from .stream import TextStream

log = logging.getLogger(__name__)


# A chat's messages: [{"role": ..., "content": ...}, ...], as a chat template takes them.
Messages = Sequence[Mapping[str, Any]]


def sample(
    checkpoint: StrPath,
    prompt: str,
    settings: Settings = Settings(),
    *,
    device: str = "auto",
    threads: int | None = None,
) -> Samples:
    """The samples of `prompt` by the checkpoint directory `checkpoint`, on `device` ("auto",
    "cpu", "cuda"), with `threads` of torch's CPU kernels (None: measured under load)."""
    return Sampler(checkpoint, device=device, threads=threads).sample(prompt, settings)


def chat(
    checkpoint: StrPath,
    messages: Messages,
    settings: Settings = Settings(),
    *,
    device: str = "auto",
    threads: int | None = None,
) -> Samples:
    """The assistant's replies to `messages` ([{"role", "content"}, ...]) by the checkpoint
    directory `checkpoint`, rendered with its chat template (Sampler.chat)."""
    return Sampler(checkpoint, device=device, threads=threads).chat(messages, settings)


class Sampler:
    """A checkpoint loaded to sample from (see `sample`)."""

    def __init__(self, checkpoint: StrPath, *, device: str = "auto", threads: int | None = None) -> None:
        self.checkpoint, self.device = checkpoint, resolve_device(device)
        self.threads = torch_threads(threads, self.device)
        self.model, self.tokenizer = load_model(checkpoint, self.device)
        if self.device.type == "cuda":  # where decoding computes under bf16 autocast
            decoding_weights(self.model)
        self.decoder = Decoder(self.model)  # keeps its CUDA graph for the next call of the same shape
        self.bos_id = bos_id(checkpoint, self.tokenizer)  # what a text starts with
        self.eot_id = eot_id(checkpoint, self.tokenizer)  # the token that stops a sample
        self.template: ChatTemplate | None
        try:
            self.template = ChatTemplate.beside(checkpoint_directory(checkpoint) / TOKENIZER_FILE)
        except InputError as e:  # none, or one that cannot be read: `chat` refuses, and says why
            self.template, self.no_template = None, e

    def prompt_ids(self, prompt: str) -> list[int]:
        """`prompt` framed as the model saw its documents (generate.prompt_ids)."""
        ids = prompt_ids(self.tokenizer, prompt, self.bos_id)
        if not ids:
            raise SettingError(
                "prompt",
                f"is empty and {self.checkpoint} records no token to start a text with "
                "(no end-of-text token, no bos_id)",
            )
        return ids

    def chat_ids(self, messages: Messages) -> list[int]:
        """`messages` rendered with the checkpoint's chat template, up to the assistant's turn."""
        if self.template is None:
            raise SettingError("chat", f"is refused for {self.checkpoint}: {self.no_template}")
        return self.template.prompt_ids(self.tokenizer, messages)

    def sample(self, prompt: str, settings: Settings = Settings()) -> Samples:
        """The samples of `prompt` (prompt_ids); see `sample_ids`."""
        return self.sample_ids(self.prompt_ids(prompt), settings)

    def chat(self, messages: Messages, settings: Settings = Settings()) -> Samples:
        """The assistant's replies to `messages` (chat_ids), each ending at the template's end of
        turn or at one of `settings.stops`."""
        ids = self.chat_ids(messages)
        assert self.template is not None  # chat_ids refuses a checkpoint without one
        return self.sample_ids(ids, dataclasses.replace(settings, stops=(*self.template.stops, *settings.stops)))

    def sample_ids(self, ids: Sequence[int], settings: Settings = Settings(), steps: Steps | None = None) -> Samples:
        """The samples that continue the token ids `ids`; ids longer than the context keep their
        last tokens, with a warning. `steps`: where the tokens come from (Samples); by default
        generate() here, and a batch of samples too large for the memory left beside the weights
        is then refused before any work."""
        context = self.model.config.context_length
        if len(ids) > context:
            log.warning(
                f"the prompt has {len(ids):,} tokens, more than the context of {context:,}: keeping the last "
                f"{context:,}"
            )
            ids = ids[-context:]
        n = settings.num_samples
        if steps is None:
            Memory(
                sampling_memory(self.model.config, n, len(ids) + settings.max_new_tokens),
                self.device,
                "num_samples",
                f"{n:,} samples of {describe(self.model.config)}",
                "ask for fewer --num-samples",
            ).check()
        return Samples(self, ids, settings, steps)


class Tokens(Iterator[Any], Protocol):
    """The samples' next tokens, a (num_samples,) CPU tensor per step, until `close()`."""

    def close(self) -> None: ...


class Steps(Protocol):
    """Where a batch's tokens come from, given the prompt's ids, the settings and the seed:
    generate() by default; a server's batch of requests (serve/batching.py)."""

    def __call__(self, ids: Sequence[int], settings: Settings, seed: int) -> Tokens: ...


class Samples:
    """Samples being generated, all of a batch at once. Iterating gives (i, piece): a piece of
    sample i's text as soon as it is safe to show (whole characters, nothing of a stop string);
    a sample ends at the end-of-text token, at a stop string or after max_new_tokens. `seed`
    gives the same samples again; `texts()`, each sample's whole text. Once read, `tokens[i]`: the
    tokens generated for sample i (its end-of-text token included); `finish_reasons[i]`: "stop"
    (end-of-text or a stop string), "length" (max_new_tokens) or "abort" (its steps ended before
    either: a server's batch stopped at shutdown; vLLM's word), what a server reports. `steps`:
    where the tokens come from (Steps); `close()` stops a reader that wants no more."""

    def __init__(self, sampler: Sampler, ids: Sequence[int], settings: Settings, steps: Steps | None = None) -> None:
        self.seed = random.randrange(2**31) if settings.seed is None else settings.seed
        self._pieces: list[list[str]] = [[] for _ in range(settings.num_samples)]
        self.tokens = [0] * settings.num_samples
        self.finish_reasons = ["length"] * settings.num_samples
        self._steps = (steps or functools.partial(_generated, sampler.decoder))(ids, settings, self.seed)
        self._iterator = self._generate(sampler, settings)

    def __iter__(self) -> Iterator[tuple[int, str]]:
        return self._iterator  # once: the samples are generated as they are read

    def close(self) -> None:
        self._iterator.close()
        self._steps.close()

    def texts(self) -> list[str]:
        """Each sample's text, generating what is left of it."""
        for _ in self:
            pass
        return ["".join(pieces) for pieces in self._pieces]

    def _generate(self, sampler, settings):
        streams = [TextStream(sampler.tokenizer, settings.stops) for _ in range(settings.num_samples)]
        finished = [False] * settings.num_samples
        started = time.perf_counter()
        for step in self._steps:
            sampler.threads.record(time.perf_counter() - started)  # a token's time: the count for the next
            for i, token in enumerate(step.tolist()):
                if finished[i]:
                    continue
                self.tokens[i] += 1
                if token == sampler.eot_id:
                    finished[i], self.finish_reasons[i] = True, "stop"
                    continue
                yield from self._piece(i, streams[i].add(token))
                finished[i] = streams[i].done
                if finished[i]:
                    self.finish_reasons[i] = "stop"
            if all(finished):
                break
            started = time.perf_counter()  # the reader's time between steps is not the token's
        for i, stream in enumerate(streams):
            if not finished[i] and self.tokens[i] < settings.max_new_tokens:
                self.finish_reasons[i] = "abort"
            if not stream.done:
                yield from self._piece(i, stream.finish())

    def _piece(self, i, text):
        if text:
            self._pieces[i].append(text)
            yield i, text


def _generated(decoder, ids, settings, seed):
    return decoder.generate(
        ids,
        max_new_tokens=settings.max_new_tokens,
        num_samples=settings.num_samples,
        temperature=settings.temperature,
        top_p=settings.top_p,
        top_k=settings.top_k,
        seed=seed,
    )
