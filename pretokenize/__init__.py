"""The pretokenize stage: corpora to llm.c-format `.bin` token shards (see shared/shards.py) in a data
directory (shared/shard_dir.py)."""

from .encode import encode_corpus
from .split import Split

__all__ = ["Split", "encode_corpus"]
