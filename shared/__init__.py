"""Contracts shared by the stages: corpus reading, token shards and their data directories, errors,
atomic files, progress."""
