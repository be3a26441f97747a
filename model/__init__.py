"""The model stage: a Llama-style TransformerLM (issue 4; not built yet)."""
