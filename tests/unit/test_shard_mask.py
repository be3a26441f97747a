"""Shards with a mask (chat data): the mask after the tokens, the header saying so (extension
version 2, slot 11), the checksum covering it; a masked directory read back by ShardData."""

import json

import numpy as np
import pytest

from gptkit.shared.errors import InputError
from gptkit.shared.shard_data import ShardData
from gptkit.shared.shard_dir import MANIFEST, ShardDir
from gptkit.shared.shard_set import ShardSet
from gptkit.shared.shards import HEADER_BYTES, ShardError, ShardWriter, open_shard, read_header, verify_shard

FACTS = dict(vocab_size=100, eot_id=99, fingerprint="0123456789abcdef")


def write(path, tokens, mask, parts=2):
    writer = ShardWriter(path, "<u2", **FACTS, mask=mask is not None)
    for t, m in zip(np.array_split(tokens, parts), np.array_split(mask, parts) if mask is not None else [None] * parts):
        writer.write(t, 1, m)
    header = writer.close()
    writer.commit()
    return header


@pytest.fixture
def masked(tmp_path):
    tokens = np.arange(10, dtype="<u2") * 7
    mask = np.array([0, 0, 1, 1, 1, 0, 0, 1, 1, 0], np.uint8)
    write(tmp_path / "x_train_000001.bin", tokens, mask)
    return tmp_path / "x_train_000001.bin", tokens, mask


def test_mask_round_trips_after_the_tokens(masked):
    path, tokens, mask = masked
    raw = path.read_bytes()
    assert len(raw) == HEADER_BYTES + 10 * 2 + 10
    ints = np.frombuffer(raw[:HEADER_BYTES], "<i4")
    assert ints[4] == 2 and ints[11] == 1  # extension version 2: slot 11 says a mask follows
    assert raw[HEADER_BYTES + 20 :] == mask.tobytes()
    shard = verify_shard(path)
    assert shard.header.has_mask and shard.tokens.tolist() == tokens.tolist() and shard.mask.tolist() == mask.tolist()


def test_a_shard_without_a_mask_is_as_before(tmp_path):
    header = write(tmp_path / "p.bin", np.arange(10, dtype="<u2"), None)
    raw = (tmp_path / "p.bin").read_bytes()
    assert len(raw) == HEADER_BYTES + 20 and np.frombuffer(raw[:HEADER_BYTES], "<i4")[4] == 1
    assert not header.has_mask and open_shard(tmp_path / "p.bin").mask is None


def test_the_checksum_covers_the_mask(masked):
    path, _, _ = masked
    raw = bytearray(path.read_bytes())
    raw[-2] ^= 1  # a 1 becomes 0: a valid mask value, a different mask
    path.write_bytes(raw)
    with pytest.raises(ShardError, match="corrupted: the tokens' and mask's CRC-32"):
        verify_shard(path)


def test_mask_values_other_than_0_and_1_are_refused(masked):
    path, _, _ = masked
    raw = bytearray(path.read_bytes())
    raw[-3] = 7
    path.write_bytes(raw)
    with pytest.raises(ShardError, match="the mask of token 7 is 7, not 0 or 1"):
        verify_shard(path)


def test_a_truncated_mask_is_named(masked):
    path, _, _ = masked
    path.write_bytes(path.read_bytes()[:-4])
    with pytest.raises(
        ShardError, match=r"truncated: 4 bytes missing \(the header says 10 uint16 tokens and their mask"
    ):
        read_header(path)


def test_a_mask_flag_against_the_version_is_refused(masked):
    path, _, _ = masked
    raw = bytearray(path.read_bytes())
    raw[11 * 4] = 0
    path.write_bytes(raw)
    with pytest.raises(ShardError, match=r"header extension version 2 with mask flag 0 \(slot 11\), expected 1"):
        read_header(path)


class Tok:
    vocab_size, fingerprint = 100, "0123456789abcdef"

    def save(self, path):
        path.write_text("{}")


def masked_directory(path, mask=True):
    shards = ShardSet(
        path, Tok(), 99, 8, mask=mask, chat_files={"chat_template.jinja": "{{ messages }}"} if mask else None
    )
    shards.begin()
    rng = np.random.default_rng(0)
    counts = {}
    for split in ("val", "train"):
        tokens = rng.integers(0, 99, 30).astype("<u2")
        shards.write(split, tokens, [10, 20, 30], (tokens % 3 == 0).astype(np.uint8) if mask else None)
        counts[split] = (3, 30)
    shards.finish_all()
    shards.commit(shards.manifest(counts, {"split": {"text": "t"}}, eot_token="<|endoftext|>", tokenizer_source=None))
    return ShardDir(path)


def test_a_masked_directory_reads_back(tmp_path):
    data = masked_directory(tmp_path / "d")
    assert data.has_mask and data.manifest["mask"] is True and data.chat_files[0].read_text() == "{{ messages }}"
    train = ShardData(data, "train", 100, Tok.fingerprint, 4)
    assert train.masked and len(train.shards) == 4  # 30 tokens in shards of 8
    tokens, mask = train.span(5, 20), train.mask_span(5, 20)
    assert mask.tolist() == (tokens % 3 == 0).astype(np.uint8).tolist()
    # a plain dataset written into the same directory removes the template, and reads without a mask
    plain = masked_directory(tmp_path / "d", mask=False)
    assert not plain.has_mask and "mask" not in plain.manifest and not plain.chat_files[0].exists()


def test_a_manifest_that_disagrees_about_the_mask_is_refused(tmp_path):
    data = masked_directory(tmp_path / "d")
    manifest = json.loads(data.manifest_path.read_text())
    del manifest["mask"]
    data.manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(ShardError, match=f"mask flag 1 in the header, 0 in {MANIFEST}"):
        ShardData(ShardDir(tmp_path / "d"), "train", 100, Tok.fingerprint, 4)
    manifest["mask"] = "yes"
    data.manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(InputError, match='mask is "yes", expected true or false'):
        ShardDir(tmp_path / "d").manifest
