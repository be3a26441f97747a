"""Tokenizer files: HF `tokenizers`' tokenizer.json, and GPT-2's vocab.json + merges.txt.

Both write tokens in GPT-2's byte-level alphabet: each byte is shown as a printable
character (a space as "Ġ"), so that a token is a plain string without spaces.
"""
import json

from shared.errors import InputError
from shared.files import atomic_write


def _byte_alphabet():
    """GPT-2's map from each byte to a printable character: printable Latin-1 bytes stand
    for themselves, the others for the characters from U+0100 on, in byte order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    chars = {b: chr(b) for b in printable} | {b: chr(256 + i) for i, b in enumerate(others)}
    return [chars[b] for b in range(256)]


BYTE_TO_CHAR = _byte_alphabet()
CHAR_TO_BYTE = {c: b for b, c in enumerate(BYTE_TO_CHAR)}


def token_text(token):
    return "".join(BYTE_TO_CHAR[b] for b in token)


def _token_bytes(text, path, what):
    try:
        return bytes(CHAR_TO_BYTE[c] for c in text)
    except KeyError:
        raise InputError(f"{path}: {what} {text!r} is not in GPT-2's byte-level alphabet (expected a byte-level BPE)") from None


def _load_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: not a readable JSON file ({e})") from None


def _assemble(path, token_ids, merge_texts, special_tokens, merges_path=None):
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
        raise InputError(f"{merges_path or path}: a merge names {e.args[0]!r}, which is not in the vocabulary") from None
    return vocab, merges, special_tokens


def _split_merge(merge, path):
    pair = merge.split(" ") if isinstance(merge, str) else merge
    if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(t, str) for t in pair)):
        raise InputError(f"{path}: merge {merge!r} is not a pair of tokens")
    return pair


def read_hf_json(path):
    data = _load_json(path)
    try:
        return _parse_hf_json(path, data)
    except (KeyError, TypeError, AttributeError, ValueError) as e:  # a field of the wrong shape
        raise InputError(f"{path}: malformed tokenizer.json ({type(e).__name__}: {e})") from None


def _parse_hf_json(path, data):
    model = data.get("model") if isinstance(data, dict) else None
    if not isinstance(model, dict) or model.get("type") != "BPE" or not isinstance(model.get("vocab"), dict):
        raise InputError(f"{path}: expected a tokenizer.json with a BPE model (HF tokenizers format)")
    pre = data.get("pre_tokenizer") or {}
    if pre.get("type") != "ByteLevel" or pre.get("add_prefix_space") or pre.get("use_regex") is False:
        raise InputError(f"{path}: expected a ByteLevel pre-tokenizer with the GPT-2 pattern and no prefix space")
    token_ids = dict(model["vocab"])
    special_tokens = {}
    for added in data.get("added_tokens") or []:
        token_ids[added["content"]] = added["id"]
        special_tokens[added["content"]] = added["id"]
    merges = [_split_merge(m, path) for m in model.get("merges", [])]
    return _assemble(path, token_ids, merges, special_tokens)


def read_gpt2_files(vocab_path, merges_path, special_tokens):
    token_ids = _load_json(vocab_path)
    if not isinstance(token_ids, dict) or not all(isinstance(i, int) for i in token_ids.values()):
        raise InputError(f"{vocab_path}: expected a JSON object of token -> id")
    try:
        with open(merges_path, encoding="utf-8") as f:
            lines = [line.rstrip("\n") for line in f if line.strip() and not line.startswith("#version")]
    except OSError as e:
        raise InputError(f"{merges_path}: cannot read ({e.strerror})") from None
    merges = [_split_merge(line, merges_path) for line in lines]
    specials = {t: token_ids[t] for t in special_tokens if t in token_ids}
    return _assemble(vocab_path, token_ids, merges, specials, merges_path)


def write_hf_json(path, vocab, merges, special_tokens):
    special_ids = set(special_tokens.values())
    texts = [t.decode("utf-8") if i in special_ids else token_text(t) for i, t in enumerate(vocab)]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    data = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
            for s, i in sorted(special_tokens.items(), key=lambda item: item[1])
        ],
        "normalizer": None,
        "pre_tokenizer": byte_level,
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
            "ignore_merges": False,
            "vocab": {text: i for i, text in enumerate(texts)},
            # "a b" strings: every version of `tokenizers` reads them, and byte-level tokens hold no space.
            "merges": [f"{texts[a]} {texts[b]}" for a, b in merges],
        },
    }
    with atomic_write(path, encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=1)
        f.write("\n")
