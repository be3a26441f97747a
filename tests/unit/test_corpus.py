import bz2
import gzip
import json
import lzma
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gptkit.shared import corpus
from gptkit.shared.corpus import DEFAULT_SEPARATOR as SEP
from gptkit.shared.corpus import Corpus, expand_inputs
from gptkit.shared.errors import InputError


def docs_of(c, piece_chars=1 << 20):
    """Reassemble pieces into documents, checking the piece contract on the way."""
    docs, current = [], []
    for text, end in c.pieces(piece_chars):
        assert isinstance(text, str) and 0 < len(text) <= piece_chars
        current.append(text)
        if end:
            docs.append("".join(current))
            current = []
    assert current == [], "last piece of the corpus must end its document"
    return docs


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def write_parquet(path, columns, row_group_size=2):
    pq.write_table(pa.table(columns), path, row_group_size=row_group_size)
    return path


# --- .txt ---


def test_txt_documents_are_byte_exact_and_empty_ones_skipped(tmp_path):
    text = f"first doc\n{SEP}\n second  {SEP}{SEP}{SEP}third\n\n"
    c = Corpus([write(tmp_path / "a.txt", text)])
    assert docs_of(c) == ["first doc\n", "\n second  ", "third\n\n"]
    assert c.bytes_read == c.total_bytes == len(text.encode())


def test_txt_without_separator_is_one_document(tmp_path):
    p = write(tmp_path / "a.txt", "no separator here\nat all")
    assert docs_of(Corpus([p])) == ["no separator here\nat all"]
    p = write(tmp_path / "b.txt", f"x{SEP}y")
    assert docs_of(Corpus([p], separator=None)) == [f"x{SEP}y"]
    assert docs_of(Corpus([p], separator="\n\n")) == [f"x{SEP}y"]


def test_custom_separator_and_documents_never_span_files(tmp_path):
    a = write(tmp_path / "a.txt", "one\n\ntwo")
    b = write(tmp_path / "b.txt", "three\n\n")
    assert docs_of(Corpus([a, b], separator="\n\n")) == ["one", "two", "three"]


def test_empty_file_and_separator_only_file_yield_nothing(tmp_path):
    a = write(tmp_path / "a.txt", "")
    b = write(tmp_path / "b.txt", SEP * 3)
    assert list(Corpus([a, b]).pieces()) == []


def test_long_document_comes_in_pieces(tmp_path, monkeypatch):
    monkeypatch.setattr(corpus, "BLOCK_BYTES", 16)
    doc = "abcdefghij" * 10
    p = write(tmp_path / "a.txt", f"{doc}{SEP}short")
    pieces = list(Corpus([p]).pieces(piece_chars=30))
    assert [end for _, end in pieces].count(True) == 2
    first = pieces[: pieces.index((pieces[-2][0], True)) + 1]
    assert [end for _, end in first] == [False] * (len(first) - 1) + [True]
    assert len(first) >= 4 and all(0 < len(t) <= 30 for t, _ in first)
    assert "".join(t for t, _ in first) == doc
    assert pieces[-1] == ("short", True)


def test_separator_cut_exactly_at_piece_end_leaves_no_empty_last_piece(tmp_path, monkeypatch):
    # The document fills whole pieces and is immediately followed by the separator.
    monkeypatch.setattr(corpus, "BLOCK_BYTES", 10)
    p = write(tmp_path / "a.txt", "x" * 20 + SEP + "y" * 10)
    pieces = list(Corpus([p]).pieces(piece_chars=10))
    assert all(t for t, _ in pieces)
    assert docs_of(Corpus([p]), piece_chars=10) == ["x" * 20, "y" * 10]


@settings(max_examples=200, deadline=None)
@given(
    docs=st.lists(st.text(alphabet="ab<|é€😀\n", max_size=30), max_size=8),
    sep=st.sampled_from([SEP, "\n\n", "|", "€😀"]),
    block=st.integers(1, 20),
    piece_chars=st.integers(1, 25),
)
def test_blocks_split_separators_and_utf8_anywhere(tmp_path_factory, docs, sep, block, piece_chars):
    text = sep.join(docs)
    p = write(tmp_path_factory.mktemp("c") / "a.txt", text)
    old, corpus.BLOCK_BYTES = corpus.BLOCK_BYTES, block  # monkeypatch is function-scoped, not per example
    try:
        c = Corpus([p], separator=sep)
        assert docs_of(c, piece_chars) == [d for d in text.split(sep) if d]
        assert c.invalid_utf8 == 0
    finally:
        corpus.BLOCK_BYTES = old


def test_invalid_utf8_is_replaced_counted_and_warned_once(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(corpus, "BLOCK_BYTES", 3)
    raw = b"ok \xff\xfe caf\xc3\xa9 \xe2\x82 end" + SEP.encode() + b"\x80tail"
    good = write(tmp_path / "a.txt", "clean")
    bad = write(tmp_path / "b.txt", raw)
    c = Corpus([good, bad])
    assert docs_of(c) == ["clean"] + raw.decode(errors="replace").split(SEP)
    assert c.invalid_utf8 == 4
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", f"4 invalid UTF-8 sequence(s) replaced with U+FFFD (first in {bad})")
    ]


def test_valid_utf8_prints_no_warning(tmp_path, caplog):
    docs_of(Corpus([write(tmp_path / "a.txt", "héllo € 😀")]))
    assert caplog.records == []


# --- .jsonl ---


def test_jsonl_default_and_custom_field(tmp_path):
    lines = [{"text": "a\nb", "body": "x"}, {"text": "", "body": "y"}, {"text": "c", "body": "z"}]
    p = write(tmp_path / "a.jsonl", "\n".join(map(json.dumps, lines[:2])) + "\n\n  \n" + json.dumps(lines[2]))
    assert docs_of(Corpus([p])) == ["a\nb", "c"]  # empty document and blank lines skipped
    assert docs_of(Corpus([p], text_field="body")) == ["x", "y", "z"]


def test_jsonl_long_document_is_split(tmp_path):
    p = write(tmp_path / "a.jsonl", json.dumps({"text": "x" * 25}) + "\n")
    assert list(Corpus([p]).pieces(10)) == [("x" * 10, False), ("x" * 10, False), ("x" * 5, True)]


def test_jsonl_invalid_json_names_file_and_line(tmp_path):
    p = write(tmp_path / "a.jsonl", '{"text": "ok"}\n\n{"text": oops}\n')
    with pytest.raises(InputError, match=r"a\.jsonl:3: invalid JSON \("):
        docs_of(Corpus([p]))


@pytest.mark.parametrize("line", ['{"body": "x"}', '{"text": 3}', '{"text": null}', '["text"]'])
def test_jsonl_missing_or_non_string_field(tmp_path, line):
    p = write(tmp_path / "a.jsonl", '{"text": "ok"}\n' + line + "\n")
    with pytest.raises(InputError, match=r"text_field 'text': \S*a\.jsonl:2 has no string field of that name"):
        docs_of(Corpus([p]))


def test_jsonl_invalid_utf8_inside_string(tmp_path, caplog):
    p = write(tmp_path / "a.jsonl", b'{"text": "a\xffb"}\n')
    c = Corpus([p])
    assert docs_of(c) == ["a\ufffdb"] and c.invalid_utf8 == 1
    assert "1 invalid UTF-8" in caplog.text


# --- compressed ---


def zstd_compress(data):
    if corpus.zstd is None:
        pytest.skip("no zstd module (Python < 3.14 without the zstandard package)")
    if hasattr(corpus.zstd, "compress"):
        return corpus.zstd.compress(data)  # compression.zstd
    return corpus.zstd.ZstdCompressor().compress(data)


COMPRESS = {".gz": gzip.compress, ".xz": lzma.compress, ".bz2": bz2.compress, ".zst": zstd_compress}


@pytest.mark.parametrize("suffix", list(COMPRESS))
def test_compressed_txt_and_jsonl(tmp_path, monkeypatch, suffix):
    monkeypatch.setattr(corpus, "BLOCK_BYTES", 5)
    compress = COMPRESS[suffix]
    a = write(tmp_path / f"a.txt{suffix}", compress(f"one{SEP}twö{SEP}".encode()))
    b = write(tmp_path / f"b.jsonl{suffix}", compress(b'{"text": "three"}\n{"text": "four"}\n'))
    e = write(tmp_path / f"corpus.en{suffix}", compress(b"five\nsix"))
    c = Corpus([a, b, e])
    assert docs_of(c) == ["one", "twö", "three", "four", "five\nsix"]
    assert c.bytes_read == c.total_bytes == sum(p.stat().st_size for p in (a, b, e))


def test_a_long_zst_frame_window_is_read(tmp_path):
    """`zstd --long=31` writes frames whose window the decompressors refuse by default."""
    zstandard = pytest.importorskip("zstandard")
    text = "".join(f"line {i}\n" for i in range(20000))
    params = zstandard.ZstdCompressionParameters.from_level(3, window_log=28, enable_ldm=True)
    p = write(tmp_path / "a.txt.zst", zstandard.ZstdCompressor(compression_params=params).compress(text.encode()))
    assert docs_of(Corpus([p])) == [text]


def test_zst_without_a_zstd_module_says_what_to_install(tmp_path, monkeypatch):
    p = write(tmp_path / "a.jsonl.zst", b"whatever")
    monkeypatch.setattr(corpus, "zstd", None)
    with pytest.raises(InputError) as info:
        Corpus([p])
    assert str(info.value) == f"{p}: reading .zst files needs the zstandard package: pip install zstandard"


@pytest.mark.parametrize("name", ["a.txt.gz", "a.jsonl.gz", "a.txt.xz", "a.jsonl.bz2", "a.txt.zst"])
def test_bad_compressed_file_names_the_file(tmp_path, name):
    if name.endswith(".zst") and corpus.zstd is None:
        pytest.skip("no zstd module")
    p = write(tmp_path / name, b"this is not compressed data")
    with pytest.raises(InputError, match=rf"{name}: cannot read as \.(txt|jsonl)\.") as info:
        docs_of(Corpus([p]))
    assert "\n" not in str(info.value)


def test_a_corrupt_end_of_a_compressed_file_names_the_file(tmp_path):
    data = lzma.compress(("x" * 100 + SEP).encode() * 1000)
    p = write(tmp_path / "a.txt.xz", data[: len(data) // 2])  # the first block reads fine
    with pytest.raises(InputError, match=r"a\.txt\.xz: cannot read as \.txt\.xz"):
        docs_of(Corpus([p]))


# --- .parquet ---


def test_parquet_row_groups_in_order_nulls_skipped(tmp_path):
    texts = ["a", None, "b", "", "c\nd", "e", None]
    p = write_parquet(tmp_path / "a.parquet", {"id": list(range(7)), "text": texts})
    assert pq.ParquetFile(p).num_row_groups == 4
    c = Corpus([p])
    assert docs_of(c) == ["a", "b", "c\nd", "e"]
    assert c.bytes_read == c.total_bytes
    q = write_parquet(tmp_path / "b.parquet", {"content": ["x" * 25]})
    assert list(Corpus([q], text_field="content").pieces(10))[-1] == ("x" * 5, True)


def test_parquet_missing_column_lists_the_columns(tmp_path):
    p = write_parquet(tmp_path / "a.parquet", {"id": [1], "body": ["x"]})
    with pytest.raises(
        InputError, match=r"text_field 'text': \S*a\.parquet has no column of that name \(columns: id, body"
    ):
        docs_of(Corpus([p]))


def test_parquet_non_string_column(tmp_path):
    p = write_parquet(tmp_path / "a.parquet", {"text": [1, 2]})
    with pytest.raises(InputError, match=r"column 'text' holds int64, expected strings"):
        docs_of(Corpus([p]))


def test_corrupt_parquet_names_the_file(tmp_path):
    p = write(tmp_path / "a.parquet", b"PAR1 not really parquet")
    with pytest.raises(InputError, match=r"a\.parquet: cannot read as \.parquet"):
        docs_of(Corpus([p]))


# --- expanding inputs ---


def test_directories_and_globs_expand_sorted_without_duplicates(tmp_path):
    for name in ["d/b.txt", "d/a.jsonl", "d/sub/c.parquet", "d/sub/z.txt.gz", "d/notes.md", "e/x.txt"]:
        write(tmp_path / name, "")
    d = tmp_path / "d"
    expected = [d / "a.jsonl", d / "b.txt", d / "sub/c.parquet", d / "sub/z.txt.gz"]
    assert expand_inputs([d]) == expected
    assert expand_inputs([str(d / "**/*.txt*")]) == [d / "b.txt", d / "sub/z.txt.gz"]
    # order of inputs is kept; files already seen (by any spelling) are not repeated
    e = tmp_path / "e/x.txt"
    assert expand_inputs([e, d, str(d / "b.txt"), d / "sub/../b.txt", e]) == [e] + expected


def test_missing_path_or_empty_glob(tmp_path):
    with pytest.raises(InputError, match=r"^input '.*nope\*': no such file or directory"):
        expand_inputs([str(tmp_path / "nope*")])
    with pytest.raises(InputError, match="no such file or directory"):
        Corpus([tmp_path / "missing.txt"])


def test_a_named_file_of_any_other_name_is_text(tmp_path):
    names = ["corpus.en", "notes.md", "data.csv", "README", "book.text"]
    paths = [write(tmp_path / name, f"text of {name}\n{SEP}more") for name in names]
    assert expand_inputs(paths) == paths
    assert docs_of(Corpus(paths)) == [d for name in names for d in (f"text of {name}\n", "more")]


def test_a_directory_holds_its_txt_jsonl_parquet_files_not_hidden_or_other_ones(tmp_path):
    for name in [
        "d/a.txt",
        "d/a.txt.sha256",
        "d/a.txt.part",
        "d/README.md",
        "d/corpus.en",
        "d/.hidden.txt",
        "d/.cache/x.txt",
        "d/sub/e.TXT",
    ]:
        write(tmp_path / name, "")
    write(tmp_path / "d/b.jsonl.bz2", bz2.compress(b""))
    write(tmp_path / "d/c.txt.xz", lzma.compress(b""))
    d = tmp_path / "d"
    assert expand_inputs([d]) == [d / "a.txt", d / "b.jsonl.bz2", d / "c.txt.xz", d / "sub/e.TXT"]
    (tmp_path / "other").mkdir()
    write(tmp_path / "other/corpus.en", "x")
    with pytest.raises(
        InputError, match=r"other: no \.txt, \.jsonl or \.parquet files in it \(other files are read when named\)"
    ):
        expand_inputs([tmp_path / "other"])
    assert expand_inputs([str(tmp_path / "other/*")]) == [tmp_path / "other/corpus.en"]  # a glob names its files


@pytest.mark.parametrize(
    "name, data",
    [
        ("model.bin", b"\x00\x01\x02 weights"),
        ("utf16.txt", "text".encode("utf-16")),
        ("archive.txt.gz", gzip.compress(b"ok so far\x00", mtime=0)),  # mtime 0: the same id in every process
    ],
)
def test_a_binary_file_is_refused_in_one_line(tmp_path, name, data):
    path = write(tmp_path / name, data)
    with pytest.raises(InputError) as info:
        Corpus([write(tmp_path / "fine.txt", "fine"), path])
    assert str(info.value) == f"{path}: a binary file (NUL bytes in it), not text"


def test_a_nul_byte_after_the_first_block_is_text(tmp_path):
    p = write(tmp_path / "a.txt", b"x" * corpus.SNIFF_BYTES + b"\x00y")
    assert docs_of(Corpus([p])) == ["x" * corpus.SNIFF_BYTES + "\x00y"]


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root can read anything")
def test_unreadable_file(tmp_path):
    p = write(tmp_path / "a.txt", "x")
    p.chmod(0)
    with pytest.raises(InputError, match=r"a\.txt: permission denied"):
        expand_inputs([p])


def test_total_bytes_is_known_before_reading(tmp_path):
    a = write(tmp_path / "a.txt", "12345")
    b = write(tmp_path / "b.jsonl", '{"text": "x"}\n')
    c = Corpus([a, b])
    assert (c.total_bytes, c.bytes_read) == (5 + 14, 0)
