"""The loader (train/data.py's Loader over ShardData): determinism in seed, step, micro-step and
rank, random offsets inside one shard, ranks' disjoint slices, the sequential stream."""

import numpy as np
import pytest

from gptkit.shared.shard_dir import ShardDir
from gptkit.shared.shards import ShardHeader
from gptkit.train.data import Loader, ShardData
from gptkit.train.processes import Dist
from gptkit.train.sections import Batch

SIZES = (150, 10, 90, 257)  # a shard too short for any sequence of 16 + 1 in the middle


@pytest.fixture(scope="module")
def positions(tmp_path_factory):
    """Plain llm.c shards whose tokens are their positions in the train stream."""
    directory = tmp_path_factory.mktemp("positions")
    start = 0
    for i, n in enumerate(SIZES):
        tokens = np.arange(start, start + n, dtype="<u2")
        (directory / f"pos_train_{i:06d}.bin").write_bytes(
            ShardHeader(np.dtype("<u2"), n).to_bytes() + tokens.tobytes()
        )
        start += n
    return directory


def open_positions(directory, T=16):
    return ShardData(ShardDir(directory), "train", 65536, "0" * 16, T)


def loader(data, mode, batch_size, context_length, seed, rank=0, world=1, grad_accum=1):
    """A Loader of `batch_size` sequences a process, the `rank`th of `world`."""
    assert data.context_length == context_length
    settings = Batch(loader=mode, batch_size=batch_size * world, grad_accum=grad_accum)
    return Loader(data, settings, seed, Dist(rank=rank, world=world))


def inputs_targets(loader, step, micro=0):
    sequences = loader.batch(step, micro)
    return sequences[:, :-1], sequences[:, 1:]


def test_loader_is_deterministic_in_seed_step_micro_rank(positions):
    data = open_positions(positions)
    a, b = (loader(data, "random", 4, 16, seed=7, grad_accum=2) for _ in range(2))
    x = a.batch(3, 1)
    assert x.shape == (4, 17) and x.dtype == np.uint16  # the shards' width: widened on the device
    assert np.array_equal(x, b.batch(3, 1))
    assert not np.array_equal(x, a.batch(4, 1)) and not np.array_equal(x, a.batch(3, 0))
    assert not np.array_equal(x, loader(data, "random", 4, 16, seed=8, grad_accum=2).batch(3, 1))


def test_random_offsets_stay_inside_one_shard(positions):
    data, T = open_positions(positions), 16
    starts = np.concatenate([[0], np.cumsum(SIZES)])
    for step in range(50):
        x, y = inputs_targets(loader(data, "random", 8, T, seed=1), step)
        assert np.array_equal(x[:, 1:], y[:, :-1])
        for row, target in zip(x, y):
            assert np.array_equal(np.diff(np.append(row, target[-1])), np.ones(T))  # T + 1 consecutive tokens
            shard = int(np.searchsorted(starts, row[0], side="right")) - 1
            assert shard != 1 and 0 <= row[0] - starts[shard] <= SIZES[shard] - T - 1


@pytest.mark.parametrize("mode", ["random", "sequential"])
def test_ranks_take_disjoint_slices_of_the_global_batch(positions, mode):
    data = open_positions(positions)
    for step, micro in [(0, 0), (2, 1), (5, 0)]:
        whole = loader(data, mode, 4, 16, seed=3, grad_accum=2).batch(step, micro)
        parts = [loader(data, mode, 2, 16, seed=3, rank=r, world=2, grad_accum=2).batch(step, micro) for r in (0, 1)]
        assert np.array_equal(np.concatenate(parts), whole)


def test_sequential_reads_the_stream_across_shards_and_wraps(positions):
    data, T, B = open_positions(positions), 16, 3
    total = sum(SIZES)
    sequential = loader(data, "sequential", B, T, seed=0, grad_accum=2)
    for step in range(12):  # 12 * 2 * 48 tokens: across every shard boundary and twice around
        for micro in (0, 1):
            x, y = inputs_targets(sequential, step, micro)
            start = (step * 2 + micro) * B * T
            expected = (start + np.arange(B * T + 1)) % total
            assert np.array_equal(x.reshape(-1), expected[:-1]) and np.array_equal(y[:, -1], expected[T::T])
            assert np.array_equal(x[:, 1:], y[:, :-1])
