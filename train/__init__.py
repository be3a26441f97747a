"""The train stage: a resumable, distributed trainer from token shards to checkpoints."""
