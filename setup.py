"""The compiled parts of gptkit: BPE training's counting and merge loop (tokenizer/_pretokens.c,
tokenizer/_merge_loop.c).

pyproject.toml holds the rest of the project's metadata; setuptools reads both. The extensions are
optional: where they cannot be built (no C compiler or no Python headers), pip installs gptkit
without them, and training counts and merges the same in Python (tokenizer/train.py).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(f"gptkit.tokenizer.{name}", [f"tokenizer/{name}.c"], optional=True)
        for name in ("_pretokens", "_merge_loop")
    ],
)
