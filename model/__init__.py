"""The model stage: a Llama- or GPT-2-style TransformerLM, its presets, its checkpoints, decoding, LoRA
adapters (lora/), the Hugging Face layout both ways, and the GGUF export (gguf.py).

    from gptkit.model import TransformerLM, load_model
    from gptkit.model.generate import generate

The names load their modules when first used (PEP 562): importing `gptkit.model.config`, as
every command's option table does, must not import torch (2-3 s, and a torch-sized parent for
the worker processes pretokenize forks).
"""

from typing import TYPE_CHECKING

from gptkit.shared.lazy import lazy_names

if TYPE_CHECKING:  # the names as a type checker sees them; at run time __getattr__ imports them
    from .checkpoint import load_model as load_model
    from .checkpoint import save_model as save_model
    from .config import ModelConfig as ModelConfig
    from .config import load_config as load_config
    from .model import KVCache as KVCache
    from .model import TransformerLM as TransformerLM

_MODULE_OF = {
    "KVCache": "model",
    "TransformerLM": "model",
    "ModelConfig": "config",
    "load_config": "config",
    "load_model": "checkpoint",
    "save_model": "checkpoint",
}
__all__ = sorted(_MODULE_OF)

__getattr__ = lazy_names(__name__, _MODULE_OF)
