"""A tokenizer's cut to its first merges (tokenizer/cut.py): the tokenizer that training to that size
makes, and the data's ids mapped to the cut's exactly as encoding with the cut would give them."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gptkit.shared.corpus import Corpus
from gptkit.tokenizer import Tokenizer, train_bpe
from gptkit.tokenizer.cut import Unmerge, cuttable, first_merges
from tests.conftest import english_like

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
SPECIALS = ["<|endoftext|>", "<|end|>"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    path = tmp_path_factory.mktemp("cut") / "text.txt"
    path.write_text(english_like(40_000, seed=3) + " 0x3f2a 12345 1999-12-31 \u00e9t\u00e9 \u4e2d\u6587")
    return train_bpe(Corpus([path]), 1_200, SPECIALS, quiet=True), path


def test_the_cut_is_the_tokenizer_that_training_at_its_size_makes(trained):
    tokenizer, path = trained
    cut = first_merges(tokenizer, 500)
    again = train_bpe(Corpus([path]), 256 + 500 + len(SPECIALS), SPECIALS, quiet=True)
    assert (cut.vocab, cut.merges, cut.special_tokens) == (again.vocab, again.merges, again.special_tokens)
    assert first_merges(tokenizer, len(tokenizer.merges)) is tokenizer
    assert first_merges(tokenizer, 0).vocab_size == 256 + len(SPECIALS)


@settings(max_examples=60, deadline=None)
@given(st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=300), st.integers(0, 1_200 - 258))
def test_unmerging_the_ids_is_encoding_with_the_cut(trained, text, merges):
    tokenizer, _ = trained
    text = text + "<|endoftext|>" + text[::-1] + "<|end|> 2024 \u00e9t\u00e9"
    unmerge = Unmerge(tokenizer, merges)
    mapped = unmerge(np.array(tokenizer.encode(text)), np.uint16)
    assert mapped.tolist() == unmerge.tokenizer.encode(text)
    assert unmerge.tokenizer.decode(mapped.tolist()) == text


def test_unmerging_works_a_block_at_a_time(trained, monkeypatch):
    tokenizer, path = trained
    ids = np.array(tokenizer.encode(path.read_text()[:20_000]))
    whole = Unmerge(tokenizer, 100)(ids, np.uint16)
    monkeypatch.setattr("gptkit.tokenizer.cut.BLOCK", 97)
    assert np.array_equal(Unmerge(tokenizer, 100)(ids, np.uint16), whole)
    assert Unmerge(tokenizer, 100).length(ids) == len(whole)


def test_a_tokenizer_not_listed_in_merge_order_cannot_be_cut(trained):
    tokenizer, _ = trained
    assert cuttable(tokenizer)
    order = list(range(tokenizer.vocab_size))
    order[300], order[301] = 301, 300  # two merged tokens swapped: merge 44 no longer makes id 300
    swapped = Tokenizer(
        [tokenizer.vocab[i] for i in order],
        [(order.index(a), order.index(b)) for a, b in tokenizer.merges],
        tokenizer.special_tokens,
    )
    assert not cuttable(swapped)


@pytest.mark.skipif(not (SHARED / "gpt2_vocab.json").is_file(), reason="needs ../shared/data")
def test_gpt2_cut_to_its_bytes_encodes_each_byte_as_its_own_token():
    gpt2 = Tokenizer.from_gpt2_files(SHARED / "gpt2_vocab.json", SHARED / "gpt2_merges.txt")
    assert cuttable(gpt2)
    text = "Hello, world! 12345 caf\u00e9<|endoftext|>"
    unmerge = Unmerge(gpt2, 0)
    mapped = unmerge(np.array(gpt2.encode(text)), np.uint16)
    assert mapped.tolist() == unmerge.tokenizer.encode(text)
    assert len(mapped) == len(text.replace("<|endoftext|>", "").encode()) + 1
