"""What the benchmarks share: reading documents the way shared/corpus.py does, the memory of
a process tree, and the machine's CPU."""

import json
import os
import platform
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

EOT = "<|endoftext|>"


def iter_docs(path, block_chars=1 << 20):
    """The non-empty documents of a file, split at EOT, read a block at a time (as shared/corpus.py)."""
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        rest = ""
        while block := f.read(block_chars):
            *docs, rest = (rest + block).split(EOT)
            yield from filter(None, docs)
        if rest:
            yield rest


def tree_pss_mb(root):
    """The summed PSS of process `root` and all its descendants: each page shared between them
    (forked workers share their parent's) counts once, split between its sharers."""
    children = defaultdict(list)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            data = stat.read_text()
        except OSError:
            continue  # the process just ended
        children[int(data[data.rfind(")") + 2 :].split()[1])].append(int(stat.parent.name))
    total_kb, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo += children[pid]
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        total_kb += next((int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")), 0)
    return total_kb / 1024


def sampling_interval(elapsed):
    """Seconds between two samples of a process tree's memory, `elapsed` seconds into its run: 20 ms
    at first, then a fiftieth of the time so far (at most 0.5 s). Each sample reads every process's
    smaps; at 20 ms through a minute-long run that took a third of a core from the processes measured."""
    return min(0.5, max(0.02, elapsed / 50))


def cpu():
    """'N CPUs (model name), Python X.Y.Z'."""
    with open("/proc/cpuinfo") as f:
        model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "unknown")
    return f"{os.cpu_count()} CPUs ({model}), Python {platform.python_version()}"


def run_child(script, args):
    """Run `script _one ARGS...` (a benchmark's measuring child) and return the JSON it prints last."""
    cmd = [sys.executable, script, "_one", *map(str, args)]
    result = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if result.returncode:
        sys.exit(f"error: child {' '.join(cmd)} failed with exit status {result.returncode}")
    return json.loads(result.stdout.splitlines()[-1])


def torch_machine(threads):
    """The machine line of the benchmarks that run torch models."""
    import torch
    import transformers

    return (
        f"machine: {cpu()}, {threads} torch threads, torch {torch.__version__}, transformers {transformers.__version__}"
    )


BUSY = {
    # a CPU-bound process of another kind: one thread that never waits
    "python": "while True: pass",
    # a process that runs torch itself, on one thread per core as torch does by default: its OpenMP
    # threads spin at barriers too (a second training run, a test suite)
    "torch": "import torch\na = torch.randn(256, 256)\nwhile True: a = (a @ a).tanh_()",
}


class busy_processes:
    """`count` busy processes of `kind` (BUSY) beside the benchmark while the block runs."""

    def __init__(self, count, kind="python"):
        self.count, self.kind = count, kind

    def __enter__(self):
        self.procs = [subprocess.Popen([sys.executable, "-c", BUSY[self.kind]]) for _ in range(self.count)]
        return self

    def __exit__(self, *exc):
        for proc in self.procs:
            proc.kill()
            proc.wait()


def load_average():
    return os.getloadavg()[0]
