"""Data directories (shared/shard_dir.py): the manifest read, checked and used, plain llm.c directories listed."""

import functools
import json
from types import SimpleNamespace

import pytest

import gptkit.shared.shard_dir
from gptkit.shared.shard_dir import ShardDir
from tests.unit.test_shards import U16, shard_error, write_llmc, write_ours


def a_manifest(shards):
    """A manifest with every field its readers use, listing `shards` ((file, split) pairs)."""
    return {
        "format": "gptkit-shards",
        "version": 1,
        "name": "b",
        "tokenizer": {"fingerprint": "0123456789abcdef", "vocab_size": 450},
        "eot_token": "<|endoftext|>",
        "eot_id": 449,
        "dtype": "uint16",
        "split": {"text": "the rule"},
        "totals": {
            "train": {"documents": 2, "tokens": 4, "unigram_entropy": 1.5},
            "val": {"documents": 1, "tokens": 2},
        },
        "shards": [{"file": f, "split": s, "tokens": 2, "documents": 1, "crc32": "0000abcd"} for f, s in shards],
    }


def write_manifest(directory, manifest):
    (directory / "manifest.json").write_text(json.dumps(manifest))


def test_shard_paths_of_plain_llmc_directory_by_name(tmp_path):
    for name in ["fineweb_train_000002.bin", "fineweb_val_000000.bin", "fineweb_train_000001.bin"]:
        write_llmc(tmp_path / name, [1, 2, 3], U16)
    (tmp_path / "notes.bin").write_bytes(b"")  # not a shard name: ignored
    data = ShardDir(tmp_path)
    assert data.manifest is None
    assert [p.name for p in data.shard_paths("train")] == ["fineweb_train_000001.bin", "fineweb_train_000002.bin"]
    assert [p.name for p in data.shard_paths("val")] == ["fineweb_val_000000.bin"]


@pytest.mark.parametrize(
    "names, train, val",
    [
        (
            ["tiny_shakespeare_val.bin", "tiny_shakespeare_train.bin"],
            ["tiny_shakespeare_train.bin"],
            ["tiny_shakespeare_val.bin"],
        ),
        (
            ["TinyStories_train.bin", "TinyStories_val.bin", "TinyStories_training_notes.bin"],
            ["TinyStories_train.bin"],
            ["TinyStories_val.bin"],
        ),
        (
            ["s_train_10.bin", "s_train_2.bin", "s_val_1.bin", "s_train_1.bin"],
            ["s_train_1.bin", "s_train_2.bin", "s_train_10.bin"],
            ["s_val_1.bin"],
        ),
    ],
)
def test_shard_paths_finds_llmcs_own_names(tmp_path, names, train, val):
    for name in names:
        write_llmc(tmp_path / name, [1, 2, 3], U16)
    assert [p.name for p in ShardDir(tmp_path).shard_paths("train")] == train
    assert [p.name for p in ShardDir(tmp_path).shard_paths("val")] == val


def test_shard_paths_refuses_our_shards_without_manifest(tmp_path):
    write_ours(tmp_path / "d_val_000000.bin", [1, 2])
    write_ours(tmp_path / "d_train_000001.bin", [3, 4])
    shard_error("no manifest.json: an unfinished pretokenize run", ShardDir(tmp_path).shard_paths, "train")


def test_shard_paths_follows_the_manifest(tmp_path):
    write_manifest(
        tmp_path,
        a_manifest([("b_val_000000.bin", "val"), ("b_train_000002.bin", "train"), ("b_train_000001.bin", "train")]),
    )
    assert [p.name for p in ShardDir(tmp_path).shard_paths("train")] == ["b_train_000002.bin", "b_train_000001.bin"]


def test_what_a_manifest_records(tmp_path):
    write_manifest(tmp_path, a_manifest([("b_val_000000.bin", "val"), ("b_train_000001.bin", "train")]))
    data = ShardDir(tmp_path)
    tokenizer = SimpleNamespace(special_tokens={"<|endoftext|>": 7})
    assert (data.fingerprint, data.vocab_size, data.eot_id(tokenizer)) == ("0123456789abcdef", 450, 449)
    assert (data.tokens("train"), data.tokens("val"), data.unigram_entropy) == (4, 2, 1.5)
    assert data.tokenizer == tmp_path / "tokenizer.json"


def test_what_a_directory_of_plain_llmc_shards_has_instead(tmp_path):
    write_llmc(tmp_path / "s_train_1.bin", [1, 2, 3], U16)
    write_llmc(tmp_path / "s_train_2.bin", [4, 5], U16)
    data = ShardDir(tmp_path)
    gpt2 = SimpleNamespace(special_tokens={"<|endoftext|>": 50256})
    assert (data.fingerprint, data.vocab_size, data.unigram_entropy, data.unlisted()) == (None, None, None, [])
    assert data.eot_id(gpt2) == 50256 and data.eot_id(SimpleNamespace(special_tokens={})) is None
    assert data.tokens("train") == 5 and data.tokens("val") == 0


def test_unlisted_shards_are_ours_the_manifest_does_not_name(tmp_path):
    write_manifest(tmp_path, a_manifest([("b_val_000000.bin", "val"), ("b_train_000001.bin", "train")]))
    for name in ["b_val_000000.bin", "b_train_000001.bin", "b_train_000003.bin", "b_val_000002.bin", "notes_train.bin"]:
        write_ours(tmp_path / name, [1])
    assert [p.name for p in ShardDir(tmp_path).unlisted()] == ["b_train_000003.bin", "b_val_000002.bin"]


def test_the_manifest_is_read_once(tmp_path, monkeypatch):
    write_manifest(tmp_path, a_manifest([("b_val_000000.bin", "val"), ("b_train_000001.bin", "train")]))
    reads = []
    monkeypatch.setattr(
        gptkit.shared.shard_dir, "read_json", lambda path: reads.append(path) or json.loads(path.read_text())
    )
    data = ShardDir(tmp_path)
    assert reads == []  # opening reads nothing: the tokenizer's path needs no manifest
    data.shard_paths("train"), data.eot_id(None), data.unigram_entropy, data.tokens("val"), data.listing_problems()
    assert reads == [tmp_path / "manifest.json"]


def test_unreadable_manifest(tmp_path):
    (tmp_path / "manifest.json").write_text("{not json")
    shard_error("not a readable manifest", lambda: ShardDir(tmp_path).manifest)
    (tmp_path / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    shard_error("not a readable manifest", lambda: ShardDir(tmp_path).manifest)


REMOVED = object()


@pytest.mark.parametrize(
    "field, value, says",
    [
        ((), {}, "format is missing"),
        ((), [], "the file is [], expected an object"),
        (("format",), "llm.c", 'format is "llm.c", expected "gptkit-shards"'),
        (("version",), REMOVED, "version is missing"),
        (("version",), 0, "version is 0, expected a positive integer"),
        (("version",), "1", 'version is "1", expected a positive integer'),
        (("name",), REMOVED, "name is missing"),
        (("shards",), REMOVED, "shards is missing"),
        (("tokenizer", "vocab_size"), REMOVED, "tokenizer.vocab_size is missing"),
        (("tokenizer", "vocab_size"), "450", 'tokenizer.vocab_size is "450", expected a positive integer'),
        (("shards",), {}, "shards is {}, expected a list"),
        (("shards", 1, "tokens"), -2, "shards[1].tokens is -2, expected a count"),
        (("shards", 0, "documents"), True, "shards[0].documents is true, expected a count"),
        (("shards", 0, "file"), "../../etc/passwd", 'shards[0].file is "../../etc/passwd", expected a shard file name'),
        (("shards", 0, "split"), "test", 'shards[0].split is "test", expected "train" or "val"'),
        (("shards", 0, "crc32"), 12, "shards[0].crc32 is 12, expected 8 hexadecimal digits"),
        (("totals", "val"), REMOVED, "totals.val is missing"),
        (("dtype",), "int8", 'dtype is "int8", expected "uint16" or "uint32"'),
        (("eot_id",), None, None),  # no end-of-text token: fine
    ],
)
def test_a_manifest_of_the_wrong_shape_is_one_line_naming_the_field(tmp_path, field, value, says):
    manifest = a_manifest([("b_val_000000.bin", "val"), ("b_train_000001.bin", "train")])
    if not field:
        manifest = value
    else:
        *parents, last = field
        holder = functools.reduce(lambda node, key: node[key], parents, manifest)
        holder[last] = value
        if value is REMOVED:
            del holder[last]
    write_manifest(tmp_path, manifest)
    if says is None:
        assert ShardDir(tmp_path).manifest == manifest
        return
    message = shard_error("not a manifest as pretokenize writes it", ShardDir(tmp_path).shard_paths, "train")
    assert message.startswith(f"{tmp_path / 'manifest.json'}: {says}"), message


@pytest.mark.parametrize(
    "manifest",
    [{"format": "gptkit-shards", "version": 2}, {**a_manifest([("b_train_000001.bin", "train")]), "version": 2}],
)
def test_a_manifest_of_a_newer_version_is_refused_as_such(tmp_path, manifest):
    write_manifest(tmp_path, manifest)
    message = shard_error(
        "version 2 of the manifest, newer than this gptkit reads", lambda: ShardDir(tmp_path).manifest
    )
    assert message.startswith(f"{tmp_path / 'manifest.json'}: ") and "upgrade gptkit" in message
