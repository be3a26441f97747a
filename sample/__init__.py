"""The sample stage: text from a checkpoint, with temperature, top-k and top-p decoding."""
from .generate import filter_probs, generate

__all__ = ["filter_probs", "generate"]
