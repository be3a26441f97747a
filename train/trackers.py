"""Experiment trackers (--log-to tensorboard,wandb): every record of metrics.jsonl sent on, under
the same names and steps, to TensorBoard (RUN/tensorboard/) and Weights & Biases (RUN/wandb/).

metrics.jsonl stays the source of truth: a record is written there first. A tracker that cannot
start or write is one warning line, and training goes on without it. Rank 0 alone logs.
A record's numbers are scalars and its text (a sample) is text; a nested record (a re-planned
schedule) is flattened to "replan/total_steps", "replan/lr", "replan/reason". "step" is the step.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from gptkit.shared.files import StrPath

log = logging.getLogger(__name__)

WANDB_ID = "gptkit-run-id"  # in RUN/wandb/: the wandb run a resumed run goes on logging to


def flatten(record: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A record's values by name, nested records' as "outer/inner"; "step" left out."""
    flat = {}
    for key, value in record.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}/"))
        elif not (key == "step" and not prefix):
            flat[prefix + key] = value
    return flat


class Trackers:
    def __init__(self, run: StrPath, log_to: list[str] | None, settings: dict[str, Any], master: bool = True) -> None:
        """It receives the run directory `run`, the trackers named by `log_to` (the metrics section's),
        the run's `settings` as config.json records them (wandb records them too), and whether this is
        the master rank (only it sends anything). They start at start(), the records sent before it (a
        resume's re-planned schedule) kept for them until then."""
        self.run, self.settings = Path(run), settings
        self.names = list(log_to or []) if master else []
        self.active: list[TensorBoard | Wandb] = []
        self.pending: list[dict[str, Any]] | None = [] if self.names else None

    def start(self, step: int) -> None:
        """Start them for a run at `step`: 0, a new run; else a resumed run's checkpoint step."""
        self.active = [t for t in (self._start(name, step) for name in self.names) if t is not None]
        pending, self.pending = self.pending or [], None
        for record in pending:
            self.send(record)

    def send(self, record: dict[str, Any]) -> None:
        if self.pending is not None:
            return self.pending.append(record)
        flat = flatten(record)
        scalars = {k: v for k, v in flat.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        texts = {k: v for k, v in flat.items() if isinstance(v, str)}
        for tracker in list(self.active):
            try:
                tracker.send(record["step"], scalars, texts)
            except Exception as e:  # a tracker's failure is its own: the run and the other trackers go on
                self._drop(tracker, f"cannot write ({_why(e)})")

    def close(self) -> None:
        for tracker in list(self.active):
            try:
                tracker.close()
            except Exception as e:
                self._drop(tracker, f"cannot finish ({_why(e)})")
        self.active = []

    def _start(self, name: str, step: int) -> TensorBoard | Wandb | None:
        try:
            return TensorBoard(self.run, step) if name == "tensorboard" else Wandb(self.run, self.settings, step)
        except ImportError:
            _warn(name, f"the {name} package is not installed (pip install 'gptkit[{name}]')")
        except Exception as e:  # wandb.init: no API key, no network, ...
            _warn(name, f"cannot start ({_why(e)})")
        return None

    def _drop(self, tracker: TensorBoard | Wandb, why: str) -> None:
        self.active.remove(tracker)
        _warn(tracker.name, why)


class TensorBoard:
    name = "tensorboard"

    def __init__(self, run: Path, step: int) -> None:
        from torch.utils.tensorboard import SummaryWriter  # needs the tensorboard package

        # purge_step: what an earlier attempt logged past the resumed step (or, in a new run, at all)
        # is hidden, as metrics.jsonl drops it
        self.writer = SummaryWriter(str(run / "tensorboard"), purge_step=step + 1 if step else 0)

    def send(self, step: int, scalars: dict[str, float], texts: dict[str, str]) -> None:
        value: float | str  # a scalar's, then a text's
        for key, value in scalars.items():
            self.writer.add_scalar(key, value, step)
        for key, value in texts.items():
            self.writer.add_text(key, value, step)

    def close(self) -> None:
        self.writer.close()


class Wandb:
    """A wandb run in RUN/wandb/, in the mode the environment gives (WANDB_MODE=offline: synced
    later with `wandb sync`). A resumed run goes on in the same wandb run, whose id RUN/wandb/
    keeps; wandb ignores the steps it has already logged."""

    name = "wandb"

    def __init__(self, run: Path, settings: dict[str, Any], step: int) -> None:
        import wandb

        ids = run / "wandb" / WANDB_ID
        run_id = ids.read_text().strip() if step and ids.is_file() else None  # None: a new one, wandb's
        # console off: the training lines are the records themselves, and stdout stays ours
        self.run = wandb.init(
            project="gptkit",
            name=run.name,
            dir=str(run),
            config=settings,
            id=run_id,
            resume="allow",
            settings=wandb.Settings(console="off", silent=True),
        )
        ids.write_text(self.run.id + "\n")

    def send(self, step: int, scalars: dict[str, float], texts: dict[str, str]) -> None:
        self.run.log({**scalars, **texts}, step=step)

    def close(self) -> None:
        """Finish the run, its records on disk when this returns. run.finish() returns once the
        service process (wandb-core) has taken the run's exit, but the records it holds are
        written to RUN/wandb/.../run-ID.wandb only when it closes the run's stream, on a request
        that finish() sends without waiting (below 32 KiB of records, nothing but the file's
        header is on disk until then). A process that ends with no atexit hooks (os._exit, a
        multiprocessing worker) can take the service with it first, and a reader in this
        process (wandb sync, a test) can find the file empty. wandb.teardown() waits for the
        service to close every stream and exit; a later wandb.init starts a new one. It is left
        alone while another run of this process is open (the user's own), which teardown would
        finish: the records are then written when the service gets to them."""
        import wandb
        from wandb.sdk.wandb_setup import singleton

        self.run.finish()
        if singleton().most_recent_active_run is None:
            try:
                wandb.teardown()
            except SystemExit as e:  # the service ended in error: one warning (Trackers.close), not the program's end
                raise RuntimeError(f"the wandb service process ended with exit code {e.code}") from None


def _warn(name: str, why: str) -> None:
    log.warning(f"--log-to {name}: {why}; going on without it")


def _why(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__  # one line
