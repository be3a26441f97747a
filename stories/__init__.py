"""Generated simple English stories: the demo corpus (`gptkit stories --out data/stories.txt`)."""
from .generate import story, write_corpus

__all__ = ["story", "write_corpus"]
