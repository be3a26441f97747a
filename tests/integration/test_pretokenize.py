"""The pretokenize stage: corpora -> shards through `encode_corpus` and the CLI, then `inspect` and `verify`."""

import dataclasses
import functools
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import gptkit.pretokenize.jobs as jobs
import gptkit.shared.corpus
from gptkit.pretokenize import Split, encode_corpus, encode_dataset
from gptkit.pretokenize.cli import cli
from gptkit.shared.corpus import Corpus
from gptkit.shared.errors import InputError, SettingError
from gptkit.shared.shard_dir import ShardDir
from gptkit.shared.shards import HEADER_BYTES, ShardHeader, open_shard, read_header
from gptkit.tokenizer import Tokenizer, split, train_bpe
from tests.conftest import assert_input_error, english_like, shared_file

EOT = "<|endoftext|>"


# -- helpers ---------------------------------------------------------------------------------


def docs_of(n, seed=0):
    """n documents of one to a few hundred words."""
    rng = random.Random(seed)
    return [english_like(rng.randint(1, 300), seed * 1000 + i) for i in range(n)]


def write_txt(path, docs):
    path.write_text(EOT.join(docs), encoding="utf-8")
    return path


def write_jsonl(path, docs, field="text"):
    path.write_text("".join(json.dumps({field: d}) + "\n" for d in docs), encoding="utf-8")
    return path


def write_parquet(path, docs, column="text"):
    pq.write_table(pa.table({column: docs}), path)
    return path


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def encode_cli(tok_path, inputs, out_dir, *extra):
    """`pretokenize --tokenizer T --input ... --out D` (encode is the default command), a quarter
    of the documents for validation unless `extra` says otherwise."""
    split = [] if {"--val-fraction", "--val-tokens"} & set(extra) else ["--val-fraction", "0.25"]
    args = ["--tokenizer", tok_path, "--out", out_dir, "--threads", 1, "--quiet", *split, *extra]
    for path in inputs:
        args += ["--input", path]
    return run(*args)


def ok(res):
    assert res.exit_code == 0, (res.output, res.exception)
    assert "Traceback" not in res.output
    return res


def files(directory):
    """{name: bytes} of every file in a directory, hidden ones included."""
    return {p.name: p.read_bytes() for p in directory.iterdir()} if directory.is_dir() else {}


def tokens_of(out_dir, split):
    return np.concatenate(
        [open_shard(p).tokens for p in ShardDir(out_dir).shard_paths(split)] or [np.empty(0, np.uint16)]
    )


def split_docs(tokens, eot):
    """A token stream cut after each end-of-text id: the documents, each with its eot."""
    ends = np.flatnonzero(tokens == eot) + 1
    assert len(ends) and ends[-1] == len(tokens), "the stream must end with an eot"
    return [t.tolist() for t in np.split(tokens, ends)[:-1]]


def in_input_order(out_dir, split, eot, n_docs):
    """The documents of a shard directory in input order, rebuilt with the documented split rule."""
    val, train = iter(split_docs(tokens_of(out_dir, "val"), eot)), iter(split_docs(tokens_of(out_dir, "train"), eot))
    docs, val_tokens = [], 0
    for i in range(n_docs):
        is_val = split.is_val(i, val_tokens)
        docs.append(next(val) if is_val else next(train))
        val_tokens += len(docs[-1]) if is_val else 0
    assert next(val, None) is None and next(train, None) is None
    return docs


def expected(tok, docs):
    eot = tok.special_tokens[EOT]
    return [tok.encode(d, allowed_special=()) + [eot] for d in docs]


@pytest.fixture
def tok(small_tokenizer):
    return small_tokenizer[0]


@pytest.fixture
def tok_path(small_tokenizer):
    return small_tokenizer[1]


@pytest.fixture(scope="session")
def other_tok_path(small_text, tmp_path_factory):
    """A different tokenizer (another vocabulary size): another fingerprint."""
    path = tmp_path_factory.mktemp("other") / "corpus.txt"
    path.write_text(small_text[:20000])
    train_bpe(Corpus([path]), 300, quiet=True).save(path.parent / "other.json")
    return path.parent / "other.json"


# -- round trips -----------------------------------------------------------------------------


def test_txt_round_trip_in_document_order(tmp_path, tok, tok_path):
    docs = docs_of(24)
    out = tmp_path / "data"
    res = ok(encode_cli(tok_path, [write_txt(tmp_path / "c.txt", docs)], out, "--val-fraction", "0.25"))
    assert "wrote" in res.stdout and "train: 18 documents" in res.stdout and "val: 6 documents" in res.stdout
    got = in_input_order(out, Split(val_fraction=0.25), tok.special_tokens[EOT], len(docs))
    assert got == expected(tok, docs)
    assert "".join(map(tok.decode, got)) == "".join(d + EOT for d in docs)
    assert Tokenizer.from_file(out / "tokenizer.json").fingerprint == tok.fingerprint


def test_literal_eot_inside_a_jsonl_document_is_plain_text(tmp_path, tok, tok_path):
    docs = ["first document", "text with <|endoftext|> inside it", "<|endoftext|>", "last one\n"]
    out = tmp_path / "data"
    ok(encode_cli(tok_path, [write_jsonl(tmp_path / "c.jsonl", docs)], out, "--val-tokens", 1))
    eot = tok.special_tokens[EOT]
    assert in_input_order(out, Split(val_tokens=1), eot, len(docs)) == expected(tok, docs)
    assert (tokens_of(out, "train") == eot).sum() == 3  # one per document, none from the text


@pytest.mark.parametrize("kind", ["txt", "jsonl"])
def test_long_document_encodes_as_a_whole(tmp_path, monkeypatch, tok, kind):
    """A document far longer than a read block, a corpus piece and a job: cut only where its tokens cannot change."""
    monkeypatch.setattr(gptkit.shared.corpus, "BLOCK_BYTES", 4096)
    monkeypatch.setattr(Corpus, "pieces", functools.partialmethod(Corpus.pieces, piece_chars=997))
    monkeypatch.setattr(jobs, "JOB_CHARS", 3000)
    long_doc = english_like(8000, 5) + " " * 2500 + "x" * 4000 + "\n\n \t  " + english_like(2000, 6) + "   \n"
    docs = ["a short one", long_doc, "another short one", long_doc[::-1]]
    path = (write_txt if kind == "txt" else write_jsonl)(tmp_path / f"c.{kind}", docs)
    encode_corpus(Corpus([path]), tok, tmp_path / "data", split=Split(val_tokens=1), quiet=True)
    assert in_input_order(tmp_path / "data", Split(val_tokens=1), tok.special_tokens[EOT], len(docs)) == expected(
        tok, docs
    )


def test_txt_jsonl_and_parquet_give_identical_shards(tmp_path, tok_path):
    docs = docs_of(20, seed=3)
    inputs = [
        write_txt(tmp_path / "c.txt", docs),
        write_jsonl(tmp_path / "c.jsonl", docs, "body"),
        write_parquet(tmp_path / "c.parquet", docs, "body"),
    ]
    shards = []
    for i, path in enumerate(inputs):
        out = tmp_path / str(i) / "data"
        ok(encode_cli(tok_path, [path], out, "--text-field", "body", "--shard-tokens", 300))
        shards.append({k: v for k, v in files(out).items() if k.endswith(".bin")})
    assert len(shards[0]) > 2 and shards[0] == shards[1] == shards[2]


def test_one_and_two_workers_write_identical_shards(tmp_path, monkeypatch, tok):
    monkeypatch.setattr(jobs, "JOB_CHARS", 400)  # workers are forked: they see it too
    path = write_txt(tmp_path / "c.txt", docs_of(40, seed=1))
    manifests = [
        encode_corpus(
            Corpus([path]), tok, tmp_path / str(w) / "data", split=Split(0.2), shard_tokens=500, workers=w, quiet=True
        )
        for w in (1, 2)
    ]
    one, two = files(tmp_path / "1" / "data"), files(tmp_path / "2" / "data")
    assert len(one) > 4 and one.keys() == two.keys()
    assert all(one[k] == two[k] for k in one if k.endswith(".bin"))
    assert manifests[0]["shards"] == manifests[1]["shards"] and manifests[0]["totals"] == manifests[1]["totals"]


# -- shards, split, eot ----------------------------------------------------------------------


def test_small_shards_names_counts_and_manifest(tmp_path, tok, tok_path):
    docs, shard_tokens = docs_of(30, seed=2), 64
    out = tmp_path / "data"
    ok(
        encode_cli(
            tok_path,
            [write_txt(tmp_path / "c.txt", docs)],
            out,
            "--val-fraction",
            "0.25",
            "--shard-tokens",
            shard_tokens,
        )
    )
    manifest, eot = ShardDir(out).manifest, tok.special_tokens[EOT]
    entries = manifest["shards"]
    assert [e["file"] for e in entries] == [f"data_{e['split']}_{i:06d}.bin" for i, e in enumerate(entries)]
    assert entries[0]["file"] == "data_val_000000.bin" and entries[1]["file"] == "data_train_000001.bin"
    assert sorted(p.name for p in out.glob("*.bin")) == sorted(e["file"] for e in entries)
    assert (manifest["name"], manifest["dtype"], manifest["shard_tokens"], manifest["eot_id"]) == (
        "data",
        "uint16",
        64,
        eot,
    )
    for part in ("train", "val"):
        paths = ShardDir(out).shard_paths(part)
        headers = [read_header(p) for p in paths]
        assert len(paths) >= 2
        assert [h.num_tokens for h in headers[:-1]] == [shard_tokens] * (len(paths) - 1)
        assert 0 < headers[-1].num_tokens <= shard_tokens
        for p, h in zip(paths, headers):
            assert (h.vocab_size, h.eot_id, h.fingerprint) == (450, eot, tok.fingerprint)
            assert h.num_docs == int((open_shard(p).tokens == eot).sum())  # documents ending in this shard
        totals = manifest["totals"][part]
        tokens = np.concatenate([open_shard(p).tokens for p in paths])
        p = np.bincount(tokens) / len(tokens)
        entropy = -(p[p > 0] * np.log(p[p > 0])).sum()
        assert totals == {
            "documents": sum(h.num_docs for h in headers),
            "tokens": sum(h.num_tokens for h in headers),
            "unigram_entropy": pytest.approx(entropy, abs=1e-6),
        }
    assert sum(t["documents"] for t in manifest["totals"].values()) == len(docs)
    for e in entries:
        h = read_header(out / e["file"])
        assert (e["tokens"], e["documents"], e["crc32"]) == (h.num_tokens, h.num_docs, f"{h.checksum:08x}")
    assert in_input_order(out, Split(val_fraction=0.25), eot, len(docs)) == expected(tok, docs)


def test_fraction_rule_spaces_validation_documents_evenly():
    assert [i for i in range(12) if Split(val_fraction=0.25).is_val(i, 0)] == [3, 7, 11]
    assert [i for i in range(10) if Split(val_fraction=0.3).is_val(i, 0)] == [3, 6, 9]  # exact: no float drift
    assert [i for i in range(300) if Split(val_fraction=0.01).is_val(i, 0)] == [99, 199, 299]
    assert Split(val_fraction=0.25).describe()["rule"] == "fraction"


@pytest.mark.parametrize("extra, n_val", [(0, 2), (1, 3)])  # exactly two documents' tokens, or one token more
def test_val_tokens_takes_the_leading_documents(tmp_path, tok, tok_path, extra, n_val):
    docs = docs_of(10, seed=4)
    want = expected(tok, docs)
    n = len(want[0]) + len(want[1]) + extra
    out = tmp_path / "data"
    ok(encode_cli(tok_path, [write_txt(tmp_path / "c.txt", docs)], out, "--val-tokens", n))
    assert tokens_of(out, "val").tolist() == sum(want[:n_val], [])
    assert tokens_of(out, "train").tolist() == sum(want[n_val:], [])
    split = ShardDir(out).manifest["split"]
    assert (split["rule"], split["val_tokens"]) == ("leading", n)


def test_manifest_records_the_fraction_rule(tmp_path, tok_path):
    out = tmp_path / "data"
    ok(encode_cli(tok_path, [write_txt(tmp_path / "c.txt", docs_of(8))], out, "--val-fraction", "0.25"))
    split = ShardDir(out).manifest["split"]
    assert (split["rule"], split["val_fraction"]) == ("fraction", 0.25) and "floor((i+1)*1/4)" in split["text"]


def test_no_eot(tmp_path, tok, tok_path):
    docs = docs_of(6, seed=5)
    out = tmp_path / "data"
    ok(encode_cli(tok_path, [write_txt(tmp_path / "c.txt", docs)], out, "--no-eot", "--val-tokens", 1))
    assert tokens_of(out, "val").tolist() == tok.encode(docs[0])
    assert tokens_of(out, "train").tolist() == sum((tok.encode(d) for d in docs[1:]), [])
    path = ShardDir(out).shard_paths("train")[0]
    assert np.frombuffer(path.read_bytes()[:1024], "<i4")[6] == -1
    assert read_header(path).eot_id is None and read_header(path).num_docs == 5
    manifest = ShardDir(out).manifest
    assert manifest["eot_id"] is None and manifest["eot_token"] is None


def test_tokenizer_without_eot_needs_no_eot(tmp_path, tok):
    path = tmp_path / "noeot.json"
    Tokenizer(tok.vocab[:-1], tok.merges, {}).save(path)
    corpus = write_txt(tmp_path / "c.txt", docs_of(4))
    res = encode_cli(path, [corpus], tmp_path / "data")
    assert res.exit_code == 2 and len(res.stderr.splitlines()) == 1
    assert res.stderr.startswith("Error: ") and "--no-eot" in res.stderr and "Traceback" not in res.output
    assert not (tmp_path / "data").exists()
    ok(encode_cli(path, [corpus], tmp_path / "data", "--no-eot"))


def test_custom_eot_token(tmp_path, tok):
    path = tmp_path / "doc.json"
    Tokenizer(tok.vocab + [b"<|doc|>"], tok.merges, {**tok.special_tokens, "<|doc|>": 450}).save(path)
    out = tmp_path / "data"
    ok(encode_cli(path, [write_txt(tmp_path / "c.txt", docs_of(4))], out, "--eot-token", "<|doc|>", "--val-tokens", 1))
    assert read_header(ShardDir(out).shard_paths("val")[0]).eot_id == 450 and tokens_of(out, "val")[-1] == 450
    assert 449 not in tokens_of(out, "train")


def test_progress_line_counts_docs_and_tokens(tmp_path, tok, capsys):
    docs = docs_of(8)
    manifest = encode_corpus(Corpus([write_txt(tmp_path / "c.txt", docs)]), tok, tmp_path / "data", split=Split(0.25))
    tokens = sum(t["tokens"] for t in manifest["totals"].values())
    assert f"8 docs, {tokens:,} tokens" in capsys.readouterr().err


# -- too few documents: the tail of the text -------------------------------------------------


def odd_text(n_words, seed):
    """Lines with the whitespace that tempts a tokenizer to change at a cut: runs of spaces and
    newlines, tabs, spaces before and after newlines, blank lines."""
    rng = random.Random(seed)
    words = english_like(n_words, seed).split(" ")
    glue = [" ", " ", " ", "\n", "\n\n", "  \n", "\n  ", " \n\n\t ", "\t", "   "]
    return "".join(w + rng.choice(glue) for w in words)


def split_text(tok, out):
    """(training text, validation text) of a directory, each document followed by <|endoftext|>."""
    return tuple(tok.decode(tokens_of(out, name).tolist()) for name in ("train", "val"))


def assert_cut_at_a_line_end(tok, out, text, at_least, unit="characters"):
    """Validation is the shortest tail with `at_least` characters or tokens that begins at a
    newline with a non-space on one side of it; both parts encode as documents of their own."""
    train, val = split_text(tok, out)
    head, tail = train.removesuffix(EOT), val.removesuffix(EOT)
    assert head + tail == text and head and EOT not in head + tail
    assert tail[0] == "\n" and (not head[-1].isspace() or not tail[1:2].isspace())
    eot = tok.special_tokens[EOT]
    assert tokens_of(out, "train").tolist() == tok.encode(head, allowed_special=()) + [eot]
    assert tokens_of(out, "val").tolist() == tok.encode(tail, allowed_special=()) + [eot]

    def size(t):
        return len(t) if unit == "characters" else len(tok.encode(t, allowed_special=())) + 1

    assert size(tail) >= at_least
    later = [
        i
        for i in range(len(head) + 1, len(text))
        if text[i] == "\n" and (not text[i - 1].isspace() or not text[i + 1 : i + 2].isspace())
    ]
    assert all(size(text[i:]) < at_least for i in later), "not the shortest such tail"


def test_one_document_splits_into_training_and_the_tail_of_its_text(tmp_path, tok, tok_path):
    text = odd_text(3000, 1)
    out = tmp_path / "data"
    res = ok(encode_cli(tok_path, [write_txt(tmp_path / "book.txt", [text])], out, "--val-fraction", "0.1"))
    at_least = math.ceil(len(text) / 10)
    assert_cut_at_a_line_end(tok, out, text, at_least)
    split = ShardDir(out).manifest["split"]
    assert split == {
        "rule": "tail",
        "val_fraction": 0.1,
        "documents": 1,
        "val_at_least": at_least,
        "unit": "characters",
        "text": split["text"],
    }
    assert f"at least {at_least:,} characters" in split["text"] and "newline ending a line" in split["text"]
    assert "train: 1 document," in res.stdout and "val: 1 document," in res.stdout
    assert "split: 1 document, too few to hold out whole ones" in res.stdout


def test_progress_line_counts_the_document_the_tail_cuts_once(tmp_path, tok, capsys):
    """Its texts are held back until the end, and then written as two documents: the progress
    counts what was read, one document and its tokens."""
    text = odd_text(3000, 1)
    encode_corpus(Corpus([write_txt(tmp_path / "book.txt", [text])]), tok, tmp_path / "data", split=Split(0.1))
    tokens = len(tok.encode(text, allowed_special=())) + 1  # and its end-of-text token
    last_line = capsys.readouterr().err.splitlines()[-1]
    assert last_line.startswith("encoding: ") and f", 1 docs, {tokens:,} tokens, " in last_line, last_line


def test_one_document_with_val_tokens_holds_out_that_many_tokens_of_its_tail(tmp_path, tok, tok_path):
    text = odd_text(3000, 2)
    out = tmp_path / "data"
    ok(encode_cli(tok_path, [write_txt(tmp_path / "book.txt", [text])], out, "--val-tokens", 500))
    assert_cut_at_a_line_end(tok, out, text, 500, unit="tokens")
    split = ShardDir(out).manifest["split"]
    assert (split["rule"], split["val_tokens"], split["val_at_least"], split["unit"]) == ("tail", 500, 500, "tokens")


@pytest.mark.parametrize("workers", [1, 2])
def test_the_tail_is_found_across_many_small_pieces_and_jobs(tmp_path, monkeypatch, tok, workers):
    """Held-back texts are released as the text goes on; the cut and the tokens stay the same."""
    monkeypatch.setattr(gptkit.shared.corpus, "BLOCK_BYTES", 4096)
    monkeypatch.setattr(Corpus, "pieces", functools.partialmethod(Corpus.pieces, piece_chars=997))
    monkeypatch.setattr(jobs, "JOB_CHARS", 3000)
    text = odd_text(6000, 3)
    path = write_txt(tmp_path / "book.txt", [text])
    encode_corpus(Corpus([path]), tok, tmp_path / "data", split=Split(val_fraction=0.05), workers=workers, quiet=True)
    assert_cut_at_a_line_end(tok, tmp_path / "data", text, math.ceil(len(text) / 20))
    for n in (1, 700):
        encode_corpus(Corpus([path]), tok, tmp_path / "data", split=Split(val_tokens=n), workers=workers, quiet=True)
        assert_cut_at_a_line_end(tok, tmp_path / "data", text, n, unit="tokens")


def test_a_text_that_begins_at_a_line_end_after_a_space_may_begin_the_tail(tmp_path, monkeypatch, tok):
    """Every line ends in a space, so a line end is a cut only by the character after the newline;
    texts cut there by the jobs may begin the tail (the check of that character was missing)."""
    monkeypatch.setattr(Corpus, "pieces", functools.partialmethod(Corpus.pieces, piece_chars=997))
    monkeypatch.setattr(jobs, "JOB_CHARS", 3000)
    text = "".join(f"the line number {i} ends in a space \n" for i in range(400))
    path = write_txt(tmp_path / "book.txt", [text])
    # The jobs cut each 997-character piece at its last line end: the texts after the cut begin
    # there. A tail of exactly the tokens from such a place on is shortest when it begins there.
    starts = [text.rindex("\n", 0, 997 * k - 1) for k in (3, 7, 11)]
    for start in starts:
        n = len(tok.encode(text[start:], allowed_special=())) + 1  # and its end-of-text
        encode_corpus(Corpus([path]), tok, tmp_path / "data", split=Split(val_tokens=n), quiet=True)
        assert_cut_at_a_line_end(tok, tmp_path / "data", text, n, unit="tokens")
        assert len(split_text(tok, tmp_path / "data")[1].removesuffix(EOT)) == len(text) - start


@pytest.mark.parametrize("pattern", [split.LLAMA3_PATTERN, split.O200K_PATTERN])
def test_the_tail_of_one_text_begins_where_the_tokenizers_own_pattern_allows(tmp_path, tok, pattern):
    """Llama 3's and GPT-4o's patterns glue a newline to punctuation before it and take newline runs
    whole: the tail begins before a run of newlines after a letter or digit, and the tokens of the
    two parts are the tokens of the whole text (GPT-2's rule, used for every pattern before, cut
    '.\\n' and '\\n\\n' apart and changed them)."""
    other = Tokenizer(tok.vocab, tok.merges, tok.special_tokens, pattern=pattern)
    text = "".join("the cat sat on the mat.\n" if i % 10 else "a big dog\n\n" for i in range(1, 200))
    encode_corpus(
        Corpus([write_txt(tmp_path / "book.txt", [text])]), other, tmp_path / "data", split=Split(0.1), quiet=True
    )
    train, val = split_text(other, tmp_path / "data")
    head, tail = train.removesuffix(EOT), val.removesuffix(EOT)
    assert head + tail == text and len(tail) >= len(text) / 10
    assert tail[0] == "\n" and head[-1].isalnum()
    eot = other.special_tokens[EOT]
    ids = other.encode(text, allowed_special=())
    assert tokens_of(tmp_path / "data", "train").tolist() + tokens_of(tmp_path / "data", "val").tolist() == ids[
        : len(other.encode(head, allowed_special=()))
    ] + [eot] + ids[len(other.encode(head, allowed_special=())) :] + [eot]


def test_a_few_documents_are_cut_as_one_text(tmp_path, tok, tok_path):
    docs = [odd_text(300, 4), odd_text(40, 5), odd_text(400, 6)]  # 3 documents: --val-fraction 0.25 needs 4
    out = tmp_path / "data"
    ok(encode_cli(tok_path, [write_txt(tmp_path / "c.txt", docs)], out, "--val-fraction", "0.25"))
    train, val = split_text(tok, out)
    train_docs, val_docs = train.split(EOT)[:-1], val.split(EOT)[:-1]
    assert len(train_docs) + len(val_docs) == 4  # the last document, cut in two
    assert train_docs[:2] == docs[:2] and train_docs[2] + val_docs[0] == docs[2]
    assert len(val_docs[0]) >= math.ceil(sum(map(len, docs)) / 4)
    totals = ShardDir(out).manifest["totals"]
    assert (totals["train"]["documents"], totals["val"]["documents"]) == (3, 1)


def test_val_tokens_that_would_take_every_document_cuts_the_text_instead(tmp_path, tok, tok_path):
    docs = ["a short first document", odd_text(2000, 7)]
    first = len(tok.encode(docs[0])) + 1
    out = tmp_path / "data"
    ok(encode_cli(tok_path, [write_txt(tmp_path / "c.txt", docs)], out, "--val-tokens", first + 1))
    train, val = split_text(tok, out)
    assert (
        train.startswith(docs[0] + EOT)
        and train.removeprefix(docs[0] + EOT).removesuffix(EOT) + val.removesuffix(EOT) == docs[1]
    )
    split = ShardDir(out).manifest["split"]
    assert (split["rule"], split["documents"]) == ("tail", 2)


def test_tiny_shakespeare_splits_with_the_default_flags(tmp_path, tok, tok_path):
    book = shared_file("tinyshakespeare.txt")
    out = tmp_path / "shakespeare"
    res = ok(run("--tokenizer", tok_path, "--input", book, "--out", out, "--quiet"))
    assert "split: 1 document, too few" in res.stdout
    text = book.read_text(encoding="utf-8")
    train, val = split_text(tok, out)
    assert train.removesuffix(EOT) + val.removesuffix(EOT) == text
    assert val.startswith("\n") and math.ceil(len(text) / 100) <= len(val.removesuffix(EOT)) < len(text) / 50


# -- documents of very uneven sizes: the split holds about the tokens asked --------------------


def uneven(big, big_at, n=150, small="document {} is short"):
    """n documents of a few words, but one at `big_at`, `big`, holding most of the text."""
    docs = [small.format(i) for i in range(n)]
    docs[big_at] = big
    return docs


def split_sizes(out):
    """(validation tokens, all tokens) of a directory."""
    totals = ShardDir(out).manifest["totals"]
    return totals["val"]["tokens"], totals["val"]["tokens"] + totals["train"]["tokens"]


@pytest.mark.parametrize(
    "flags, big_at, held_out, why",
    [
        # The default 1% of 150 documents is document 99 alone: a few tokens beside a huge document 0,
        # or nearly all of them when it is the huge one.
        ([], 0, 99, "under half of the {asked:,} asked"),
        ([], 99, 99, "leaving training under half of the rest"),
        # The leading document of --val-tokens is nearly all of them.
        (["--val-tokens", 300], 0, 0, "leaving training under half of the rest"),
    ],
)
def test_documents_too_uneven_for_the_rule_are_split_as_a_tail_of_the_tokens_asked(
    tmp_path, tok, tok_path, flags, big_at, held_out, why
):
    """Validation is then the shortest tail with the tokens asked (at least them, less than twice
    them here), training the rest; nothing is lost, and the summary says why."""
    docs = uneven(odd_text(3000, 9), big_at)
    sizes = [len(t) for t in expected(tok, docs)]
    total = sum(sizes)
    asked = flags[1] if flags else math.ceil(total / 100)
    out = tmp_path / "data"
    res = ok(
        run(
            "--tokenizer",
            tok_path,
            "--input",
            write_txt(tmp_path / "c.txt", docs),
            "--out",
            out,
            "--threads",
            1,
            "--quiet",
            *flags,
        )
    )
    val, _ = split_sizes(out)
    assert asked <= val < 2 * asked and res.stderr == ""
    train, held = split_text(tok, out)
    assert (train + held).replace(EOT, "") == "".join(docs)
    split = ShardDir(out).manifest["split"]
    assert (split["rule"], split["unit"], split["documents"], split["val_at_least"]) == ("tail", "tokens", 150, asked)
    said = f"whole documents held {sizes[held_out]:,} of the {total:,} tokens, {why.format(asked=asked)}"
    assert f"split: {said}: validation is the shortest tail of the text with at least {asked:,} tokens" in res.stdout


@pytest.mark.parametrize(
    "flags, asked", [([], lambda total: math.ceil(total / 100)), (["--val-tokens", 1000], lambda total: 1000)]
)
def test_documents_too_uneven_and_no_tail_to_cut_instead_are_one_warning_line(tmp_path, tok_path, flags, asked):
    """A huge first document of one line: no line end in it, and the 149 short documents after it
    hold fewer tokens than asked. The rule's split stays; one warning line says what it holds."""
    docs = uneven(english_like(25_000, 9).replace("\n", " "), 0, small="a")
    out = tmp_path / "data"
    res = ok(
        run(
            "--tokenizer",
            tok_path,
            "--input",
            write_txt(tmp_path / "c.txt", docs),
            "--out",
            out,
            "--threads",
            1,
            "--quiet",
            *flags,
        )
    )
    val, total = split_sizes(out)
    assert ShardDir(out).manifest["split"]["rule"] == ("leading" if flags else "fraction")
    assert res.stderr == (
        f"warning: {tmp_path / 'c.txt'}: the validation split holds {val:,} of {total:,} tokens, "
        f"{asked(total):,} asked: no document start or line end begins a tail nearer that size; "
        "give --val-input\n"
    )


def test_the_tail_of_a_fraction_of_the_characters_holds_that_fraction_of_the_tokens_too(tmp_path, tok, tok_path):
    """One document whose head is lines of emoji (up to 4 byte tokens each) and whose tail is
    English (a few characters a token): 10% of its characters would be far fewer than 10% of its tokens."""
    text = "\n".join(["\U0001f600\U0001f40d" * 25] * 200 + [english_like(300, 9)])
    out = tmp_path / "data"
    res = ok(
        run(
            "--tokenizer",
            tok_path,
            "--input",
            write_txt(tmp_path / "book.txt", [text]),
            "--out",
            out,
            "--val-fraction",
            "0.1",
            "--threads",
            1,
            "--quiet",
        )
    )
    val, total = split_sizes(out)
    assert math.ceil((total - 1) / 10) <= val < total / 5 and res.stderr == ""
    split = ShardDir(out).manifest["split"]
    assert (split["rule"], split["unit"], split["documents"]) == ("tail", "tokens", 1)
    assert "split: a tail of " in res.stdout and " characters held " in res.stdout


# -- --val-input -----------------------------------------------------------------------------


def test_val_input_is_the_whole_validation_split(tmp_path, tok, tok_path):
    train_docs, val_docs = docs_of(5, seed=8), docs_of(2, seed=9)
    out = tmp_path / "data"
    train_path, val_path = (
        write_txt(tmp_path / "train.txt", train_docs),
        write_jsonl(tmp_path / "valid.jsonl", val_docs),
    )
    res = ok(run("--tokenizer", tok_path, "--input", train_path, "--val-input", val_path, "--out", out, "--quiet"))
    assert split_docs(tokens_of(out, "val"), tok.special_tokens[EOT]) == expected(tok, val_docs)
    assert split_docs(tokens_of(out, "train"), tok.special_tokens[EOT]) == expected(tok, train_docs)
    manifest = ShardDir(out).manifest
    assert manifest["split"]["rule"] == "given" and "split: validation is all of --val-input" in res.stdout
    assert [s["path"] for s in manifest["sources"]] == [str(train_path)]
    assert [s["path"] for s in manifest["val_sources"]] == [str(val_path)]


@pytest.mark.parametrize("flag, value", [("--val-fraction", "0.1"), ("--val-tokens", "10")])
def test_val_input_with_a_split_rule_is_refused(tmp_path, tok_path, flag, value):
    txt = write_txt(tmp_path / "c.txt", docs_of(5))
    res = run("--tokenizer", tok_path, "--input", txt, "--val-input", txt, flag, value, "--out", tmp_path / "data")
    assert_input_error(res, "--val-input", flag)
    assert not (tmp_path / "data").exists()


def test_the_commands_library_call_names_its_arguments_where_the_command_names_flags(tmp_path, tok, tok_path):
    """encode_dataset is what `gptkit pretokenize` calls, its arguments the flags: it returns the
    manifest it wrote; its refusals name its arguments, which the command shows as flags."""
    train_path, val_path = (
        write_txt(tmp_path / "train.txt", docs_of(5, seed=8)),
        write_txt(tmp_path / "v.txt", docs_of(2)),
    )
    encoded = encode_dataset([train_path], tmp_path / "data", tokenizer=tok_path, val_inputs=[val_path], quiet=True)
    assert encoded.manifest == ShardDir(tmp_path / "data").manifest
    assert encoded.manifest["split"]["rule"] == "given"
    assert split_docs(tokens_of(tmp_path / "data", "val"), tok.special_tokens[EOT]) == expected(tok, docs_of(2))
    library, command = "val_input and val_tokens: give one or the other", "--val-input and --val-tokens: give one"
    with pytest.raises(SettingError, match=library):
        encode_dataset([train_path], tmp_path / "out", tokenizer=tok_path, val_inputs=[val_path], val_tokens=10)
    assert_input_error(
        run("-t", tok_path, train_path, "--val-input", val_path, "--val-tokens", 10, "--out", tmp_path / "out"), command
    )
    # --chat refuses a --separator given at all: the library the same, in the command's line
    with pytest.raises(InputError, match="^--separator: not for --chat"):
        encode_dataset([train_path], tmp_path / "out", tokenizer=tok_path, chat=True, separator="x")
    assert not (tmp_path / "out").exists()


def test_an_empty_val_input_is_refused(tmp_path, tok_path):
    (tmp_path / "empty.txt").write_text("")
    res = run(
        "--tokenizer",
        tok_path,
        "--input",
        write_txt(tmp_path / "c.txt", docs_of(5)),
        "--val-input",
        tmp_path / "empty.txt",
        "--out",
        tmp_path / "data",
    )
    assert_input_error(res, "--val-input", "empty.txt", "no documents")
    assert not (tmp_path / "data").exists()


# -- bad input -------------------------------------------------------------------------------


def bad_case(case, tmp_path, tok_path):
    """(tokenizer, inputs, out dir, what the message says) for one kind of bad input."""
    out, txt = tmp_path / "data", write_txt(tmp_path / "c.txt", docs_of(5))
    if case == "missing tokenizer":
        return tmp_path / "none.json", [txt], out, ["--tokenizer", "none.json", "no such file"]
    if case == "empty corpus":
        (tmp_path / "empty.txt").write_text("")
        return tok_path, [tmp_path / "empty.txt"], out, ["empty.txt", "no documents"]
    if case == "binary file":
        (tmp_path / "c.bin").write_bytes(b"\x00\x01 weights")
        return tok_path, [txt, tmp_path / "c.bin"], out, ["c.bin", "binary file"]
    if case == "parquet without the column":
        return (
            tok_path,
            [write_parquet(tmp_path / "c.parquet", docs_of(5), "body")],
            out,
            ["--text-field 'text':", "has no column of that name", "body"],
        )
    if case == "bad jsonl line after many shards":
        path = write_jsonl(tmp_path / "c.jsonl", docs_of(40))
        with open(path, "a") as f:
            f.write("{oops\n")
        return tok_path, [path], out, ["c.jsonl:41", "invalid JSON"]
    if case == "one line":
        return (
            tok_path,
            [write_txt(tmp_path / "one.txt", ["a single document"])],
            out,
            ["one.txt", "1 document,", "no line end"],
        )
    if case == "out dir is a file":
        out.write_text("precious")
        return tok_path, [txt], out, ["exists and is not a directory"]
    if case == "out dir inside a file":
        (tmp_path / "afile").write_text("precious")
        return tok_path, [txt], tmp_path / "afile" / "data", ["--out", "afile"]
    if case == "unwritable parent":
        if os.geteuid() == 0:
            pytest.skip("root ignores permissions")
        (tmp_path / "ro").mkdir(mode=0o500)
        return tok_path, [txt], tmp_path / "ro" / "data", ["--out", "cannot write"]
    raise AssertionError(case)


@pytest.mark.parametrize(
    "case",
    [
        "missing tokenizer",
        "empty corpus",
        "binary file",
        "parquet without the column",
        "bad jsonl line after many shards",
        "one line",
        "out dir is a file",
        "out dir inside a file",
        "unwritable parent",
    ],
)
def test_bad_input_is_one_error_line_and_leaves_nothing(tmp_path, tok_path, case):
    tokenizer, inputs, out, needles = bad_case(case, tmp_path, tok_path)
    before = {p.name for p in tmp_path.iterdir()}
    res = encode_cli(tokenizer, inputs, out, "--shard-tokens", 100)
    if out.is_dir():
        assert list(out.iterdir()) == []  # no shards, manifest, tokenizer.json or temporary files
        before.add(out.name)
    assert {p.name for p in tmp_path.iterdir()} == before
    assert_input_error(res, *needles)


def test_out_dir_of_another_tokenizer_is_refused_unless_overwrite(tmp_path, tok, tok_path, other_tok_path):
    corpus, out = write_txt(tmp_path / "c.txt", docs_of(20)), tmp_path / "data"
    ok(encode_cli(other_tok_path, [corpus], out, "--shard-tokens", 100))
    old = files(out)
    assert len([n for n in old if n.endswith(".bin")]) > 10
    res = encode_cli(tok_path, [corpus], out)
    assert_input_error(res, "holds shards of another tokenizer", tok.fingerprint, "--overwrite")
    assert files(out) == old
    ok(encode_cli(tok_path, [corpus], out, "--overwrite"))
    names = [e["file"] for e in ShardDir(out).manifest["shards"]]
    assert sorted(p.name for p in out.glob("*.bin")) == sorted(names) and len(names) == 2
    assert not set(names) & set(old)  # new names: the old dataset stayed whole until the manifest was replaced
    assert all(read_header(out / n).fingerprint == tok.fingerprint for n in names)
    assert ShardDir(out).manifest["tokenizer"]["fingerprint"] == tok.fingerprint
    assert not [n for n in os.listdir(out) if ".tmp-" in n]


def test_out_dir_of_the_same_tokenizer_is_replaced(tmp_path, tok, tok_path):
    out = tmp_path / "data"
    ok(encode_cli(tok_path, [write_txt(tmp_path / "a.txt", docs_of(20))], out, "--shard-tokens", 100))
    old = [e["file"] for e in ShardDir(out).manifest["shards"]]
    (out / ".data_train_000001.bin.tmp-999999999").write_bytes(b"left by a killed run")
    (out / ".manifest.json.tmp-999999999").write_bytes(b"left by a killed run")
    (out / "data_train_000900.bin").write_bytes(
        (out / old[1]).read_bytes()
    )  # renamed in by a run killed before its manifest
    ok(encode_cli(tok_path, [write_txt(tmp_path / "b.txt", ["one", "two"])], out, "--val-tokens", 1))
    val, train = [e["file"] for e in ShardDir(out).manifest["shards"]]
    assert (val, train) == (
        f"data_val_{len(old):06d}.bin",
        f"data_train_{len(old) + 1:06d}.bin",
    )  # the first free numbers
    assert sorted(os.listdir(out)) == [train, val, "manifest.json", "tokenizer.json"]
    assert tokens_of(out, "train").tolist() == tok.encode("two") + [tok.special_tokens[EOT]]


def test_a_live_writers_temporaries_stay_and_their_numbers_are_not_taken(tmp_path, tok_path):
    out = tmp_path / "data"
    out.mkdir()
    live = out / f".data_val_000000.bin.tmp-{os.getpid()}"  # this process runs: a writer still at work
    live.write_bytes(b"being written")
    ok(encode_cli(tok_path, [write_txt(tmp_path / "c.txt", docs_of(8))], out))
    assert live.read_bytes() == b"being written"
    assert [e["file"] for e in ShardDir(out).manifest["shards"]] == ["data_val_000001.bin", "data_train_000002.bin"]


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_interrupted_run_leaves_the_earlier_run_untouched(tmp_path, monkeypatch, tok, error):
    corpus, out = write_txt(tmp_path / "c.txt", docs_of(40)), tmp_path / "data"
    encode_corpus(Corpus([corpus]), tok, out, split=Split(0.25), shard_tokens=400, quiet=True)
    before = files(out)
    real, calls = jobs._encode_job, []

    def encode_job_then_fail(job):
        calls.append(job)
        if len(calls) > 1:
            raise error("interrupted")
        return real(job)

    monkeypatch.setattr(jobs, "JOB_CHARS", 3000)
    monkeypatch.setattr(jobs, "_encode_job", encode_job_then_fail)
    with pytest.raises(error):  # the first job fills several (uncommitted) shards of 50 tokens
        encode_corpus(Corpus([corpus]), tok, out, split=Split(0.25), shard_tokens=50, quiet=True)
    assert len(calls) == 2
    assert files(out) == before


# -- inspect and verify ----------------------------------------------------------------------


@pytest.fixture
def built(tmp_path, tok_path):
    out = tmp_path / "data"
    ok(
        encode_cli(
            tok_path,
            [write_txt(tmp_path / "c.txt", docs_of(30, seed=6))],
            out,
            "--val-fraction",
            "0.25",
            "--shard-tokens",
            500,
        )
    )
    return out


def test_inspect_directory(built, tok):
    res = ok(run("inspect", built))
    manifest = ShardDir(built).manifest
    for e in manifest["shards"]:
        assert (
            f"{e['file']}: uint16 (magic 20240520, version 1), {e['tokens']:,} tokens, {e['documents']:,} documents"
            in res.stdout
        )
    assert res.stdout.count(f"tokenizer {tok.fingerprint}") == len(manifest["shards"]) + 1
    for name, t in manifest["totals"].items():
        assert f"{name}: {t['documents']:,} documents, {t['tokens']:,} tokens" in res.stdout
    first = open_shard(built / "data_val_000000.bin").tokens[:32].tolist()
    assert f"first 32 tokens of data_val_000000.bin: {' '.join(map(str, first))}" in res.stdout
    assert f"decoded: {tok.decode(first)!r}" in res.stdout


def test_inspect_plain_llmc_file(tmp_path, tok, tok_path):
    ids = tok.encode("hello world, said the cat")
    header = np.zeros(256, "<i4")
    header[:3] = 20240520, 1, len(ids)
    path = tmp_path / "fineweb_val_000000.bin"
    path.write_bytes(header.tobytes() + np.array(ids, "<u2").tobytes())
    res = ok(run("inspect", path, "--tokenizer", tok_path))
    assert f"magic 20240520, version 1), {len(ids)} tokens (plain llm.c header" in res.stdout
    assert "decoded: 'hello world, said the cat'" in res.stdout
    assert "pass --tokenizer to decode" in ok(run("inspect", path)).stdout


def test_verify_good_directory(built):
    res = ok(run("verify", built))
    assert res.stdout.count("ok ") == len(ShardDir(built).manifest["shards"]) and "verified" in res.stdout


def damage(built, how, other_tok_path=None):
    """Spoil one train shard (or its manifest entry); returns the shard's path and what verify should say."""
    path = built / "data_train_000001.bin"
    raw = bytearray(path.read_bytes())
    if how == "flipped byte":
        raw[1024 + 10] ^= 0x01  # token 5: an even id becomes odd or back, still below the vocabulary size
        path.write_bytes(bytes(raw))
        return path, "corrupted"
    if how == "truncated":
        path.write_bytes(bytes(raw[:-4]))
        return path, "truncated: 4 bytes missing"
    if how == "tokenizer.json of another tokenizer":
        (built / "tokenizer.json").write_bytes(other_tok_path.read_bytes())
        return built / "tokenizer.json", "manifest.json says"
    # The header has no checksum of its own (its CRC-32 is of the tokens): only the manifest can tell.
    header = read_header(path)
    if how == "header's end-of-text id":
        path.write_bytes(dataclasses.replace(header, eot_id=0).to_bytes() + raw[HEADER_BYTES:])
        return path, f"end-of-text id 0 in the header, {header.eot_id} in manifest.json"
    if how == "header's tokenizer fingerprint":
        path.write_bytes(dataclasses.replace(header, fingerprint="0123456789abcdef").to_bytes() + raw[HEADER_BYTES:])
        return path, f"tokenizer fingerprint 0123456789abcdef in the header, {header.fingerprint} in manifest.json"
    if how == "plain llm.c header":
        path.write_bytes(ShardHeader(header.dtype, header.num_tokens).to_bytes() + raw[HEADER_BYTES:])
        return (
            path,
            "a plain llm.c header (no vocabulary, checksum or fingerprint), listed in manifest.json as one of ours",
        )
    manifest = ShardDir(built).manifest
    entry = next(e for e in manifest["shards"] if e["file"] == path.name)
    says = {
        "manifest's document count": f"document count {header.num_docs} in the header, {header.num_docs + 1} in manifest.json",
        "manifest's token count": f"token count {header.num_tokens} in the header, {header.num_tokens + 1} in manifest.json",
        "manifest's CRC-32": f"CRC-32 {header.checksum:08x} in the header, 00000000 in manifest.json",
        "train shard listed as val": "a train shard by its name, listed under 'val' in manifest.json",
        "train shard listed twice": "listed twice in manifest.json",
        "manifest's train total": f"totals.train.tokens is {manifest['totals']['train']['tokens'] + 1:,}, the headers of its "
        f"train shards add up to {manifest['totals']['train']['tokens']:,}",
    }[how]
    if how == "manifest's document count":
        entry["documents"] += 1
    elif how == "manifest's token count":
        entry["tokens"] += 1
    elif how == "manifest's CRC-32":
        entry["crc32"] = "00000000"
    elif how == "train shard listed as val":
        entry["split"] = "val"
    elif how == "train shard listed twice":
        manifest["shards"].append(entry)
    elif how == "manifest's train total":
        manifest["totals"]["train"]["tokens"] += 1
        path = built / "manifest.json"
    (built / "manifest.json").write_text(json.dumps(manifest))
    return path, says


@pytest.mark.parametrize(
    "how",
    [
        "flipped byte",
        "truncated",
        "tokenizer.json of another tokenizer",
        "header's end-of-text id",
        "header's tokenizer fingerprint",
        "plain llm.c header",
        "manifest's document count",
        "manifest's token count",
        "manifest's CRC-32",
        "train shard listed as val",
        "train shard listed twice",
        "manifest's train total",
    ],
)
def test_verify_names_the_bad_shard(built, how, other_tok_path):
    path, says = damage(built, how, other_tok_path)
    res = run("verify", built)
    assert res.exit_code == 1 and "Traceback" not in res.output
    failed = [line for line in res.stderr.splitlines() if line.startswith("FAILED")]
    assert len(failed) == 1 and str(path) in failed[0] and says in failed[0], res.stderr
    assert res.stderr.splitlines()[-1].startswith("Error: 1 problem(s)")


@pytest.mark.parametrize(
    "field, value, says",
    [
        ("eot_id", None, "end-of-text id {} in the header, none in manifest.json"),
        ("dtype", "uint32", "token type {} in the header, uint32 in manifest.json"),
    ],
)
def test_verify_names_every_shard_whose_header_disagrees_with_the_manifest(built, field, value, says):
    """A fact of all shards edited in the manifest (training would stop its samples at another
    end-of-text token): one line for each shard."""
    manifest = ShardDir(built).manifest
    before, manifest[field] = manifest[field], value
    (built / "manifest.json").write_text(json.dumps(manifest))
    res = run("verify", built)
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert [line for line in res.stderr.splitlines() if line.startswith("FAILED")] == [
        f"FAILED {built / e['file']}: {says.format(before)}" for e in manifest["shards"]
    ]


def test_verify_names_unlisted_shards_but_passes(built):
    """A shard the manifest does not list is no part of the dataset: a run killed in its commit leaves such."""
    path = built / "data_train_000099.bin"
    path.write_bytes((built / "data_train_000001.bin").read_bytes())
    res = ok(run("verify", built))
    assert f"note: {path}: not listed in manifest.json" in res.stderr and "data_train_000099" not in res.stdout


def test_verify_single_file(built):
    ok(run("verify", built / "data_val_000000.bin"))
    damage(built, "flipped byte")
    assert run("verify", built / "data_train_000001.bin").exit_code == 1


# -- kill -9 at every step of the commit -----------------------------------------------------


# `pretokenize` in a process that stops (sleeps until killed) at step PAUSE_AT of its commit: step 0
# is the commit's start, with every shard written under its temporary name; each later step is
# the moment before one change of the directory (a rename or a removal), and the last one the
# moment after the commit's last change. It writes PAUSE_MARKER when it stops.
STOPPING_PRETOKENIZE = """
import os, sys, time
from pathlib import Path

from gptkit.pretokenize.cli import main
from gptkit.shared.shard_set import ShardSet

pause_at, marker = int(os.environ["PAUSE_AT"]), Path(os.environ["PAUSE_MARKER"])
steps = None  # of the commit so far; None outside it


def step():
    global steps
    if steps == pause_at:
        marker.write_text(str(steps))
        time.sleep(600)
    steps += 1


def counted(change):
    def change_in_steps(*args, **kwargs):
        if steps is not None:
            step()
        return change(*args, **kwargs)
    return change_in_steps


def commit(self, manifest, real_commit=ShardSet.commit):
    global steps
    steps = 0
    step()
    real_commit(self, manifest)
    step()


os.replace, os.unlink = counted(os.replace), counted(os.unlink)
ShardSet.commit = commit
sys.argv[0] = "pretokenize"
main()
"""


def dataset(out_dir):
    """The tokens of every shard of each split, in order: what a reader of the directory gets."""
    return {
        split: [open_shard(p).tokens.tolist() for p in ShardDir(out_dir).shard_paths(split)]
        for split in ("val", "train")
    }


def test_a_kill_at_any_step_of_the_commit_leaves_the_old_dataset_or_the_new(tmp_path, tok_path):
    """Re-encode a directory, A over B and B over A, killing each run at the next step of its
    commit: after every kill the directory verifies and is exactly one of the two datasets; each
    run removes what the killed ones left, and the last, unkilled one leaves only its dataset."""
    corpora = [write_txt(tmp_path / f"{name}.txt", docs_of(30, seed=seed)) for name, seed in (("a", 11), ("b", 12))]
    references = []
    for corpus in corpora:
        ok(encode_cli(tok_path, [corpus], tmp_path / corpus.stem / "data", "--shard-tokens", 2000))
        references.append(dataset(tmp_path / corpus.stem / "data"))
    assert references[0] != references[1] and all(len(r["train"]) >= 2 for r in references)
    out, marker = tmp_path / "data", tmp_path / "paused"
    shutil.copytree(tmp_path / "a" / "data", out)
    current, pause_at, started = 0, 0, time.monotonic()
    left = {"old": 0, "new": 0}  # datasets the kills left
    while True:
        target = 1 - current
        args = [
            "--tokenizer",
            tok_path,
            "--input",
            corpora[target],
            "--out",
            out,
            "--val-fraction",
            "0.25",
            "--shard-tokens",
            2000,
            "--threads",
            1,
            "--quiet",
        ]
        proc = subprocess.Popen(
            [sys.executable, "-c", STOPPING_PRETOKENIZE, *map(str, args)],
            cwd=Path(__file__).resolve().parents[2],
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PAUSE_AT": str(pause_at), "PAUSE_MARKER": str(marker)},
        )
        while not marker.exists() and proc.poll() is None and time.monotonic() - started < 120:
            time.sleep(0.005)
        if not marker.exists():  # a commit of fewer steps: it ran to the end
            assert proc.wait(timeout=60) == 0, proc.stderr.read()
            assert dataset(out) == references[target]
            break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stderr.close()
        marker.unlink()
        ok(run("verify", out))
        assert dataset(out) in references
        left["new" if dataset(out) == references[target] else "old"] += 1
        current = references.index(dataset(out))
        if pause_at == 0:
            assert current == 1 - target, "killed before its commit: the old dataset"
        leftovers = [name for name in os.listdir(out) if ".tmp-" in name]
        assert all(name.endswith(f".tmp-{proc.pid}") for name in leftovers), "an earlier run's temporaries stayed"
        pause_at += 1
    assert pause_at >= 8 and left["old"] >= 4 and left["new"] >= 2, left
    listed = [e["file"] for e in ShardDir(out).manifest["shards"]]
    assert sorted(os.listdir(out)) == sorted([*listed, "manifest.json", "tokenizer.json"])
