"""The run directory: its settings (config.json) and its metrics (metrics.jsonl).

    config.json        the effective training config, the model resolved to its full config
    metrics.jsonl      one JSON record per log line, evaluation, sample and re-planned schedule
    checkpoints/, latest   see checkpointing.py

A new run starts only in a new directory or in one a run of ours left without a checkpoint;
a resumed run first cuts metrics.jsonl back to its checkpoint's step.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from gptkit.shared.errors import InputError, SettingError, named
from gptkit.shared.files import CHECKPOINTS, LATEST, StrPath, atomic_write, cause, looked_up, resolved
from gptkit.shared.jsonfile import parse_json, read_json

from .config import SETTINGS, TrainConfig
from .sections import TRACKERS

CONFIG_FILE, METRICS_FILE = "config.json", "metrics.jsonl"


class RunDir:
    """Rank 0 writes the files; the other ranks only read."""

    def __init__(self, path: StrPath, master: bool = True) -> None:
        self.path, self.master = Path(path), master
        self.config_file, self.metrics = self.path / CONFIG_FILE, self.path / METRICS_FILE

    def start(self, record: dict[str, Any]) -> None:
        """A new run: its directory checked (check_new), then its config.json written: `record`,
        the settings as TrainConfig.to_dict gives them."""
        self.check_new()
        if self.master:
            try:
                self.path.mkdir(parents=True, exist_ok=True)
                self._write_config(record)
                self.metrics.unlink(missing_ok=True)
            except OSError as e:
                raise SettingError("out", f"{self.path}: cannot write there ({cause(e)})") from None

    def check_new(self) -> None:
        """Refuse a new run anywhere but in a new directory or one a run of ours left without a
        checkpoint: a file, a directory of other files, a run with checkpoints."""
        out = looked_up(self.path, "out")
        if (out / LATEST).exists():
            raise SettingError(
                "out", f"{out}: holds a run already; pass {named('resume')} to continue it, or choose another directory"
            )
        if out.exists() and not out.is_dir():
            raise SettingError("out", f"{out}: is a file; expected a run directory (new, or one of ours)")
        ours = {CONFIG_FILE, METRICS_FILE, CHECKPOINTS, *TRACKERS}
        foreign = (
            sorted(p.name for p in out.iterdir() if p.name not in ours and not p.name.startswith("."))
            if out.is_dir()
            else []
        )
        if foreign or (self.config_file.exists() and not _is_run_dir(out)):
            raise SettingError(
                "out",
                f"{out}: a directory of other files ({(foreign or [CONFIG_FILE])[0]}, ...), not a run; "
                "choose a new directory",
            )

    def go_on(self, step: int, record: dict[str, Any] | None = None) -> None:
        """A resumed run at `step`: metrics.jsonl cut back to it, dropping the records from after
        it (they belong to an attempt interrupted after its last checkpoint, which the resumed run
        does again), and config.json rewritten where `record` (the settings it goes on with) is
        given."""
        if self.master and self.metrics.exists():
            kept = [
                line for line in self.metrics.read_text(errors="replace").splitlines() if _record_step(line) <= step
            ]
            with atomic_write(self.metrics) as f:
                f.write("".join(line + "\n" for line in kept))
        if record is not None:
            self._write_config(record)

    def append(self, record: dict[str, Any]) -> None:
        if self.master:
            with open(self.metrics, "a") as f:
                f.write(json.dumps(record) + "\n")

    def _write_config(self, record: dict[str, Any]) -> None:
        if self.master:
            with atomic_write(self.config_file) as f:
                f.write(json.dumps(record, indent=2) + "\n")


def load_run_config(run_dir: StrPath) -> dict:
    """The settings a run saved in its config.json, checked."""
    path = looked_up(run_dir, "out") / CONFIG_FILE
    if not path.is_file():
        raise SettingError("out", f"{run_dir}: no {CONFIG_FILE}, so no run to resume")
    try:
        saved = read_json(path)
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: damaged, not JSON ({e})") from None
    if not isinstance(saved, dict):
        raise InputError(f"{path}: damaged, not a JSON object of training settings")
    unknown = sorted(set(saved) - set(SETTINGS))
    if unknown:
        raise InputError(f"{path}: unknown setting {unknown[0]!r}; was the file edited?")
    return saved


def recorded_paths(config: TrainConfig, then: dict[str, Any] | None) -> dict[str, str | None]:
    """The paths of `config` as the run records them. A new run records its data, its init_from
    checkpoint and its HellaSwag file as absolute paths, so that a resume from another working
    directory finds them. A resume (`then`: the run's config.json) keeps the run's spelling of a path
    that names the same place (../data, a link to it) and records a new place; the data's content is
    checked against the checkpoint's (resume.py). A recorded place that is gone is an error naming the
    setting that gives the new one. A resumed run keeps its own weights: another init_from is refused."""
    recorded = then or {}

    def place(name: str) -> str | None:
        path, was = config.get(name), recorded.get(name)
        if path is None or (isinstance(was, str) and (path == was or resolved(path, name) == resolved(was, name))):
            return was
        return str(resolved(path, name))

    paths = {name: place(name) for name in ("data", "eval_hellaswag", "init_from")}
    if then is None:
        return paths
    if paths["init_from"] != then.get("init_from"):
        raise SettingError(
            "init_from",
            f"{config.job.init_from}: a resumed run goes on from its own checkpoints, not "
            f"from other weights (it started from {then.get('init_from') or 'a random initialization'})",
        )
    run = Path(config.job.out) / CONFIG_FILE
    data, hellaswag = paths["data"], paths["eval_hellaswag"]
    if data is not None and data == then.get("data") and not looked_up(data, "data").is_dir():
        raise SettingError(
            "data",
            f"{data}: no such directory (the run's data, as {run} records it); if it moved, give "
            f"its new place with {named('data')}",
        )
    if (
        hellaswag is not None
        and hellaswag == then.get("eval_hellaswag")
        and not looked_up(hellaswag, "eval_hellaswag").is_file()
    ):
        raise SettingError(
            "eval_hellaswag",
            f"{hellaswag}: no such file (the run's, as {run} records it); if it moved, "
            f"give its new place with {named('eval_hellaswag')}",
        )
    return paths


def read_metrics(run_dir: StrPath) -> list[dict]:
    """The records of a run's metrics.jsonl; a line cut short (a full disk, a kill) or garbled is
    left out."""
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        raise InputError(f"{run_dir}: no {METRICS_FILE} (not a run directory?)")
    records = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            records.append(parse_json(line))
        except ValueError:
            continue
    return records


def _record_step(line: str) -> float:
    """The step of a metrics.jsonl line; a line cut short (a full disk) counts as past any step."""
    try:
        return parse_json(line)["step"]
    except (ValueError, TypeError, KeyError):
        return math.inf


def _is_run_dir(directory: Path) -> bool:
    try:
        load_run_config(directory)
        return True
    except InputError:
        return False
