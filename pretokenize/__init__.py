"""The encode stage: corpora to llm.c-format `.bin` token shards (see shared/shards.py)."""
from .encode import Split, encode_corpus

__all__ = ["Split", "encode_corpus"]
