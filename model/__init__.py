"""The model stage: a Llama-style TransformerLM, its presets and its checkpoints."""
from .checkpoint import load_model, save_model
from .config import ModelConfig, load_config
from .model import KVCache, TransformerLM

__all__ = ["KVCache", "ModelConfig", "TransformerLM", "load_config", "load_model", "save_model"]
