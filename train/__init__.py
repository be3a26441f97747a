"""The train stage: a resumable, distributed trainer (issue 5; not built yet)."""
