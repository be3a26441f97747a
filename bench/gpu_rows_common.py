"""What bench/gpu_check.py's driver and its rows share: a row's result and its one-line errors,
the commands it runs (gptkit's, logged), and JSON written whole."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

from bench.gpu_check_config import ROOT, ROWS, TARGETS


class RowResult:
    """A row's checks (text, passed) and figures; the verdict is PASS when every check passed."""

    def __init__(self, name):
        self.name, self.checks, self.values, self.figures = name, [], {}, ""

    def check(self, text, ok):
        self.checks.append({"check": text, "ok": bool(ok)})
        return bool(ok)

    def as_dict(self, seconds):
        failed = [c["check"] for c in self.checks if not c["ok"]]
        return {
            "verdict": "PASS" if self.checks and not failed else "FAIL",
            "figures": self.figures,
            "why": "; ".join(failed) if failed else "",
            "values": self.values,
            "checks": self.checks,
            "target": TARGETS.get(self.name, ""),
            "seconds": seconds,
        }


def partial(r, started, missing):
    """What row `r` has measured so far, as a FAIL naming what is `missing`: the parent shows it
    if the row is killed at its time limit before it ends."""
    out = r.as_dict(time.perf_counter() - started)
    out.update(verdict="FAIL", why=f"incomplete: {missing}")
    write_json(ROWS / f"{r.name}.json", out)


class RowError(Exception):
    """A step of a row failed: the row is FAIL with this line."""


def run_logged(cmd, log, env=None, timeout=None):
    """Run `cmd`, its output appended to `log`; RowError with its last line if it fails."""
    with open(log, "a") as f:
        f.write(f"$ {' '.join(map(str, cmd))}\n")
        f.flush()
        done = subprocess.run(cmd, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=timeout)
    if done.returncode:
        raise RowError(f"`{' '.join(map(str, cmd[2:4]))}` exited {done.returncode}: {last_line(log)}")
    return Path(log).read_text(errors="replace")


def gptkit(*args):
    return [sys.executable, "-m", "gptkit", *map(str, args)]


def write_json(path, data):
    """Whole or not at all: row 4 reads row 3's result while row 3 may be writing it."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def last_line(path):
    try:
        return telling_line(Path(path).read_text(errors="replace"))
    except OSError:
        return "no log"


def telling_line(text):
    """What an output says went wrong: its last `Error: ` line (gptkit's one-line errors), else the
    last exception line of a traceback, else its last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    pick = (
        next((line for line in reversed(lines) if line.startswith("Error: ")), None)
        or next((line for line in reversed(lines) if re.match(r"^[\w.]+(Error|Exception|Interrupt)\b.*:", line)), None)
        or (lines[-1] if lines else "no output")
    )
    return pick[-300:]


def gib(n):
    return f"{n / 2**30:.2f} GiB" if n is not None else "n/a"
