"""The sample stage: a checkpoint's continuations of a prompt, as text that streams
(sampling.py: `sample`, for any caller; cli.py: `gptkit sample`). Decoding itself is the
model's: gptkit.model.generate."""
