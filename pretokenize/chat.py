"""Conversations to token shards with a mask (`gptkit pretokenize --chat`): chat fine-tuning's data.

Each line of the input .jsonl files (compressed or not) is one conversation, {"messages": [{"role":
..., "content": ...}, ...]} as OpenAI's API and Hugging Face's datasets write them. Each is rendered
with the tokenizer's chat template (gptkit.tokenizer.chat: the chat_template.jinja beside its
tokenizer.json, else gptkit's own) into ids and the mask of the assistant's tokens, which the loss
counts, and is one document: the end-of-text token after it, outside the mask. Conversations go
to the validation split by the split rule (a fraction of them, evenly spaced, or the leading
ones up to a number of tokens) or --val-input. The shards carry the mask (docs/formats.md#shards),
the manifest says so ("mask": true), and the directory carries the chat template (and the token
names it renders with, tokenizer_config.json) beside its tokenizer.json, so that training, sampling and serving render as the data was rendered.
Workers render and encode jobs of conversations; the parent writes them in order, so the output
does not depend on the number of workers. Written through output.py, as encode.py's corpora are.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gptkit.shared.corpus import READ_ERRORS, decompressed, expand_inputs
from gptkit.shared.errors import InputError
from gptkit.shared.files import StrPath
from gptkit.shared.jsonfile import parse_json
from gptkit.shared.progress import Progress
from gptkit.shared.shard_set import ShardSet
from gptkit.shared.shards import MASK_DTYPE
from gptkit.tokenizer import Tokenizer
from gptkit.tokenizer.chat import TEMPLATE_FILE, ChatError, ChatTemplate

from .jobs import in_order
from .output import Encoding, Output, first_of, how_made
from .split import Split, all_to

JOB_CONVERSATIONS = 256  # conversations per worker job

Messages = list[dict[str, str]]
Job = tuple[list[tuple[str, Messages]], int]  # (where, messages) of each conversation; the bytes read so far
JobResult = tuple[np.ndarray, np.ndarray, list[int]]  # tokens, mask, each conversation's number of tokens


def encode_chat(
    inputs: Sequence[StrPath],
    tokenizer: Tokenizer,
    tokenizer_path: StrPath,
    out_dir: StrPath,
    *,
    split: Split = Split(val_fraction=0.01),
    val_inputs: Sequence[StrPath] = (),
    shard_tokens: int,
    workers: int = 1,
    eot_token: str | None,
    overwrite: bool = False,
    quiet: bool = False,
) -> dict[str, Any]:
    """Encode the conversations of the .jsonl files `inputs` (files, directories, globs) into
    shards with masks in `out_dir`; returns the manifest. With `val_inputs`, all of those are the
    validation split and all of `inputs` the training one."""
    template = ChatTemplate.beside(tokenizer_path, tokenizer)
    paths = expand_inputs(inputs)
    val_paths = expand_inputs(val_inputs) if val_inputs else []
    output = Output(
        out_dir,
        tokenizer,
        eot_token=eot_token,
        tokenizer_source=tokenizer_path,
        shard_tokens=shard_tokens,
        overwrite=overwrite,
        mask=True,
        chat_files=template.files(),
    )

    def encode() -> Encoding:
        shards = output.shards()
        counts = {"train": [0, 0], "val": [0, 0]}  # conversations, tokens
        shards.begin()
        encoder = _Encoder(tokenizer, template, output.eot_id, shards.dtype, workers)
        progress = Progress(
            "encoding", "MB", total=sum(p.stat().st_size for p in paths + val_paths), scale=1e6, quiet=quiet
        )
        if val_paths:
            for name, each in (("val", val_paths), ("train", paths)):
                encoder.write(shards, each, all_to(name), counts, progress)
        else:
            encoder.write(
                shards,
                paths,
                lambda index: "val" if split.is_val(index, counts["val"][1]) else "train",
                counts,
                progress,
            )
        progress.close()
        for name in ("train", "val"):
            if counts[name][0] == 0:
                total = counts["train"][0] + counts["val"][0]
                raise InputError(
                    f"{first_of(paths)}: {total:,} conversation(s) leave the {name} split empty; give more "
                    f"conversations{'' if val_paths else ', another --val-fraction or --val-tokens, or --val-input'}"
                )
        shards.finish_all()
        made = how_made(None if val_paths else split, paths, val_paths)
        made["chat"] = {"template": "gptkit" if template.is_gptkit else TEMPLATE_FILE, "stops": list(template.stops)}
        return counts, made

    return output.write(encode)


class _Encoder:
    """Conversations read, encoded by `workers` processes in jobs, and written in order."""

    def __init__(
        self, tokenizer: Tokenizer, template: ChatTemplate, eot_id: int | None, dtype: np.dtype, workers: int
    ) -> None:
        self.tokenizer, self.args, self.workers = tokenizer, (tokenizer, template, eot_id, dtype), workers

    def write(
        self,
        shards: ShardSet,
        paths: Sequence[Path],
        split_of: Callable[[int], str],
        counts: dict[str, list[int]],
        progress: Progress,
    ) -> None:
        """Write the conversations of `paths` to the split `split_of(index)` names, counting into `counts`."""
        index = counts["train"][0] + counts["val"][0]
        for (_, read), (tokens, mask, lengths) in self._encoded(paths):
            done = 0
            for length in lengths:
                name = split_of(index)
                shards.write(name, tokens[done : done + length], [length], mask[done : done + length])
                counts[name][0] += 1
                counts[name][1] += length
                done, index = done + length, index + 1
            progress.update(read, f"{index:,} conversations, {counts['train'][1] + counts['val'][1]:,} tokens")

    def _encoded(self, paths: Sequence[Path]) -> Iterator[tuple[Job, JobResult]]:
        """(job, its tokens, mask and lengths) per job, in order."""
        yield from in_order(self.workers, self.tokenizer, _start_worker, self.args, _encode_job, _jobs(paths))


def _jobs(paths: Sequence[Path]) -> Iterator[Job]:
    """Lists of (where, messages) of up to JOB_CONVERSATIONS conversations, each checked as a
    record (a JSON object with a list of messages, each with a string role and content), with the
    on-disk bytes read so far."""
    job: list[tuple[str, Messages]] = []
    done = 0
    for path in paths:
        try:
            with open(path, "rb") as raw, decompressed(path, raw) as f:
                for lineno, line in enumerate(f, 1):
                    if line.strip():
                        job.append((f"{path}:{lineno}", _messages(line, f"{path}:{lineno}")))
                    if len(job) == JOB_CONVERSATIONS:
                        yield job, done + raw.tell()
                        job = []
        except READ_ERRORS as e:
            raise InputError(f"{path}: cannot read ({e})") from e
        done += path.stat().st_size
    if job:
        yield job, done


def _messages(line: bytes, where: str) -> Messages:
    try:
        record = parse_json(line.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise InputError(f"{where}: not UTF-8 (byte {e.start + 1} of the line)") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{where}: invalid JSON ({e.msg} at column {e.colno})") from None
    except ValueError:
        raise InputError(f"{where}: JSON nested too deeply to read") from None
    messages = record.get("messages") if isinstance(record, dict) else None
    if not isinstance(messages, list) or not messages:
        raise InputError(
            f'{where}: expected a record {{"messages": [{{"role": ..., "content": ...}}, ...]}} '
            "(one conversation a line, OpenAI's format)"
        )
    for i, message in enumerate(messages):
        if not (
            isinstance(message, dict)
            and isinstance(message.get("role"), str)
            and isinstance(message.get("content"), str)
        ):
            raise InputError(f"{where}: messages[{i}] is not an object with a string role and a string content")
        try:  # JSON's escapes can write a lone surrogate ("\ud800"), which no text encoding holds
            (message["role"] + message["content"]).encode("utf-8")
        except UnicodeEncodeError as e:
            raise InputError(
                f"{where}: messages[{i}] holds {ascii(e.object[e.start])}, a lone surrogate, which is no "
                "character; expected Unicode text"
            ) from None
    if not any(m["role"] == "assistant" for m in messages):
        raise InputError(f"{where}: no assistant message: nothing in the conversation to train on")
    return messages


_worker: tuple[Tokenizer, ChatTemplate, int | None, np.dtype] | None = None


def _start_worker(tokenizer: Tokenizer, template: ChatTemplate, eot_id: int | None, dtype: np.dtype) -> None:
    global _worker
    _worker = tokenizer, template, eot_id, dtype


def _encode_job(job: Job) -> JobResult:
    """A job's tokens in the shard dtype (each conversation followed by the end-of-text token),
    their mask (uint8) and each conversation's number of tokens."""
    assert _worker is not None, "_start_worker first"
    tokenizer, template, eot_id, dtype = _worker
    conversations, _ = job  # the bytes read stay the parent's
    ids: list[int] = []
    mask: list[bool] = []
    lengths = []
    for where, messages in conversations:
        try:
            these, masked = template.encode(tokenizer, messages)
        except ChatError as e:
            raise InputError(f"{where}: {e}") from None
        if eot_id is not None:
            these, masked = these + [eot_id], masked + [False]
        ids += these
        mask += masked
        lengths.append(len(these))
    return np.array(ids, dtype), np.array(mask, MASK_DTYPE), lengths
