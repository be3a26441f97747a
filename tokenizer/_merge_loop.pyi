# The types of _merge_loop.c (compiled at install; see setup.py).
from collections.abc import Callable

def learn(
    words: list[bytes],
    freqs: list[int],
    n_merges: int,
    byte_ranks: bytes | None,
    progress: Callable[[int], object] | None,
) -> list[tuple[int, int]]: ...
