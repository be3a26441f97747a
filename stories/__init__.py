"""Generated simple English stories: the demo corpus (`python -m stories --out data/stories.txt`)."""
from .generate import story, write_corpus

__all__ = ["story", "write_corpus"]
