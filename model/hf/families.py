"""The model families both ways: by our architecture (model.py's "llama", "gpt2") for the export,
by Hugging Face's architecture (LlamaForCausalLM, ...) for the import."""

from .gpt2 import GPT2
from .llama import Llama

FAMILIES = {"llama": Llama(), "gpt2": GPT2()}  # by our architecture
# The Hugging Face architectures read -> (model_type, defaults), and their family.
ARCHITECTURES = {name: spec for family in FAMILIES.values() for name, spec in family.architectures.items()}
FAMILY_OF = {name: family for family in FAMILIES.values() for name in family.architectures}
