"""The tokenizer files of a Hugging Face model directory, and how they frame a text, both ways.

A checkpoint records the token put before a text and the token that ends one (checkpoint.py:
bos_id, eot_id), which `sample` uses. The export's tokenizer.json puts that first token before a
text (a TemplateProcessing post-processor: `AutoTokenizer(text)` gives [bos] + the ids of text,
what `sample` starts from), and config.json and generation_config.json name both. The import
takes the end-of-text token from generation_config.json's eos_token_id (else config.json's), and
the first token from the tokenizer.json's post-processor, what `AutoTokenizer(text)` puts before
a text (Llama 3: <|begin_of_text|>; Qwen2/3: none); GPT-2's adds none, but GPT-2 separated its
training documents with <|endoftext|>, its bos_token_id, so a text starts after one, as in
gptkit's own data. The tokenizer.json of a checkpoint has no post-processor: there the ids of a
text are the text's alone, and the code that frames a text adds the first token itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from gptkit.shared.errors import InputError
from gptkit.shared.jsonfile import read_json
from gptkit.tokenizer import Tokenizer

from .files import read_json_object


def hf_tokenizer_json(tokenizer: Tokenizer, bos_token: str | None) -> dict:
    """The tokenizer.json to export: ours, and a post-processor putting `bos_token` before each text
    (and between the two texts of a pair, as between documents in training)."""
    data = tokenizer.to_json()
    if bos_token is not None:
        bos = {"SpecialToken": {"id": bos_token, "type_id": 0}}
        text_a, text_b = ({"Sequence": {"id": name, "type_id": 0}} for name in "AB")
        data["post_processor"] = {
            "type": "TemplateProcessing",
            "single": [bos, text_a],
            "pair": [bos, text_a, bos, text_b],
            "special_tokens": {
                bos_token: {"id": bos_token, "ids": [tokenizer.special_tokens[bos_token]], "tokens": [bos_token]}
            },
        }
    return data


def read_tokenizer(hf_dir: Path, vocab_files: bool) -> tuple[Tokenizer, object]:
    """(Tokenizer, the tokenizer.json's post-processor) through gptkit's reader, which reads a
    tokenizer exactly or refuses it; its refusal refuses the import. `vocab_files`: GPT-2's
    vocab.json and merges.txt are read where there is no tokenizer.json."""
    path = hf_dir / "tokenizer.json"
    try:
        if path.exists():  # a named pipe or a directory too, which the reader refuses
            tokenizer = Tokenizer.from_file(path)  # which read the file as JSON: a dict
            return tokenizer, read_json(path).get("post_processor")
        if vocab_files and (hf_dir / "vocab.json").is_file() and (hf_dir / "merges.txt").is_file():
            return Tokenizer.from_gpt2_files(hf_dir / "vocab.json", hf_dir / "merges.txt"), None
        raise InputError(f"{path}: no such file{' (nor vocab.json and merges.txt)' if vocab_files else ''}")
    except InputError as e:
        raise InputError(f"the import of {hf_dir} is refused because of its tokenizer: {e}") from None


def read_framing(
    hf_dir: Path,
    data: Mapping[str, Any],
    tokenizer: Tokenizer,
    post_processor: object,
    bos_token_starts: bool,
    notes: list[str],
) -> tuple[int | None, int | None]:
    """(bos_id, eot_id) of the import: see the module's docstring. `data`: config.json's;
    `bos_token_starts`: a text starts after its bos_token_id where the post-processor puts nothing
    before it (GPT-2's)."""
    generation_path = hf_dir / "generation_config.json"
    generation = read_json_object(generation_path) if generation_path.exists() else {}
    sources = [(generation_path, generation), (hf_dir / "config.json", data)]
    eot: Any  # config.json's, any JSON: _check_id refuses what is not a token id or null
    eot_path, eot = next(((path, d["eos_token_id"]) for path, d in sources if "eos_token_id" in d), (None, None))
    if isinstance(eot, list) and eot:
        if len(eot) > 1:
            assert eot_path is not None
            names = ", ".join(_token_name(tokenizer, i) for i in eot[1:] if type(i) is int)
            notes.append(
                f"{eot_path.name}: eos_token_id {json.dumps(eot)}: sampling stops at the first alone; "
                f"`gptkit sample --stop` stops at another ({names})"
            )
        eot = eot[0]
    _check_id(eot_path, "eos_token_id", eot, tokenizer)
    bos = _bos_of_post_processor(hf_dir / "tokenizer.json", post_processor, tokenizer)
    if bos is None and bos_token_starts:
        bos_path, bos = next(((path, d["bos_token_id"]) for path, d in sources if "bos_token_id" in d), (None, None))
        _check_id(bos_path, "bos_token_id", bos, tokenizer)
    return bos, eot


def _check_id(path, field, value, tokenizer):
    if value is not None and not (type(value) is int and 0 <= value < tokenizer.vocab_size):
        raise InputError(
            f"{path}: {field} {json.dumps(value)} is not a token of the tokenizer's {tokenizer.vocab_size:,}; "
            "expected a token id or null"
        )


def _token_name(tokenizer, token_id):
    names = {i: token for token, i in tokenizer.special_tokens.items()}
    return names.get(token_id, str(token_id))


def _bos_of_post_processor(path, node, tokenizer):
    """The id the tokenizer.json's post-processor puts before a single text (None: none). A
    ByteLevel post-processor only moves offsets; a template may put one special token before the
    text, nothing after it (a token after a prompt would end it)."""
    if not isinstance(node, dict):
        return None if node is None else _unsupported_template(path, node)
    if node.get("type") == "ByteLevel":
        return None
    if node.get("type") == "Sequence" and isinstance(node.get("processors"), list):
        found = [
            bos for step in node["processors"] if (bos := _bos_of_post_processor(path, step, tokenizer)) is not None
        ]
        if len(found) > 1:
            _unsupported_template(path, node)
        return found[0] if found else None
    single = node.get("single") if node.get("type") == "TemplateProcessing" else None
    if not (isinstance(single, list) and single and all(isinstance(piece, dict) for piece in single)):
        _unsupported_template(path, node)
    if len(single) == 1 and "Sequence" in single[0]:
        return None
    if not (len(single) == 2 and "SpecialToken" in single[0] and "Sequence" in single[1]):
        _unsupported_template(path, node)
    token = single[0]["SpecialToken"].get("id") if isinstance(single[0]["SpecialToken"], dict) else None
    specials = node.get("special_tokens")
    entry = specials.get(token) if isinstance(specials, dict) and isinstance(token, str) else None
    if not (
        isinstance(entry, dict)
        and token in tokenizer.special_tokens
        and entry.get("ids") == [tokenizer.special_tokens[token]]
    ):
        raise InputError(
            f"{path}: post_processor puts {json.dumps(token)} before a text, which is not a special token of "
            "the tokenizer with those ids"
        )
    return tokenizer.special_tokens[token]


def _unsupported_template(path: str | Path, node: object) -> NoReturn:
    what = json.dumps(
        node
        if not isinstance(node, dict)
        else node.get("single")
        if node.get("type") == "TemplateProcessing"
        else node.get("type")
    )
    raise InputError(
        f"{path}: post_processor {what} is not supported; expected none, ByteLevel, or a TemplateProcessing "
        "that puts at most one special token before a text and none after it"
    )
