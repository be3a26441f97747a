"""The Hugging Face layout, both ways: `export_hf` (export.py) writes a checkpoint as a Hugging Face
model directory (loadable by `transformers`, vLLM, llama.cpp's converter and the Hub), `import_hf`
(load.py) reads one into a checkpoint, exactly or not at all, and `export_peft` (export.py) writes a
LoRA run's adapters in peft's format (model/lora/peft.py).

One adapter per model family (family.py), each around one table of names: the Llama family
(llama.py: Llama, Mistral, Qwen2, Qwen3) and GPT-2 (gpt2.py); families.py lists them. files.py
reads a Hugging Face directory's config.json and weights, framing.py its tokenizer and how it
frames a text.

A chat template comes along both ways (chat.py): the import writes the model's beside the
checkpoint's tokenizer.json, the export writes the checkpoint's into tokenizer_config.json.
"""

from .export import export_hf, export_peft, hf_config
from .load import Imported, import_hf

__all__ = ["Imported", "export_hf", "export_peft", "hf_config", "import_hf"]
