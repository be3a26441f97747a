"""The encode stage: corpora to .bin token shards (issue 3; not built yet)."""
