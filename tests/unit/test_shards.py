"""The token shard format (shared/shards.py): llm.c-compatible headers, our extension, checks, writing."""

import os
import zlib

import numpy as np
import pytest

from gptkit.shared.errors import InputError
from gptkit.shared.files import AtomicFile
from gptkit.shared.shards import (
    HEADER_BYTES,
    ShardError,
    ShardHeader,
    ShardWriter,
    dtype_for,
    open_shard,
    read_header,
    verify_shard,
)

U16, U32 = np.dtype("<u2"), np.dtype("<u4")
FACTS = dict(vocab_size=450, eot_id=449, fingerprint="0123456789abcdef")


def write_llmc(path, tokens, dtype):
    """A shard as llm.c's `write_datafile` writes it: magic, version, count, then zeros, then the tokens."""
    header = np.zeros(256, "<i4")
    header[:3] = (20240520, 1, len(tokens)) if dtype == U16 else (20240801, 7, len(tokens))
    path.write_bytes(header.tobytes() + np.asarray(tokens, dtype).tobytes())
    return path


def write_ours(path, tokens, dtype=U16, **facts):
    writer = ShardWriter(path, dtype, **{**FACTS, **facts})
    writer.write(np.asarray(tokens, dtype), docs_ended=1)
    header = writer.close()
    writer.commit()
    return header


def shard_error(match, fn, *args, **kwargs):
    with pytest.raises(ShardError, match=match) as info:
        fn(*args, **kwargs)
    assert isinstance(info.value, InputError) and info.value.exit_code == 2
    assert "\n" not in str(info.value)
    return str(info.value)


# -- the header ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype, magic, version", [(U16, 20240520, 1), (U32, 20240801, 7)])
@pytest.mark.parametrize("eot_id", [449, None])
def test_header_round_trip_keeps_llmc_slots_and_our_extension(dtype, magic, version, eot_id):
    header = ShardHeader(
        dtype, 12345, vocab_size=70000, eot_id=eot_id, num_docs=17, checksum=0xDEADBEEF, fingerprint="fedcba9876543210"
    )
    raw = header.to_bytes()
    assert len(raw) == HEADER_BYTES == 1024
    ints = np.frombuffer(raw, "<i4")
    assert ints[:3].tolist() == [magic, version, 12345]
    assert ints[6] == (-1 if eot_id is None else eot_id)
    assert not ints[11:].any()
    back = ShardHeader.from_bytes(raw, "x.bin")
    assert back == header and back.extended and back.magic == magic and back.version == version


def test_plain_header_round_trip_is_exactly_llmc():
    raw = ShardHeader(U16, 7).to_bytes()
    ints = np.frombuffer(raw, "<i4")
    assert ints[:3].tolist() == [20240520, 1, 7] and not ints[3:].any()
    back = ShardHeader.from_bytes(raw, "x.bin")
    assert back == ShardHeader(U16, 7) and not back.extended


def test_dtype_for_vocab_size():
    assert dtype_for(65536) == U16
    assert dtype_for(65537) == U32


# -- writing and reading ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [U16, U32])
def test_writer_writes_a_shard_that_open_shard_maps(tmp_path, dtype):
    path = tmp_path / "d_train_000001.bin"
    tokens = np.array([5, 0, 449, 300, 449, 7], dtype)
    writer = ShardWriter(path, dtype, **FACTS)
    writer.write(tokens[:4], docs_ended=1)
    writer.write(tokens[4:].tobytes(), docs_ended=1)
    assert not path.exists()
    assert [p.name for p in tmp_path.iterdir()] == [f".{path.name}.tmp-{os.getpid()}"]
    header = writer.close()
    assert not path.exists()
    writer.commit()
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    assert path.stat().st_size == 1024 + len(tokens) * dtype.itemsize
    assert header.checksum == zlib.crc32(tokens.tobytes())
    assert (header.num_tokens, header.num_docs, header.eot_id, header.vocab_size) == (6, 2, 449, 450)

    shard = open_shard(path, vocab_size=450)
    assert shard.header == header == read_header(path)
    assert isinstance(shard.tokens, np.memmap) and shard.tokens.dtype == dtype
    assert shard.tokens.tolist() == tokens.tolist()
    with pytest.raises(ValueError):
        shard.tokens[0] = 1  # read-only
    verify_shard(path)


def test_writer_discard_leaves_nothing(tmp_path):
    writer = ShardWriter(tmp_path / "d_val_000000.bin", U16, **FACTS)
    writer.write(np.arange(10, dtype=U16))
    writer.discard()
    assert list(tmp_path.iterdir()) == []


def test_empty_shard_opens_and_verifies(tmp_path):
    path = tmp_path / "d_val_000000.bin"
    write_ours(path, [])
    assert len(verify_shard(path).tokens) == 0


@pytest.mark.parametrize("dtype", [U16, U32])
def test_plain_llmc_shard_is_read(tmp_path, dtype):
    tokens = [1, 2, 50256, 65535] if dtype == U16 else [1, 2, 100_000, 2**31]
    path = write_llmc(tmp_path / "fineweb_val_000000.bin", tokens, dtype)
    shard = open_shard(path, vocab_size=123)  # no vocabulary in the header: nothing to check it against
    assert not shard.header.extended and shard.header.dtype == dtype
    assert shard.header.num_docs is None and shard.header.checksum is None
    assert shard.tokens.tolist() == tokens
    assert verify_shard(path).tokens.tolist() == tokens


def test_plain_llmc_shard_ids_checked_against_a_given_vocab_size(tmp_path):
    path = write_llmc(tmp_path / "fineweb_val_000000.bin", [1, 2, 3, 500, 4], U16)
    shard_error(r"token 3 is id 500, not below the vocabulary size 450", verify_shard, path, vocab_size=450)


# -- bad shards ------------------------------------------------------------------------------


@pytest.fixture
def good(tmp_path):
    """A valid uint16 shard of ours with 10 tokens."""
    path = tmp_path / "d_train_000001.bin"
    write_ours(path, np.arange(10) * 40)
    return path


def patch_int(path, slot, value):
    raw = bytearray(path.read_bytes())
    raw[4 * slot : 4 * slot + 4] = np.array([value], "<i4").tobytes()
    path.write_bytes(bytes(raw))


def test_wrong_magic(good):
    patch_int(good, 0, 12345)
    shard_error(r"not a token shard \(magic 12345, expected 20240520 or 20240801\)", open_shard, good)


def test_wrong_version(good):
    patch_int(good, 1, 7)
    shard_error(r"magic 20240520 with version 7, expected version 1", open_shard, good)


def test_negative_token_count(good):
    patch_int(good, 2, -1)
    shard_error("negative token count", open_shard, good)


def test_unknown_extension_version(good):
    patch_int(good, 4, 2)
    shard_error("extension version 2", open_shard, good)


def test_truncated_shard_says_how_many_bytes_are_missing(good):
    good.write_bytes(good.read_bytes()[:-6])
    message = shard_error("truncated: 6 bytes missing", open_shard, good)
    assert str(good) in message and "10 uint16 tokens" in message and "1,044 bytes" in message


def test_extra_bytes(good):
    good.write_bytes(good.read_bytes() + b"\0\0\0")
    shard_error(r"3 bytes more than the header's 10 tokens", read_header, good)


@pytest.mark.parametrize("size", [0, 3, 1023])
def test_file_shorter_than_the_header(good, size):
    good.write_bytes(good.read_bytes()[:size])
    shard_error(f"{size} bytes, too short for the 1024-byte shard header", open_shard, good)


def test_missing_file(tmp_path):
    shard_error("cannot read", open_shard, tmp_path / "nope.bin")


def test_flipped_payload_byte_fails_the_checksum(good):
    raw = bytearray(good.read_bytes())
    raw[1024 + 5] ^= 0x01  # token 2: 80 -> 336, still a valid id, so only the checksum can tell
    good.write_bytes(bytes(raw))
    open_shard(good)  # the header and size are fine
    message = shard_error("corrupted: the tokens' CRC-32 is", verify_shard, good)
    assert str(good) in message


def test_id_out_of_vocabulary_names_the_position(tmp_path):
    path = tmp_path / "d_train_000001.bin"
    write_ours(path, [1, 2, 3, 4, 5, 449, 450, 9])  # correct checksum, but 450 is not an id of a 450-token vocabulary
    shard_error(r"token 6 is id 450, not below the vocabulary size 450", verify_shard, path)


def test_vocab_size_mismatch(good):
    open_shard(good, vocab_size=450)
    shard_error(r"written for a vocabulary of 450 tokens, expected 50,257", open_shard, good, vocab_size=50257)


# -- AtomicFile ------------------------------------------------------------------------------


def test_atomic_file_close_then_commit_renames(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    f = AtomicFile(target)
    f.file.write(b"new")
    f.close()
    assert target.read_bytes() == b"old" and f.tmp.read_bytes() == b"new"
    assert f.tmp.name.startswith(".out.bin.tmp-")
    f.commit()
    assert target.read_bytes() == b"new" and not f.tmp.exists()


def test_atomic_file_discard_after_close_removes_the_temp(tmp_path):
    target = tmp_path / "out.bin"
    f = AtomicFile(target)
    f.file.write(b"new")
    f.close()
    f.discard()
    assert list(tmp_path.iterdir()) == []
