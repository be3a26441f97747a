"""The pretokenize stage: corpora to llm.c-format `.bin` token shards (see shared/shards.py) in a data
directory (shared/shard_dir.py)."""
from .encode import Split, encode_corpus

__all__ = ["Split", "encode_corpus"]
