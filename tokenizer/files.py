"""Tokenizer files: HF `tokenizers`' tokenizer.json, and GPT-2's vocab.json + merges.txt.

Both write tokens in GPT-2's byte-level alphabet: each byte is shown as a printable
character (a space as "Ġ"), so that a token is a plain string without spaces.

A tokenizer.json is read exactly or refused: every field that can change the ids HF
`tokenizers` gives for a text is either applied (the normalizers, the pre-tokenizer's
pattern, `ignore_merges`) or, set to anything else than its neutral value, refused in one
line naming the file and the field. The ids compared are those of the text alone
(`encode(text, add_special_tokens=False)`): a post-processor's template, the BOS that
Llama 3's file adds, frames a text rather than tokenizing it, so it is left to the caller.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import regex

from gptkit.shared.errors import InputError, SettingError
from gptkit.shared.files import StrPath, atomic_write
from gptkit.shared.jsonfile import read_json
from gptkit.shared.text import EOT

from . import split

# What a tokenizer file gives the Tokenizer: the bytes of each token, the merges (pairs of ids in
# rank order) and the special tokens ({text: id}).
Parts = tuple[list[bytes], list[tuple[int, int]], dict[str, int]]

_MODEL_FIELDS = {
    "type",
    "vocab",
    "merges",
    "dropout",
    "unk_token",
    "continuing_subword_prefix",
    "end_of_word_suffix",
    "fuse_unk",
    "byte_fallback",
    "ignore_merges",
}


def _byte_alphabet() -> list[str]:
    """GPT-2's map from each byte to a printable character: printable Latin-1 bytes stand
    for themselves, the others for the characters from U+0100 on, in byte order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    chars = {b: chr(b) for b in printable} | {b: chr(256 + i) for i, b in enumerate(others)}
    return [chars[b] for b in range(256)]


BYTE_TO_CHAR = _byte_alphabet()
CHAR_TO_BYTE = {c: b for b, c in enumerate(BYTE_TO_CHAR)}


def token_text(token: bytes) -> str:
    return "".join(BYTE_TO_CHAR[b] for b in token)


def _token_bytes(text: str, path: StrPath, what: str) -> bytes:
    try:
        return bytes(CHAR_TO_BYTE[c] for c in text)
    except KeyError:
        raise InputError(
            f"{path}: {what} {text!r} is not in GPT-2's byte-level alphabet (expected a byte-level BPE)"
        ) from None


def _load_json(path: StrPath) -> Any:  # JSON of a file the user gives
    try:
        return read_json(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: not a readable JSON file ({e})") from None


def _assemble(
    path: StrPath,
    token_ids: dict[str, int],
    merge_texts: list[list[str]],
    special_tokens: dict[str, int],
    merges_path: StrPath | None = None,
) -> Parts:
    """Check and convert {token text: id} and merges ("a", "b") into the Tokenizer's arguments."""
    if not all(type(i) is int for i in token_ids.values()):
        raise InputError(f"{path}: token ids must be integers")
    ids = sorted(token_ids.values())
    if ids != list(range(len(ids))):
        raise InputError(f"{path}: token ids are not 0..{len(ids) - 1} without gaps or repeats")
    vocab = [b""] * len(ids)
    for text, i in token_ids.items():
        vocab[i] = text.encode("utf-8") if i in special_tokens.values() else _token_bytes(text, path, "token")
    try:
        merges = [(token_ids[a], token_ids[b]) for a, b in merge_texts]
    except KeyError as e:
        raise InputError(
            f"{merges_path or path}: a merge names {e.args[0]!r}, which is not in the vocabulary"
        ) from None
    first_listed: dict[tuple[int, int], int] = {}
    for number, merge in enumerate(merges, 1):
        if merge in first_listed:
            # HF ranks such a pair by its last listing and we by its first: refused, not guessed.
            raise InputError(
                f"{merges_path or path}: merge {' '.join(merge_texts[number - 1])!r} is listed twice "
                f"(merges {first_listed[merge]:,} and {number:,}); expected each pair once"
            )
        first_listed[merge] = number
    return vocab, merges, special_tokens


def _split_merge(merge: object, path: StrPath) -> list[str]:
    pair = merge.split(" ") if isinstance(merge, str) else merge
    if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(t, str) for t in pair)):
        raise InputError(f"{path}: merge {merge!r} is not a pair of tokens")
    return pair


def read_hf_json(path: StrPath) -> tuple[list[bytes], list[tuple[int, int]], dict[str, int], dict[str, Any]]:
    """The parts of a tokenizer.json (HF `tokenizers` format) and the Tokenizer's keyword options."""
    data = _load_json(path)
    try:
        return _parse_hf_json(path, data)
    except (KeyError, TypeError, AttributeError, ValueError) as e:  # a field of the wrong shape
        raise InputError(f"{path}: malformed tokenizer.json ({type(e).__name__}: {e})") from None


def _parse_hf_json(
    path: StrPath, data: Any
) -> tuple[list[bytes], list[tuple[int, int]], dict[str, int], dict[str, Any]]:
    """(vocab, merges, special tokens, the Tokenizer's keyword options) of a tokenizer.json."""
    model = data.get("model") if isinstance(data, dict) else None
    if not isinstance(model, dict) or model.get("type") != "BPE" or not isinstance(model.get("vocab"), dict):
        raise InputError(f"{path}: expected a tokenizer.json with a BPE model (HF tokenizers format)")
    _check_model_options(path, model)
    for field in ("truncation", "padding"):
        if data.get(field) is not None:
            raise InputError(f"{path}: {field} is set; not supported (ids are those of whole texts): expected null")
    normalizer = _normalizer_names(path, data.get("normalizer"))
    options = {
        "pattern": _pattern(path, data.get("pre_tokenizer")),
        "normalizer": normalizer,
        "ignore_merges": bool(model.get("ignore_merges")),
    }
    token_ids = dict(model["vocab"])
    special_tokens = {}
    for added in data.get("added_tokens") or []:
        _check_added_token(path, added, normalizer)
        token_ids[added["content"]] = added["id"]
        special_tokens[added["content"]] = added["id"]
    if "merges" not in model:
        raise InputError(
            f"{path}: model.merges is missing (HF tokenizers refuses such a file); expected a list, empty for no merges"
        )
    merges = [_split_merge(m, path) for m in model["merges"]]
    return (*_assemble(path, token_ids, merges, special_tokens), options)


def _unsupported(path: StrPath, field: str, value: object, expected: str) -> InputError:
    return InputError(f"{path}: {field} {json.dumps(value, ensure_ascii=False)} is not supported; expected {expected}")


def _check_model_options(path: StrPath, model: dict[str, Any]) -> None:
    unknown = sorted(set(model) - _MODEL_FIELDS)
    if unknown:
        raise InputError(f"{path}: model.{unknown[0]} is not a BPE option this reader knows (it could change the ids)")
    if model.get("dropout"):  # 0 drops nothing
        raise _unsupported(path, "model.dropout", model["dropout"], "null (dropout makes the ids random)")
    for field in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(field):
            raise _unsupported(path, f"model.{field}", model[field], "null (a byte-level BPE marks no word pieces)")
    if model.get("byte_fallback"):
        raise _unsupported(path, "model.byte_fallback", True, "false")


def _normalizer_names(path: StrPath, node: Any) -> tuple[str, ...]:  # a node of the user's tokenizer.json
    """The names of split.NORMALIZERS that `node` (a normalizer, a Sequence of them, or null) applies, in order."""
    if node is None:
        return ()
    if node.get("type") == "Sequence":
        return tuple(name for step in node["normalizers"] for name in _normalizer_names(path, step))
    if node.get("type") not in split.NORMALIZERS or set(node) != {"type"}:
        raise _unsupported(path, "normalizer", node, f"null, {', '.join(split.NORMALIZERS)} or a Sequence of them")
    return (node["type"],)


def _pattern(path: StrPath, node: object) -> str:
    """The pre-tokenization pattern of a ByteLevel pre-tokenizer (GPT-2's) or of
    Sequence[Split(Regex, Isolated), ByteLevel(use_regex=false)] (Llama 3's, Qwen2's, GPT-4o's)."""
    expected = (
        "a ByteLevel pre-tokenizer (GPT-2), or a Sequence of a Split (a Regex pattern, behavior Isolated, "
        "invert false) and a ByteLevel with use_regex false (Llama 3, Qwen2), without add_prefix_space"
    )
    if not isinstance(node, dict):
        raise _unsupported(path, "pre_tokenizer", node, expected)
    if node.get("type") == "ByteLevel" and node.get("use_regex", True) and not node.get("add_prefix_space"):
        return split.GPT2_PATTERN
    steps = node.get("pretokenizers") if node.get("type") == "Sequence" else None
    if not (isinstance(steps, list) and len(steps) == 2 and isinstance(steps[0], dict) and isinstance(steps[1], dict)):
        raise _unsupported(path, "pre_tokenizer", node, expected)
    cut, byte_level = steps
    pattern = cut.get("pattern") if cut.get("type") == "Split" else None
    if (
        not isinstance(pattern, dict)
        or list(pattern) != ["Regex"]
        or cut.get("behavior") != "Isolated"
        or cut.get("invert")
        or byte_level.get("type") != "ByteLevel"
        or byte_level.get("use_regex", True)
        or byte_level.get("add_prefix_space")
    ):
        raise _unsupported(path, "pre_tokenizer", node, expected)
    try:
        regex.compile(pattern["Regex"])
    except (regex.error, TypeError) as e:
        raise InputError(f"{path}: the pre-tokenizer's pattern {pattern['Regex']!r} does not compile ({e})") from None
    return pattern["Regex"]


def _check_added_token(path: StrPath, added: dict[str, Any], normalizer: Sequence[str]) -> None:
    for option in ("single_word", "lstrip", "rstrip"):
        if added.get(option):
            raise _unsupported(path, f"added token {added['content']!r}: {option}", True, "false")
    if normalizer and added.get("normalized"):
        # HF would look for it in the normalized text, where normalizing can make one up.
        raise _unsupported(path, f"added token {added['content']!r}: normalized", True, "false with a normalizer")


def read_gpt2_files(vocab_path: StrPath, merges_path: StrPath, special_tokens: Iterable[str] | None) -> Parts:
    token_ids = _load_json(vocab_path)
    if not isinstance(token_ids, dict) or not all(isinstance(i, int) for i in token_ids.values()):
        raise InputError(f"{vocab_path}: expected a JSON object of token -> id")
    try:
        with open(merges_path, encoding="utf-8") as f:
            lines = [line.rstrip("\n") for line in f if line.strip() and not line.startswith("#version")]
    except OSError as e:
        raise InputError(f"{merges_path}: cannot read ({e.strerror})") from None
    merges = [_split_merge(line, merges_path) for line in lines]
    if special_tokens is None:  # GPT-2's end of text, where the vocabulary has it
        special_tokens = [EOT] if EOT in token_ids else []
    missing = [t for t in special_tokens if t not in token_ids]
    if missing:
        raise SettingError("special_token", f"{missing[0]!r}: not in {vocab_path}; expected a token of the vocabulary")
    specials = {t: token_ids[t] for t in special_tokens}
    return _assemble(vocab_path, token_ids, merges, specials, merges_path)


class Tables(Protocol):
    """What hf_json reads of a tokenizer (bpe.Tokenizer, which imports this module)."""

    vocab: list[bytes]
    merges: list[tuple[int, ...]]
    special_tokens: dict[str, int]
    pattern: str
    normalizer: tuple[str, ...]
    ignore_merges: bool


def hf_json(tokenizer: Tables) -> dict[str, Any]:
    """The tokenizer.json of a Tokenizer, as a dict: what HF `tokenizers` reads to give the same ids."""
    special_ids = set(tokenizer.special_tokens.values())
    texts = [t.decode("utf-8") if i in special_ids else token_text(t) for i, t in enumerate(tokenizer.vocab)]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    if tokenizer.pattern == split.GPT2_PATTERN:
        pre_tokenizer = byte_level
    else:
        pre_tokenizer = {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": tokenizer.pattern}, "behavior": "Isolated", "invert": False},
                {**byte_level, "use_regex": False},
            ],
        }
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": i,
                "content": s,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for s, i in sorted(tokenizer.special_tokens.items(), key=lambda item: item[1])
        ],
        "normalizer": {"type": "Sequence", "normalizers": [{"type": name} for name in tokenizer.normalizer]}
        if tokenizer.normalizer
        else None,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": None,
        "decoder": byte_level,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": tokenizer.ignore_merges,
            "vocab": {text: i for i, text in enumerate(texts)},
            # "a b" strings: every version of `tokenizers` reads them, and byte-level tokens hold no space.
            "merges": [f"{texts[a]} {texts[b]}" for a, b in tokenizer.merges],
        },
    }


def write_json(path: StrPath, data: Any) -> None:
    with atomic_write(path, encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=1)
        f.write("\n")
