"""The pretokenize stage: corpora to llm.c-format `.bin` token shards (see shared/shards.py) in a data
directory (shared/shard_dir.py).

    from gptkit.pretokenize import encode_dataset

    encode_dataset(["data/stories"], "out/stories", tokenizer="out/tokenizer.json")  # `gptkit pretokenize`

encode_dataset (dataset.py) is the command's library call, its arguments the flags; it calls
encode_corpus (encode.py: documents) or encode_chat (chat.py: conversations), which share
output.py (the directory checked, the manifest, the commit or the discard).
"""

from .chat import encode_chat
from .dataset import Encoded, encode_dataset
from .encode import encode_corpus
from .split import Split

__all__ = ["Encoded", "Split", "encode_chat", "encode_corpus", "encode_dataset"]
