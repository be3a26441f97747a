"""Generated simple English stories: the demo corpus (`gptkit stories --out data/stories.txt`)."""

from .generate import conversation, conversations, story, write_conversations, write_corpus

__all__ = ["conversation", "conversations", "story", "write_conversations", "write_corpus"]
