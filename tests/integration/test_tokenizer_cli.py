"""The `tokenizer` command line: train, convert, encode, decode, info.

Most tests drive the click group in-process with CliRunner (click 8.2+ keeps stdout and
stderr apart in `result.stdout` / `result.stderr`; `result.output` holds both); one runs
`python -m gptkit.tokenizer` for real.
"""

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import gptkit.tokenizer.bpe
import gptkit.tokenizer.files
import gptkit.tokenizer.train
from gptkit.tokenizer import Tokenizer
from gptkit.tokenizer.cli import cli

REPO = Path(__file__).resolve().parents[2]
GPT2_DATA = REPO.parent / "shared" / "data"
EOT = "<|endoftext|>"

WORDS = (
    "the a of and to in was he she it they we you that with for on as at by from "
    "little big old new red green small bright dark quiet happy sad brave "
    "cat dog bird tree house garden river boat window morning night friend story "
    "ran saw said looked found wanted played jumped walked smiled opened "
    "very really then again never always today tomorrow"
).split()
EXTRA = ["café", "naïve", "Übung", "東京", "🙂", "3.14", "2024", "don't", "it's", "e-mail"]


def sentences(rng, n, words=WORDS, extra=EXTRA):
    out = []
    for _ in range(n):
        ws = [rng.choice(words) if rng.random() > 0.08 else rng.choice(extra) for _ in range(rng.randint(4, 14))]
        s = " ".join(ws)
        out.append(s[0].upper() + s[1:] + rng.choice([".", "!", "?", ",", "..."]))
    return out


def make_docs(seed, n_docs, words=WORDS, extra=EXTRA):
    rng = random.Random(seed)
    docs = []
    for _ in range(n_docs):
        parts = sentences(rng, rng.randint(1, 5), words, extra)
        docs.append(rng.choice([" ", "\n", "  ", "\n\n"]).join(parts) + rng.choice(["", "\n"]))
    return docs


def write_corpus(path, docs):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(EOT.join(docs), encoding="utf-8")
    return path


@pytest.fixture
def runner():
    return CliRunner()


@pytest.fixture
def corpus(tmp_path):
    return write_corpus(tmp_path / "corpus.txt", make_docs(1, 120))


def train_args(inputs, out, vocab_size=300, *extra):
    args = ["train"]
    for i in inputs:
        args += ["--input", str(i)]
    return args + ["--vocab-size", str(vocab_size), "--out", str(out), "--quiet", "--threads", "1", *extra]


def invoke_ok(runner, args, **kwargs):
    res = runner.invoke(cli, [str(a) for a in args], **kwargs)
    assert res.exit_code == 0, (res.output, res.exception)
    assert "Traceback" not in res.output
    return res


def trained(runner, tmp_path, inputs, name="tok.json", vocab_size=300, *extra):
    out = tmp_path / name
    invoke_ok(runner, train_args(inputs, out, vocab_size, *extra))
    return out


def ids_of(res):
    return [int(x) for x in res.stdout.split()]


def assert_input_error(res, *needles, out_dir=None):
    """Exit status 2, one `Error:` line naming what was wrong, no traceback, no file left."""
    assert res.exit_code == 2, (res.output, res.exception)
    assert "Traceback" not in res.output
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("Error: ")
    for needle in needles:
        assert str(needle) in lines[0]
    if out_dir is not None:
        assert sorted(os.listdir(out_dir)) == []


# -- train -> info -> encode -> decode --------------------------------------------------------


def test_train_info_encode_decode_round_trip(runner, tmp_path, corpus):
    out = tmp_path / "tok.json"
    res = invoke_ok(runner, train_args([corpus], out))
    assert out.is_file()
    tok = Tokenizer.from_file(out)
    assert tok.vocab_size == 300
    assert tok.special_tokens == {EOT: 299}
    assert f"fingerprint {tok.fingerprint}" in res.stdout
    assert str(out) in res.stdout

    info = invoke_ok(runner, ["info", "-t", out]).stdout
    assert "vocab size: 300\n" in info
    assert f"merges: {len(tok.merges)}\n" in info and len(tok.merges) == 300 - 256 - 1
    assert f"{EOT} = 299" in info
    assert f"fingerprint: {tok.fingerprint}" in info

    text = f'The little cat said:  "Hello,\tworld!"\n  café 東京 🙂{EOT}Then again.  \n'
    ids = ids_of(invoke_ok(runner, ["encode", "-t", out, text]))
    assert ids == tok.encode(text)
    assert 299 in ids
    assert len(ids) < len(text.encode("utf-8"))  # some merges were used
    assert invoke_ok(runner, ["decode", "-t", out, *ids]).stdout == text + "\n"
    assert invoke_ok(runner, ["decode", "-t", out], input=" ".join(map(str, ids)) + "\n").stdout == text + "\n"
    assert invoke_ok(runner, ["decode", "-t", out], input="\n".join(map(str, ids))).stdout == text + "\n"
    # encode from standard input
    assert ids_of(invoke_ok(runner, ["encode", "-t", out], input=text)) == ids


def test_specials_as_text(runner, tmp_path, corpus):
    out = trained(runner, tmp_path, [corpus])
    text = f"the cat{EOT}the dog"
    special = ids_of(invoke_ok(runner, ["encode", "-t", out, text]))
    plain = ids_of(invoke_ok(runner, ["encode", "-t", out, "--specials-as-text", text]))
    assert special.count(299) == 1
    assert 299 not in plain
    assert plain != special
    assert invoke_ok(runner, ["decode", "-t", out, *plain]).stdout == text + "\n"
    assert invoke_ok(runner, ["decode", "-t", out, *special]).stdout == text + "\n"


SPACED = "<|end of text|>"  # a special token with spaces: the only kind a safe cut can fall inside


def test_encode_large_file_streams_and_matches_whole_text(runner, tmp_path, corpus, monkeypatch):
    out = trained(runner, tmp_path, [corpus], "tok.json", 300, "--special-token", EOT, "--special-token", SPACED)
    tok = Tokenizer.from_file(out)
    assert tok.special_tokens == {EOT: 298, SPACED: 299}
    rng = random.Random(7)
    parts, size = [], 0
    while size < 2 * (1 << 20) + 100_000:
        s = " ".join(sentences(rng, 50)) + rng.choice(["\n", "\n\n", EOT, " ", "   "])
        parts.append(s)
        size += len(s)
    text = "".join(parts)
    # Around the end of the first 1 Mi-character read, the last safe cut falls inside SPACED;
    # around the second, EOT straddles the read boundary, followed by a run of spaces.
    read = 1 << 20
    text = text[: read - 22] + SPACED + text[read - 22 :]
    text = text[: 2 * read - 5] + EOT + "      " + text[2 * read - 5 :]
    path = tmp_path / "big.txt"
    path.write_text(text, encoding="utf-8")
    assert path.stat().st_size > 1 << 20

    pieces = []
    original = gptkit.tokenizer.bpe.Tokenizer.encode_iterable

    def spy(self, texts, allowed_special="all"):
        def counted():
            for t in texts:
                pieces.append(len(t))
                yield t

        return original(self, counted(), allowed_special)

    monkeypatch.setattr(gptkit.tokenizer.bpe.Tokenizer, "encode_iterable", spy)
    res = invoke_ok(runner, ["encode", "-t", out, "--file", path])
    assert len(pieces) >= 3  # really streamed
    assert sum(pieces) == len(text)
    expected = tok.encode(text)
    assert expected.count(299) == 1 and expected.count(298) == text.count(EOT)
    assert ids_of(res) == expected
    assert res.stdout.endswith("\n") and res.stdout.count("\n") == 1


def test_encode_empty_text_prints_empty_line(runner, tmp_path, corpus):
    out = trained(runner, tmp_path, [corpus])
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert invoke_ok(runner, ["encode", "-t", out, "--file", empty]).stdout == "\n"
    assert invoke_ok(runner, ["encode", "-t", out, ""]).stdout == "\n"


# -- inputs ----------------------------------------------------------------------------------


DISTINCT = {"a.txt": "quokka", "b.txt": "zyzzyva", "c.txt": "xylograph"}


def distinct_files(directory):
    """Three corpus files, each with a word of its own repeated often enough to be merged."""
    paths = []
    for i, (name, word) in enumerate(DISTINCT.items()):
        docs = make_docs(10 + i, 20)
        docs = [d + f" {word}" * 40 for d in docs]
        paths.append(write_corpus(directory / name, docs))
    return paths


def single_token(tok_path, word):
    return len(Tokenizer.from_file(tok_path).encode(" " + word)) == 1


def test_extra_positional_inputs_are_all_used(runner, tmp_path):
    a, b, c = distinct_files(tmp_path / "data")
    only_a = trained(runner, tmp_path, [a], "a.json", 340)
    assert single_token(only_a, "quokka")
    assert not single_token(only_a, "zyzzyva") and not single_token(only_a, "xylograph")

    positional = tmp_path / "positional.json"
    invoke_ok(runner, ["train", "--input", a, b, c, "--vocab-size", 340, "--out", positional, "-q", "--threads", 1])
    for word in DISTINCT.values():
        assert single_token(positional, word), word
    repeated = trained(runner, tmp_path, [a, b, c], "repeated.json", 340)
    assert positional.read_bytes() == repeated.read_bytes()

    # A glob given to --input (not expanded by a shell) works the same way.
    globbed = trained(runner, tmp_path, [tmp_path / "data" / "*.txt"], "glob.json", 340)
    assert globbed.read_bytes() == repeated.read_bytes()


def test_directory_input(runner, tmp_path):
    data = tmp_path / "data"
    a, b, c = distinct_files(data)
    nested = data / "nested"
    nested.mkdir()
    c.rename(nested / c.name)
    (data / "notes.md").write_text("ignored " * 1000)
    from_dir = trained(runner, tmp_path, [data], "dir.json", 340)
    from_files = trained(runner, tmp_path, [a, b, nested / c.name], "files.json", 340)
    assert from_dir.read_bytes() == from_files.read_bytes()
    for word in DISTINCT.values():
        assert single_token(from_dir, word), word


def test_workers_give_identical_files(runner, tmp_path, monkeypatch):
    # Small batches, so that 2 workers really share the counting.
    monkeypatch.setattr(gptkit.tokenizer.train, "BATCH_CHARS", 2000)
    corpus = write_corpus(tmp_path / "corpus.txt", make_docs(3, 300))
    outputs = []
    for workers in (1, 2):
        out = tmp_path / f"w{workers}.json"
        args = train_args([corpus], out, 320)
        args[args.index("--threads") + 1] = str(workers)
        invoke_ok(runner, args)
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    assert len(Tokenizer.from_file(tmp_path / "w1.json").merges) == 320 - 257


def test_max_bytes_trains_on_a_prefix(runner, tmp_path):
    first = make_docs(20, 10)
    later = [d + " zyzzyva" * 30 for d in make_docs(21, 40)]
    corpus = write_corpus(tmp_path / "corpus.txt", first + later)
    full = trained(runner, tmp_path, [corpus], "full.json", 300)
    prefix_bytes = len(EOT.join(first).encode())
    limited = trained(runner, tmp_path, [corpus], "limited.json", 300, "--max-bytes", str(prefix_bytes // 2))
    assert single_token(full, "zyzzyva")
    assert not single_token(limited, "zyzzyva")
    assert Tokenizer.from_file(full).fingerprint != Tokenizer.from_file(limited).fingerprint
    # Tiny and huge limits never fail: whole documents, at least one of them.
    for limit in (1, 10, 10**12):
        out = tmp_path / f"m{limit}.json"
        res = runner.invoke(cli, train_args([corpus], out, 300, "--max-bytes", str(limit)))
        assert res.exit_code == 0, res.output
        assert out.is_file()
    assert (tmp_path / f"m{10**12}.json").read_bytes() == full.read_bytes()


def test_tie_break(runner, tmp_path):
    # (a,b), (c,d) and (" ",c) all count 3: the greatest pair of byte strings is (c,d); HF's trainer takes (a,b).
    corpus = write_corpus(tmp_path / "corpus.txt", ["ab ab ab cd cd cd"])
    first_merge = {}
    for name, extra in (
        ("default", ()),
        ("lexicographic", ("--tie-break", "lexicographic")),
        ("hf", ("--tie-break", "hf")),
    ):
        tokenizer = Tokenizer.from_file(trained(runner, tmp_path, [corpus], f"{name}.json", 257 + 1, *extra))
        first_merge[name] = tuple(tokenizer.vocab[i] for i in tokenizer.merges[0])
    assert first_merge == {"default": (b"c", b"d"), "lexicographic": (b"c", b"d"), "hf": (b"a", b"b")}


# -- bad input -------------------------------------------------------------------------------


@pytest.fixture
def out_dir(tmp_path):
    d = tmp_path / "out"
    d.mkdir()
    return d


def test_missing_input(runner, tmp_path, out_dir):
    missing = tmp_path / "nope.txt"
    res = runner.invoke(cli, train_args([missing], out_dir / "tok.json"))
    assert_input_error(res, "nope.txt", out_dir=out_dir)


def test_no_input_at_all(runner, out_dir):
    res = runner.invoke(cli, ["train", "--vocab-size", "300", "--out", str(out_dir / "tok.json"), "-q"])
    assert_input_error(res, "--input", out_dir=out_dir)


def test_any_suffix_is_text_and_a_binary_file_is_refused(runner, tmp_path, out_dir):
    named = tmp_path / "corpus.en"
    named.write_text("the cat sat on the mat " * 50)
    res = runner.invoke(cli, train_args([named], out_dir / "tok.json"))
    assert res.exit_code == 0, res.output
    binary = tmp_path / "weights.bin"
    binary.write_bytes(b"\x00\x01the cat\x00" * 100)
    (tmp_path / "second").mkdir()
    res = runner.invoke(cli, train_args([binary], tmp_path / "second" / "tok.json"))
    assert_input_error(res, "weights.bin", out_dir=tmp_path / "second")


@pytest.mark.parametrize("content", ["", EOT, EOT * 5])
def test_empty_corpus(runner, tmp_path, out_dir, content):
    path = tmp_path / "empty.txt"
    path.write_text(content)
    res = runner.invoke(cli, train_args([path], out_dir / "tok.json"))
    assert_input_error(res, "empty.txt", out_dir=out_dir)


def test_vocab_size_too_small(runner, corpus, out_dir):
    res = runner.invoke(cli, train_args([corpus], out_dir / "tok.json", 100))
    assert_input_error(res, "--vocab-size", "100", out_dir=out_dir)
    # 256 bytes + 1 special token is the least; one less fails, exactly that works.
    res = runner.invoke(cli, train_args([corpus], out_dir / "tok.json", 256))
    assert_input_error(res, "--vocab-size", "256", out_dir=out_dir)
    invoke_ok(runner, train_args([corpus], out_dir / "tok.json", 257))
    assert Tokenizer.from_file(out_dir / "tok.json").merges == []


def test_duplicate_special_token(runner, corpus, out_dir):
    args = train_args([corpus], out_dir / "tok.json", 300, "--special-token", "<|a|>", "--special-token", "<|a|>")
    assert_input_error(runner.invoke(cli, args), "--special-token", "<|a|>", out_dir=out_dir)


def test_empty_special_token(runner, corpus, out_dir):
    args = train_args([corpus], out_dir / "tok.json", 300, "--special-token", "")
    assert_input_error(runner.invoke(cli, args), "--special-token", out_dir=out_dir)


def test_unknown_tie_break(runner, corpus, out_dir):
    res = runner.invoke(cli, train_args([corpus], out_dir / "tok.json", 300, "--tie-break", "greatest"))
    assert_input_error(res, "--tie-break", "greatest", "lexicographic", "hf", out_dir=out_dir)


def test_bad_input_leaves_an_existing_file_alone(runner, corpus, out_dir):
    out = out_dir / "tok.json"
    out.write_text('{"model": {"type": "BPE"}, "precious": true}')  # a tokenizer.json, which a run may replace
    res = runner.invoke(cli, train_args([corpus], out, 100))
    assert_input_error(res, "--vocab-size")
    assert "precious" in out.read_text()
    assert os.listdir(out_dir) == ["tok.json"]


@pytest.fixture
def tok_json(runner, tmp_path, corpus):
    return json.loads(trained(runner, tmp_path, [corpus]).read_text(encoding="utf-8"))


def write_json(path, data):
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def malformed_cases(tok_json):
    no_model = dict(tok_json)
    del no_model["model"]
    not_bpe = json.loads(json.dumps(tok_json))
    not_bpe["model"]["type"] = "WordPiece"
    missing_token = json.loads(json.dumps(tok_json))
    missing_token["model"]["merges"].append("Ġ qqqqq")
    not_a_pair = json.loads(json.dumps(tok_json))
    not_a_pair["model"]["merges"].append("t h e")
    no_merges = json.loads(json.dumps(tok_json))
    del no_merges["model"]["merges"]
    merge_twice = json.loads(json.dumps(tok_json))
    merge_twice["model"]["merges"].append(merge_twice["model"]["merges"][0])
    return {
        "not JSON": ('{"model": {"type": "BPE", ', "not a readable JSON file"),
        "not UTF-8": (b'\xff\xfe{"model": 1}', "not a readable JSON file"),
        "JSON list": ([1, 2, 3], "BPE model"),
        "no model": (no_model, "BPE model"),
        "not BPE": (not_bpe, "BPE model"),
        "merge naming a missing token": (missing_token, "qqqqq"),
        "merge not a pair": (not_a_pair, "not a pair"),
        "no merges": (no_merges, "model.merges is missing"),  # HF refuses it too
        "a merge listed twice": (
            merge_twice,
            f"merge {tok_json['model']['merges'][0]!r} is listed twice (merges 1 and ",
        ),
    }


@pytest.mark.parametrize("command", [["info"], ["encode", "hello"], ["decode", "1", "2"]])
def test_malformed_tokenizer_json(runner, tmp_path, tok_json, command):
    for data, needle in malformed_cases(tok_json).values():
        path = write_json(tmp_path / "bad tokenizer.json", data)
        res = runner.invoke(cli, [command[0], "-t", str(path), *command[1:]])
        assert_input_error(res, "bad tokenizer.json", needle)


@pytest.mark.parametrize("damage", ["added token without content", "pre_tokenizer not an object", "non-integer id"])
def test_malformed_tokenizer_json_shapes(runner, tmp_path, tok_json, damage):
    if damage == "added token without content":
        tok_json["added_tokens"] = [{"id": 299}]
    elif damage == "pre_tokenizer not an object":
        tok_json["pre_tokenizer"] = ["ByteLevel"]
    else:
        tok_json["model"]["vocab"]["Ġzz"] = "300"
    path = write_json(tmp_path / "bad.json", tok_json)
    assert_input_error(runner.invoke(cli, ["info", "-t", str(path)]), "bad.json")


def test_missing_tokenizer_file(runner, tmp_path):
    for command in (["info"], ["encode", "x"], ["decode", "1"]):
        res = runner.invoke(cli, [command[0], "-t", str(tmp_path / "absent.json"), *command[1:]])
        assert_input_error(res, "absent.json")


def test_default_tokenizer_path_is_tokenizer_json_in_cwd(runner, tmp_path, corpus, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert_input_error(runner.invoke(cli, ["info"]), "tokenizer.json")
    invoke_ok(runner, ["train", "--input", corpus, "--vocab-size", 300, "-q", "--threads", 1])
    assert os.listdir(elsewhere) == ["tokenizer.json"]
    assert "vocab size: 300" in invoke_ok(runner, ["info"]).stdout


def test_decode_bad_ids(runner, tmp_path, corpus):
    out = trained(runner, tmp_path, [corpus])
    assert_input_error(runner.invoke(cli, ["decode", "-t", str(out), "12", "abc"]), "IDS", "abc")
    assert_input_error(runner.invoke(cli, ["decode", "-t", str(out), "1.5"]), "IDS")
    assert_input_error(runner.invoke(cli, ["decode", "-t", str(out)], input="12 x13\n"), "IDS", "x13")
    assert_input_error(runner.invoke(cli, ["decode", "-t", str(out), "12", "300"]), "IDS", "300")
    assert_input_error(runner.invoke(cli, ["decode", "-t", str(out), "99999999999"]), "IDS", "99999999999")
    assert_input_error(runner.invoke(cli, ["decode", "-t", str(out)], input="-301"), "IDS", "-301")
    # The largest id is fine.
    assert invoke_ok(runner, ["decode", "-t", out, "299"]).stdout == EOT + "\n"


def test_decode_negative_id_is_an_error(runner, tmp_path, corpus):
    out = trained(runner, tmp_path, [corpus])
    assert_input_error(runner.invoke(cli, ["decode", "-t", str(out)], input="-1"), "IDS", "-1")


def test_encode_bad_arguments(runner, tmp_path, corpus):
    out = trained(runner, tmp_path, [corpus])
    assert_input_error(
        runner.invoke(cli, ["encode", "-t", str(out), "--file", str(tmp_path / "absent.txt")]), "--file", "absent.txt"
    )
    both = runner.invoke(cli, ["encode", "-t", str(out), "--file", str(corpus), "text"])
    assert_input_error(both, "--file")


def test_encode_file_keeps_carriage_returns(runner, tmp_path, corpus):
    out = trained(runner, tmp_path, [corpus])
    path = tmp_path / "crlf.txt"
    path.write_bytes(b"the cat\r\nsat on a mat\r\n")
    res = invoke_ok(runner, ["encode", "-t", out, "--file", path])
    assert ids_of(res) == Tokenizer.from_file(out).encode("the cat\r\nsat on a mat\r\n")


# -- interrupted training ---------------------------------------------------------------------


def interrupt(*args, **kwargs):
    raise KeyboardInterrupt


@pytest.mark.parametrize("existing", [None, b'{"an": "older tokenizer"}\n'])
def test_interrupted_training_leaves_no_file(runner, corpus, out_dir, monkeypatch, existing):
    out = out_dir / "tok.json"
    if existing is not None:
        out.write_bytes(existing)
    monkeypatch.setattr(gptkit.tokenizer.train, "learn_merges", interrupt)
    res = runner.invoke(cli, train_args([corpus], out))
    assert res.exit_code != 0
    assert "Traceback" not in res.output
    if existing is None:
        assert os.listdir(out_dir) == []
    else:
        assert os.listdir(out_dir) == ["tok.json"]
        assert out.read_bytes() == existing


@pytest.mark.parametrize("existing", [None, b'{"an": "older tokenizer"}\n'])
def test_interrupt_while_writing_leaves_no_partial_file(runner, corpus, out_dir, monkeypatch, existing):
    out = out_dir / "tok.json"
    if existing is not None:
        out.write_bytes(existing)

    def half_written(data, f, **kwargs):
        f.write('{"version": "1.0", "trunc')
        f.flush()
        assert any(name.startswith(".tok.json.tmp-") for name in os.listdir(out_dir))
        raise KeyboardInterrupt

    monkeypatch.setattr(gptkit.tokenizer.files.json, "dump", half_written)
    res = runner.invoke(cli, train_args([corpus], out))
    assert res.exit_code != 0
    assert sorted(os.listdir(out_dir)) == ([] if existing is None else ["tok.json"])
    if existing is not None:
        assert out.read_bytes() == existing


# -- convert ---------------------------------------------------------------------------------


def gpt2_style_files(tok_json, directory):
    """vocab.json + merges.txt holding the same tokenizer as a tokenizer.json."""
    vocab = directory / "vocab.json"
    merges = directory / "merges.txt"
    vocab.write_text(json.dumps(tok_json["model"]["vocab"], ensure_ascii=False), encoding="utf-8")
    merges.write_text("#version: 0.2\n" + "\n".join(tok_json["model"]["merges"]) + "\n", encoding="utf-8")
    return vocab, merges


def test_convert_round_trip(runner, tmp_path, tok_json):
    vocab, merges = gpt2_style_files(tok_json, tmp_path)
    out = tmp_path / "converted.json"
    res = invoke_ok(runner, ["convert", "--vocab", vocab, "--merges", merges, "--out", out])
    original = Tokenizer.from_file(tmp_path / "tok.json")
    converted = Tokenizer.from_file(out)
    assert converted.fingerprint == original.fingerprint
    assert converted.special_tokens == {EOT: 299}
    assert original.fingerprint in res.stdout


def test_convert_malformed_merges(runner, tmp_path, tok_json, out_dir):
    vocab, merges = gpt2_style_files(tok_json, tmp_path)
    good = merges.read_text(encoding="utf-8")
    for bad_line, needle in [("t h e", "merges.txt"), ("Ġthe", "merges.txt")]:
        merges.write_text(good + bad_line + "\n", encoding="utf-8")
        res = runner.invoke(
            cli, ["convert", "--vocab", str(vocab), "--merges", str(merges), "--out", str(out_dir / "tok.json")]
        )
        assert_input_error(res, needle, out_dir=out_dir)
    # A merge naming an unknown token is reported too (naming one of the two files).
    merges.write_text(good + "Ġ qqqqq\n", encoding="utf-8")
    res = runner.invoke(
        cli, ["convert", "--vocab", str(vocab), "--merges", str(merges), "--out", str(out_dir / "tok.json")]
    )
    assert_input_error(res, "qqqqq", out_dir=out_dir)
    # A merge listed twice: HF ranks it by its last listing, we would by its first.
    merges.write_text(good + good.splitlines()[1] + "\n", encoding="utf-8")
    res = runner.invoke(
        cli, ["convert", "--vocab", str(vocab), "--merges", str(merges), "--out", str(out_dir / "tok.json")]
    )
    assert_input_error(res, "merges.txt", "is listed twice", out_dir=out_dir)
    # And a missing merges file.
    res = runner.invoke(
        cli,
        [
            "convert",
            "--vocab",
            str(vocab),
            "--merges",
            str(tmp_path / "absent.txt"),
            "--out",
            str(out_dir / "tok.json"),
        ],
    )
    assert_input_error(res, "absent.txt", out_dir=out_dir)


def test_convert_special_tokens_must_be_in_the_vocabulary(runner, tmp_path, tok_json, out_dir):
    vocab, merges = gpt2_style_files(tok_json, tmp_path)
    res = runner.invoke(
        cli,
        [
            "convert",
            "--vocab",
            str(vocab),
            "--merges",
            str(merges),
            "--special-token",
            "<nope>",
            "--out",
            str(out_dir / "tok.json"),
        ],
    )
    assert_input_error(res, "--special-token '<nope>': not in", "vocab.json", out_dir=out_dir)
    # Named ones replace the default; without the vocabulary's end of text, none is special.
    tok_json["model"]["vocab"]["<|pad|>"] = pad = len(tok_json["model"]["vocab"])
    vocab, merges = gpt2_style_files(tok_json, tmp_path)
    invoke_ok(
        runner,
        ["convert", "--vocab", vocab, "--merges", merges, "--special-token", "<|pad|>", "--out", tmp_path / "a.json"],
    )
    assert Tokenizer.from_file(tmp_path / "a.json").special_tokens == {"<|pad|>": pad}
    del tok_json["model"]["vocab"]["<|pad|>"], tok_json["model"]["vocab"][EOT]
    vocab, merges = gpt2_style_files(tok_json, tmp_path)
    invoke_ok(runner, ["convert", "--vocab", vocab, "--merges", merges, "--out", tmp_path / "b.json"])
    assert Tokenizer.from_file(tmp_path / "b.json").special_tokens == {}


def test_convert_gpt2(runner, tmp_path):
    vocab, merges = GPT2_DATA / "gpt2_vocab.json", GPT2_DATA / "gpt2_merges.txt"
    if not (vocab.is_file() and merges.is_file()):
        pytest.skip(f"GPT-2 files not found in {GPT2_DATA}")
    out = tmp_path / "gpt2.json"
    res = invoke_ok(runner, ["convert", "--vocab", vocab, "--merges", merges, "--out", out])
    assert "50,257 tokens" in res.stdout
    info = invoke_ok(runner, ["info", "-t", out]).stdout
    assert "vocab size: 50,257\n" in info
    assert "merges: 50,000\n" in info
    assert f"{EOT} = 50256" in info
    # GPT-2's well-known ids.
    assert ids_of(invoke_ok(runner, ["encode", "-t", out, f"Hello world{EOT}"])) == [15496, 995, 50256]


# -- the real program ------------------------------------------------------------------------


def test_python_dash_m_help(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-m", "gptkit.tokenizer", "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Usage: gptkit tokenizer ")
    commands = proc.stdout.split("Commands:", 1)[1].split()
    for command in ("train", "convert", "encode", "decode", "info"):
        assert command in commands
    assert proc.stderr == ""
