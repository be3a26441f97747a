"""gptkit: from raw text to a trained GPT-style language model and back to text.

The stages are subpackages with a command each (`gptkit --help`):

    gptkit.tokenizer    byte-level BPE: train, encode, decode; tokenizer.json (HF tokenizers format)
    gptkit.pretokenize  corpora -> llm.c-style .bin token shards and a manifest
    gptkit.model        the Llama-style TransformerLM, its checkpoints, decoding, HF export
    gptkit.train        the trainer: shards -> checkpoints
    gptkit.sample       checkpoints -> text
    gptkit.shared       what the stages agree on: corpora, shards, errors, atomic files
    gptkit.runtime      where torch runs: the device, its memory, the CPU threads
    gptkit.stories      the generated demo corpus
"""

from pathlib import Path

__version__ = "0.2.0"

# Run from a checkout that is not installed (make gpu-check on a GPU machine where nothing can be
# installed), the stages are this folder's siblings, as pyproject's package-dir maps them.
if (Path(__file__).parent.parent / "pyproject.toml").is_file():
    __path__.append(str(Path(__file__).parent.parent))
