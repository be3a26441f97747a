"""Contracts shared by the stages: corpus reading, errors, atomic files, progress."""
