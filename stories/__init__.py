"""Generated simple English stories: the demo corpus (`gptkit stories --out data/stories.txt`)."""
from .generate import conversations, story, write_corpus

__all__ = ["conversations", "story", "write_corpus"]
