"""The results file of every scoring function of the eval library (`out`; `gptkit eval`'s --out):
one JSON object, {"format": RESULTS_FORMAT, "task", "checkpoint", its input and its numbers},
written whole or not at all. An `out` replaces only an earlier result, anything else only with
`overwrite`, and never an input, even with it: refused before the checkpoint loads."""

from __future__ import annotations

import json
from collections.abc import Iterable
from os import PathLike
from pathlib import Path
from typing import Any

from gptkit.model.checkpoint import inputs_of
from gptkit.shared.errors import SettingError
from gptkit.shared.files import Input, atomic_write, cause, check_output, resolved
from gptkit.shared.jsonfile import read_json

RESULTS_FORMAT = "gptkit-eval"  # in every results file: how a result of ours tells itself from a user's file


def check_out(
    out: str | PathLike[str] | None, overwrite: bool, inputs: Iterable[tuple[str, str | PathLike[str] | None]]
) -> None:
    """Refuse an `out` that is not a result of ours, unless `overwrite`, and one that is one of
    `inputs` ((setting, path); a path None is not there; a checkpoint with what it reads, a LoRA
    run's base), holds one or lies inside one, even with it. Nothing to check where `out` is None."""
    if out is not None:
        sources = [
            source
            for setting, path in inputs
            if path is not None
            for source in (inputs_of(path) if setting == "checkpoint" else [Input.given(setting, path)])
        ]
        check_output(out, _is_result, "a result of gptkit eval", overwrite, inputs=sources)


def recorded(path: str | PathLike[str] | None, setting: str) -> str | None:
    """`path` as a results file records it: absolute, its links followed."""
    return None if path is None else str(resolved(path, setting))


def write_results(out: str | PathLike[str], results: dict[str, Any]) -> None:
    """`results` to `out`, after the format's mark, whole or not at all."""
    try:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(out) as f:
            f.write(json.dumps({"format": RESULTS_FORMAT, **results}, indent=2) + "\n")
    except OSError as e:
        raise SettingError("out", f"{out}: cannot write there ({cause(e)})") from None


def _is_result(path):
    try:
        return read_json(path).get("format") == RESULTS_FORMAT
    except (OSError, ValueError, AttributeError):
        return False
