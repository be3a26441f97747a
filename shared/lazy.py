"""A package's names that load their modules when first used (PEP 562), so that importing the
package, as every command's option table does, imports no torch (2-3 s):

    _MODULE_OF = {"TransformerLM": "model", "load_config": "config"}
    __all__ = sorted(_MODULE_OF)
    __getattr__ = lazy_names(__name__, _MODULE_OF)
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_names(package: str, module_of: dict[str, str]) -> Callable[[str], Any]:
    """The module `__getattr__` of `package`: a name of `module_of` imported from its module
    (`module_of[name]`, within the package) on first use, and kept in the package from then on."""

    def __getattr__(name: str) -> Any:
        if name not in module_of:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module_of[name]}", package), name)
        setattr(sys.modules[package], name, value)  # found directly from now on
        return value

    return __getattr__
