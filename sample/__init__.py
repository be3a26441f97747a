"""The sample stage: a checkpoint's continuations of a prompt, as text (decoding itself is the
model's: gptkit.model.generate)."""
