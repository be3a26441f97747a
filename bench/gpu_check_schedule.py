"""How bench/gpu_check.py runs its rows: each in a child process of its own (`gpu_check.py --row
NAME`), in its own process group, killed at its time limit or when the budget runs out; the lanes
of a phase side by side, each lane's rows in order. A row that fails or runs out of time leaves
the others to run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench.gpu_check_config import DRY, LOGS, MIN_START_S, MODE, OUT, ROOT, ROWS, STARTED, TARGETS
from bench.gpu_rows_common import last_line, write_json

DRIVER = Path(__file__).with_name("gpu_check.py")  # what each row's child process runs


def child_env():
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "RANK",
            "WORLD_SIZE",
            "LOCAL_RANK",
            "LOCAL_WORLD_SIZE",
            "MASTER_ADDR",
            "MASTER_PORT",
            "TORCHELASTIC_RUN_ID",
        )
    }
    env.update(GPU_CHECK_OUT=str(OUT), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")
    if DRY:  # the CPU, one thread per process: runs compared bit for bit must not differ by a measured thread count
        env.update(GPU_CHECK_DRY="1", CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    return env


class Scheduler:
    def __init__(self, budget_s):
        self.started = STARTED
        self.deadline = STARTED + budget_s
        self.live, self.lock = set(), threading.Lock()
        self.results, self.interrupted = {}, False

    def left(self):
        return self.deadline - time.monotonic()

    def record(self, name, result):
        result.setdefault("target", TARGETS.get(name, ""))
        self.results[name] = result
        write_json(ROWS / f"{name}.json", result)

    def run_row(self, name, blocked=None):
        """Run row `name` in a child process within its limit and what is left of the budget."""
        produces = [name] + (["loader"] if name == "train-step" else [])
        limit = min(MODE["limits"][name], self.left() - 5)
        limited_by = "its limit" if limit == MODE["limits"][name] else "what was left of the budget"
        if self.interrupted:
            blocked = "interrupted before it started"
        if blocked or limit < MIN_START_S:
            for produced in produces:
                self.record(
                    produced,
                    {"verdict": "FAIL", "figures": "", "why": blocked, "seconds": 0}
                    if blocked
                    else {
                        "verdict": "SKIP",
                        "figures": "",
                        "seconds": 0,
                        "why": f"not started: {max(self.left(), 0):.0f} s left of the {MODE['budget_s']:.0f} s budget",
                    },
                )
            return
        started = time.perf_counter()
        with open(LOGS / f"{name}.log", "w") as log:
            proc = subprocess.Popen(
                [sys.executable, DRIVER, "--row", name],
                cwd=ROOT,
                env=child_env(),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            with self.lock:
                self.live.add(proc)
                if self.interrupted:
                    kill_group(proc)
            try:
                proc.wait(timeout=limit)
                timed_out = False
            except subprocess.TimeoutExpired:
                kill_group(proc)
                timed_out = True
            finally:
                with self.lock:
                    self.live.discard(proc)
        seconds = time.perf_counter() - started
        for produced in produces:
            path = ROWS / f"{produced}.json"
            if path.exists():
                result = json.loads(path.read_text())
                result["seconds"] = seconds if produced == name else result.get("seconds", 0)
            elif timed_out:
                result = {
                    "verdict": "FAIL",
                    "figures": "",
                    "seconds": seconds,
                    "why": f"timed out after {limit:.0f} s ({limited_by}; log: {LOGS / (name + '.log')})",
                }
            else:
                result = {
                    "verdict": "FAIL",
                    "figures": "",
                    "seconds": seconds,
                    "why": f"exited {proc.returncode} without a result: {last_line(LOGS / (name + '.log'))}",
                }
            if timed_out and path.exists() and produced == name:  # what it measured before it was killed
                result.update(
                    verdict="FAIL",
                    why=f"timed out after {limit:.0f} s ({limited_by}): {result.get('why') or 'at its end'}",
                )
            self.record(produced, result)

    def lanes(self, lanes, step):
        """Run each lane's items in order (`step(item)`), the lanes side by side."""

        def go(lane):
            for item in lane:
                step(item)

        threads = [threading.Thread(target=go, args=(lane,), daemon=True) for lane in lanes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def kill_all(self):
        with self.lock:
            self.interrupted = True
            for proc in list(self.live):
                kill_group(proc)


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
