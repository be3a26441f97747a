"""What bench/gpu_check.py needs of the Python it runs in, told in one line before anything is imported.

A GPU machine as it comes (a cloud image, a cluster's node) has a CUDA torch in its Python and often no
package index, so nothing is installed for the check: `make gpu-check` runs this checkout as it is
(PYTHONPATH; gptkit/__init__.py finds the stages beside it), and the packages gptkit and the check
import must already be there. A
missing one is named, with how to bring it, instead of a traceback from the first row that imports it.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
# Beyond gptkit's own dependencies: the rows' reference (transformers) and the GPU tier's runner.
CHECK_NEEDS = ("transformers", "pytest")


def dependencies(pyproject: Path = PYPROJECT) -> list[str]:
    """The import names of gptkit's dependencies, as pyproject.toml lists them (each one's
    distribution name is its import name)."""
    block = re.search(r"^dependencies = \[(.*?)^\]", pyproject.read_text(), re.S | re.M)
    return re.findall(r'^\s*"([A-Za-z0-9_.]+)', block.group(1), re.M) if block else []


def unmet(needs: tuple[str, ...] | None = None) -> str | None:
    """Why this Python cannot run the check, in one line, or None."""
    if importlib.util.find_spec("gptkit.train") is None:
        return (
            "gpu-check: gptkit is not importable from this Python; run it from the checkout "
            "(`make gpu-check` does) or install it (pip install --no-deps -e .)"
        )
    missing = [name for name in (needs or (*dependencies(), *CHECK_NEEDS)) if importlib.util.find_spec(name) is None]
    if missing:
        return (
            f"gpu-check: this Python lacks {', '.join(missing)}; install {'it' if len(missing) == 1 else 'them'} "
            "(without a package index: pip install --no-index --no-deps WHEELS, the wheels brought from elsewhere)"
        )
    return None
