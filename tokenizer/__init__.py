"""The tokenizer stage: byte-level BPE training, encoding and decoding, HF-compatible files.

from gptkit.tokenizer import Tokenizer, train_bpe
"""

from .bpe import Tokenizer
from .train import train_bpe

__all__ = ["Tokenizer", "train_bpe"]
