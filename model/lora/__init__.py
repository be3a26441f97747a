"""LoRA: low-rank adapters (Hu et al., 2021) and trained token rows on a frozen model, in one place.
The rest of gptkit calls these names; the settings that turn them on are declared with train's
(train/sections.py, Lora), their rules are here.

    config.py   LoraConfig: rank, alpha, targets and the tokens whose rows train, checked against a
                model (LoraConfig.of, adapters_asked); the flags' values (target_names, train_token_names);
                the rules of a run's settings (check_settings) and of its resume (check_resumed)
    layer.py    add_adapters: every weight frozen, an adapter on each target projection
                (LoraLinear) and the chosen tokens' rows trained (TokenRowsEmbedding, TokenRowsHead)
    weights.py  which tensors are the adapters' (is_adapter, adapters_of), the rows' start
                (initial_rows), the merge into the base's weights (merged; merge, checked finite)
    record.py   config.json's "lora" in a LoRA run's checkpoints: written (record_of), read back checked
                (read_record, base_of); model/checkpoint.py reads and writes checkpoints with it
    peft.py     the adapters in peft's format (peft_files), which model/hf/export.py's export_peft writes

    from gptkit.model.lora import LoraConfig, add_adapters

The names load their modules when first used (PEP 562), as gptkit.model's do: the option tables
import config.py's, which must not import torch.
"""

from typing import TYPE_CHECKING

from gptkit.shared.lazy import lazy_names

if TYPE_CHECKING:  # the names as a type checker sees them; at run time __getattr__ imports them
    from .config import LoraConfig as LoraConfig
    from .config import adapters_asked as adapters_asked
    from .config import check_resumed as check_resumed
    from .config import check_settings as check_settings
    from .config import target_names as target_names
    from .config import train_token_names as train_token_names
    from .config import wants_special as wants_special
    from .layer import add_adapters as add_adapters
    from .peft import peft_files as peft_files
    from .record import base_of as base_of
    from .record import read_record as read_record
    from .record import record_of as record_of
    from .weights import adapters_of as adapters_of
    from .weights import initial_rows as initial_rows
    from .weights import is_adapter as is_adapter
    from .weights import merge as merge
    from .weights import merged as merged

_MODULE_OF = {
    "LoraConfig": "config",
    "adapters_asked": "config",
    "check_resumed": "config",
    "check_settings": "config",
    "target_names": "config",
    "train_token_names": "config",
    "wants_special": "config",
    "add_adapters": "layer",
    "peft_files": "peft",
    "base_of": "record",
    "read_record": "record",
    "record_of": "record",
    "adapters_of": "weights",
    "initial_rows": "weights",
    "is_adapter": "weights",
    "merge": "weights",
    "merged": "weights",
}
__all__ = sorted(_MODULE_OF)

__getattr__ = lazy_names(__name__, _MODULE_OF)
