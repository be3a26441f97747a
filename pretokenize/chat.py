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
does not depend on the number of workers. Written through ShardSet, as encode.py's corpora are.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gptkit.shared.corpus import READ_ERRORS, decompressed, expand_inputs
from gptkit.shared.errors import InputError, SettingError
from gptkit.shared.files import StrPath, cause
from gptkit.shared.jsonfile import parse_json
from gptkit.shared.progress import Progress
from gptkit.shared.shard_set import ShardSet, check_shard_directory
from gptkit.shared.shards import MASK_DTYPE
from gptkit.shared.workers import process_pool
from gptkit.tokenizer import Tokenizer
from gptkit.tokenizer.chat import TEMPLATE_FILE, ChatError, ChatTemplate

from .encode import eot_id_of
from .split import Split

JOB_CONVERSATIONS = 256  # conversations per worker job
IN_FLIGHT_PER_WORKER = 2  # jobs queued per worker: keeps them busy, bounds memory


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
    out_dir = Path(out_dir)
    template = ChatTemplate.beside(tokenizer_path, tokenizer)
    eot_id = eot_id_of(tokenizer, eot_token, tokenizer_path)
    paths = expand_inputs(inputs)
    val_paths = expand_inputs(val_inputs) if val_inputs else []
    check_shard_directory(out_dir, tokenizer.fingerprint, overwrite)
    start = time.perf_counter()
    shards = ShardSet(out_dir, tokenizer, eot_id, shard_tokens, mask=True, chat_files=template.files())
    counts = {"train": [0, 0], "val": [0, 0]}  # conversations, tokens
    try:
        shards.begin()
        encoder = _Encoder(tokenizer, template, eot_id, shards.dtype, workers)
        progress = Progress(
            "encoding", "MB", total=sum(p.stat().st_size for p in paths + val_paths), scale=1e6, quiet=quiet
        )
        if val_paths:
            for name, each in (("val", val_paths), ("train", paths)):
                encoder.write(shards, each, lambda index, name=name: name, counts, progress)
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
                    f"{_named(paths)}: {total:,} conversation(s) leave the {name} split empty; give more "
                    f"conversations{'' if val_paths else ', another --val-fraction or --val-tokens, or --val-input'}"
                )
        shards.finish_all()
        made = {
            "split": (
                {"rule": "given", "text": "validation is all of --val-input, training all of --input"}
                if val_paths
                else split.describe()
            ),
            "sources": [{"path": str(p), "bytes": p.stat().st_size} for p in paths],
            **({"val_sources": [{"path": str(p), "bytes": p.stat().st_size} for p in val_paths]} if val_paths else {}),
            "chat": {"template": "gptkit" if template.is_gptkit else TEMPLATE_FILE, "stops": list(template.stops)},
        }
        # ShardSet.manifest reads each split's [conversations, tokens] (its annotation says tuple)
        manifest = shards.manifest(counts, made, eot_token=eot_token, tokenizer_source=tokenizer_path)
        manifest["seconds"] = round(time.perf_counter() - start, 3)
        shards.commit(manifest)
    except BaseException as e:
        shards.discard()
        if not isinstance(e, OSError):
            raise
        detail = f"{e.filename}: {cause(e)}" if e.filename else cause(e)
        raise SettingError("out", f"{out_dir}: cannot write ({detail})") from None
    return manifest


def _named(paths):
    return f"{paths[0]}{' ...' if len(paths) > 1 else ''}"


class _Encoder:
    """Conversations read, encoded by `workers` processes in jobs, and written in order."""

    def __init__(self, tokenizer, template, eot_id, dtype, workers):
        self.args, self.workers = (tokenizer, template, eot_id, dtype), workers

    def write(self, shards, paths, split_of, counts, progress):
        """Write the conversations of `paths` to the split `split_of(index)` names, counting into `counts`."""
        index = counts["train"][0] + counts["val"][0]
        for (tokens, mask, lengths), read in self._encoded(paths):
            done = 0
            for length in lengths:
                name = split_of(index)
                shards.write(name, tokens[done : done + length], [length], mask[done : done + length])
                counts[name][0] += 1
                counts[name][1] += length
                done, index = done + length, index + 1
            progress.update(read, f"{index:,} conversations, {counts['train'][1] + counts['val'][1]:,} tokens")

    def _encoded(self, paths):
        """((tokens, mask, lengths), bytes read so far) per job, in order."""
        jobs = _jobs(paths)
        if self.workers <= 1:
            _start_worker(*self.args)
            for job, read in jobs:
                yield _encode_job(job), read
            return
        with process_pool(self.workers, _start_worker, self.args) as pool:
            pending = deque()
            for job, read in jobs:
                pending.append((pool.submit(_encode_job, job), read))
                if len(pending) > IN_FLIGHT_PER_WORKER * self.workers:
                    future, read = pending.popleft()
                    yield future.result(), read
            while pending:
                future, read = pending.popleft()
                yield future.result(), read


def _jobs(paths):
    """Lists of (where, messages) of up to JOB_CONVERSATIONS conversations, each checked as a
    record (a JSON object with a list of messages, each with a string role and content), with the
    on-disk bytes read so far."""
    job, done = [], 0
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


def _messages(line, where):
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


_worker = None


def _start_worker(tokenizer, template, eot_id, dtype):
    global _worker
    _worker = tokenizer, template, eot_id, dtype


def _encode_job(job):
    """A job's tokens in the shard dtype (each conversation followed by the end-of-text token),
    their mask (uint8) and each conversation's number of tokens."""
    tokenizer, template, eot_id, dtype = _worker
    ids, mask, lengths = [], [], []
    for where, messages in job:
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
