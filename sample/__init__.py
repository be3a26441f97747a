"""The sample stage: text from a checkpoint (issue 4; not built yet)."""
