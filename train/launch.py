"""`gptkit train --nproc-per-node N`: the processes of a run, started by torch's own launcher.

The command builds the run's settings and checks --out in its own process first (train/cli.py);
only then does torch's elastic agent, the launcher torchrun runs, start the workers: each runs
what one process would run, with RANK, WORLD_SIZE and LOCAL_RANK set, as under torchrun. A run
on several machines starts the same command on each (--nnodes, --rdzv-endpoint, and --node-rank
or --rdzv-id).

A failure reads as one process's would: a worker's error (a GptkitError) goes into that worker's
elastic error file (TORCHELASTIC_ERROR_FILE), not to the terminal, and this process prints the
earliest of them, once, as `Error: ...`, and exits with its status. Every worker's file is read,
not only the failure torch reports: torch reports the first worker it sees exit, and when one
worker's error ends its peers too (a collective whose peer is gone), that may be a peer. A
worker that crashes (a bug, a signal) writes no such line; then torch's own report is raised
(ChildFailedError, with the worker's traceback), as torchrun shows it.

Stopping: SIGINT and SIGTERM stop the workers as they stop one process (a checkpoint, the resume
command, exit status 0), and this process waits for them and ends as they do. Ctrl-C reaches
the workers from the terminal itself (they are in its process group); a SIGTERM sent to this
process is passed on to them. torch's agent is not left to handle the two: it would stop waiting
for the workers' results and kill them after its shutdown timeout, however the checkpoint went.
"""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing
import os
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.elastic.rendezvous.utils import parse_rendezvous_endpoint
from torch.distributed.launcher.api import LaunchConfig, elastic_launch

from gptkit.shared.cli import configure_logging, error_line
from gptkit.shared.errors import GptkitError, SettingError, named
from gptkit.shared.files import atomic_write

# torch's log lines about a failed worker (the exception that ended it, the peers it then
# terminated): the failure is reported once, by launch(), instead.
QUIET_LOGGERS = ("torch.distributed.elastic.multiprocessing.api", "torch.multiprocessing.spawn")
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
AGENT_SIGNALS = "SIGHUP,SIGQUIT"  # what torch's agent still handles (its default also has the two above)


class WorkerError(GptkitError):
    """The error a worker reported: the line and exit status one process would have shown."""

    def __init__(self, line: str, exit_code: int) -> None:
        super().__init__(line)
        self.exit_code = exit_code


def launch(
    one_process: Callable[[], object],
    nproc_per_node: int,
    nnodes: int = 1,
    node_rank: int | None = None,
    rdzv_endpoint: str | None = None,
    rdzv_id: str | None = None,
) -> None:
    """Run `one_process()` (picklable: the work of one process of the run) in `nproc_per_node`
    worker processes on this machine, on each of `nnodes` machines."""
    if "RANK" in os.environ:
        raise SettingError(
            "nproc_per_node",
            f"{nproc_per_node}: this process is already one of a run's (torchrun started it); give the processes "
            "to torchrun or to gptkit, not to both",
        )
    with tempfile.TemporaryDirectory(prefix="gptkit-launch-") as logs:
        config = _launch_config(nproc_per_node, nnodes, node_rank, rdzv_endpoint, rdzv_id, logs)
        if nproc_per_node > 1 and "OMP_NUM_THREADS" not in os.environ:
            os.environ["OMP_NUM_THREADS"] = "1"  # as torchrun sets it: N processes, not N times every core
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.CRITICAL)
        with _stop_signals_to_workers() as received:
            try:
                elastic_launch(config, _worker)(one_process)
            except ChildFailedError:
                reported = _first_reported_error(logs)
                if reported is not None:
                    raise reported from None
                if received:  # a signal ended the workers before their loop could stop at a checkpoint
                    sys.exit(128 + received[-1])
                raise


def _launch_config(
    nproc_per_node: int, nnodes: int, node_rank: int | None, rdzv_endpoint: str | None, rdzv_id: str | None, logs: str
) -> LaunchConfig:
    """torch's launch settings for the flags, as torchrun makes them; the workers' error files
    go under `logs`."""
    if node_rank is not None and node_rank >= nnodes:
        raise SettingError("node_rank", f"{node_rank}: expected 0 to {nnodes - 1} ({named('nnodes')} {nnodes})")
    if rdzv_endpoint is None:
        if nnodes > 1:
            raise SettingError(
                "nnodes", f"{nnodes}: give {named('rdzv_endpoint')} HOST:PORT too, where the machines meet"
            )
        # one machine: a rendezvous of its own on a free port, as torchrun --standalone
        rendezvous: dict[str, Any] = {
            "rdzv_backend": "c10d",
            "rdzv_endpoint": "localhost:0",
            "run_id": rdzv_id or str(uuid.uuid4()),
        }
    else:
        try:
            _, port = parse_rendezvous_endpoint(rdzv_endpoint, default_port=-1)
        except ValueError:
            port = -1
        if port < 0:
            raise SettingError("rdzv_endpoint", f"{rdzv_endpoint}: expected HOST:PORT")
        rendezvous = {"rdzv_endpoint": rdzv_endpoint, "run_id": rdzv_id or "none"}
        if node_rank is None:  # the machines are ranked as they join; they meet under one --rdzv-id
            rendezvous["rdzv_backend"] = "c10d"
        else:  # ranks given: machine 0 serves the rendezvous at the endpoint (torchrun's default backend)
            rendezvous.update(rdzv_backend="static", rdzv_configs={"rank": node_rank})
    return LaunchConfig(
        min_nodes=nnodes,
        max_nodes=nnodes,
        nproc_per_node=nproc_per_node,
        max_restarts=0,
        logs_specs=DefaultLogsSpecs(log_dir=logs),
        signals_to_handle=AGENT_SIGNALS,
        **rendezvous,
    )


@contextlib.contextmanager
def _stop_signals_to_workers() -> Iterator[list[int]]:
    """While the workers run: SIGINT and SIGTERM are theirs to act on (a SIGTERM is passed on;
    Ctrl-C has reached them from the terminal). Yields the signals this process received."""
    received: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        if signum == signal.SIGTERM:
            for worker in multiprocessing.active_children():
                if worker.pid is not None:  # always so: a child is active once started
                    os.kill(worker.pid, signum)

    # A Python function, not SIG_IGN: the workers, started anew (spawn), get their default handlers.
    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS}
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _worker(one_process: Callable[[], object]) -> None:
    """One process of the run, started by the agent with RANK, WORLD_SIZE, ... set."""
    configure_logging()  # warnings from rank 0 only, as under torchrun
    try:
        one_process()
    except GptkitError as e:
        # Whole or not at all: the agent ends the other workers once one has failed, and one of
        # them may be writing its own error then. torch's ProcessFailure reads message and timestamp.
        with atomic_write(os.environ["TORCHELASTIC_ERROR_FILE"]) as f:
            json.dump({"message": error_line(e), "timestamp": time.time(), "exit_code": e.exit_code}, f)
        # Ended at once, the error recorded and the process group gone: Python's shutdown would run
        # the C++ destructors of torch's distributed threads, which at times abort ('terminate
        # called without an active exception', seen in 1 of 3 runs of the suite).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(e.exit_code)
    except KeyboardInterrupt as stopped:  # a stop before the loop (which stops at a checkpoint instead):
        # torch's wrapper would take it for success, and the agent wait for a result
        sys.exit(getattr(stopped, "exit_code", 128 + signal.SIGINT))


def _first_reported_error(logs: str) -> WorkerError | None:
    """The earliest error that a worker of this machine reported (its error file under `logs`)."""
    reports = [_report(path) for path in Path(logs).rglob("error.json")]
    ours = [report for report in reports if "exit_code" in report]  # torch's own reports of a crash hold none
    if not ours:
        return None
    first = min(ours, key=lambda report: report["timestamp"])
    return WorkerError(first["message"], first["exit_code"])


def _report(path: Path) -> dict[str, Any]:
    """A worker's error file; {} where it is not JSON (torch's own report of a worker ended while
    it wrote, which is no error of the run's)."""
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return report if isinstance(report, dict) else {}
