"""The model stage: a Llama-style TransformerLM, its presets, its checkpoints and decoding."""
from .checkpoint import load_model, save_model
from .config import ModelConfig, load_config
from .device import resolve_device
from .generate import generate
from .model import KVCache, TransformerLM

__all__ = ["KVCache", "ModelConfig", "TransformerLM", "generate", "load_config", "load_model", "resolve_device", "save_model"]
