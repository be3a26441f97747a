"""A TransformerLM to and from a checkpoint directory (the layout is in shared/checkpoint.py)."""
from __future__ import annotations

from gptkit.shared.checkpoint import (MODEL_FILE, TOKENIZER_FILE, CheckpointError, check_file, read_checkpoint_config, read_tensors,
                               write_checkpoint)

from .config import ModelConfig
from .model import TransformerLM


def model_tensors(model: TransformerLM) -> dict:
    """The weights to save: a tied LM head is the embedding, stored once under its name."""
    state = model.state_dict()
    if model.config.tie_embeddings:
        del state["lm_head.weight"]
    return state


def save_model(model: TransformerLM, tokenizer, directory, extra_files=None, overwrite=False):
    write_checkpoint(directory, model_tensors(model), model.config.to_dict(), tokenizer, extra_files, overwrite)


def load_model(directory, device="cpu"):
    """(model, tokenizer) of a checkpoint, after checking that the config, the weights and the
    tokenizer agree; the first disagreement is an error naming it."""
    from gptkit.tokenizer import Tokenizer

    config = read_checkpoint_config(directory)
    model_config = ModelConfig.from_dict(config["model"], source=f"{directory}/config.json")
    tokenizer = Tokenizer.from_file(check_file(directory, TOKENIZER_FILE, config))
    if tokenizer.vocab_size != model_config.vocab_size:
        raise CheckpointError(f"{directory}/{TOKENIZER_FILE}: {tokenizer.vocab_size:,} tokens, the model's vocabulary has {model_config.vocab_size:,}")
    expected_fp = config.get("tokenizer", {}).get("fingerprint")
    if expected_fp and tokenizer.fingerprint != expected_fp:
        raise CheckpointError(f"{directory}/{TOKENIZER_FILE}: tokenizer {tokenizer.fingerprint}, the model was made for {expected_fp}")
    model = TransformerLM(model_config)
    tensors = read_tensors(directory, config=config)
    expected = model_tensors(model)
    for name, tensor in expected.items():
        if name not in tensors:
            raise CheckpointError(f"{directory}/{MODEL_FILE}: no tensor {name!r}, which the config needs")
        if tensors[name].shape != tensor.shape:
            raise CheckpointError(f"{directory}/{MODEL_FILE}: {name!r} has shape {tuple(tensors[name].shape)}, "
                                  f"the config needs {tuple(tensor.shape)}")
    extra = sorted(set(tensors) - set(expected))
    if extra:
        raise CheckpointError(f"{directory}/{MODEL_FILE}: tensor {extra[0]!r} is not part of the model the config describes")
    model.load_state_dict(tensors, strict=False)  # strict would miss a tied head, which is the embedding
    return model.to(device), tokenizer
