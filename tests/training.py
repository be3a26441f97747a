"""Helpers of the training tests in both tiers (tests/unit/test_train_*.py, tests/integration/test_train_*.py,
test_fsdp.py, test_launch.py and others): the tiny model, a run's settings and flags, its records,
checkpoints and weights, and `gptkit train` run as a subprocess or under torchrun. The fixtures
`data` and `model_json` are in tests/conftest.py."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from gptkit.train.cli import cli
from gptkit.train.config import TrainConfig

ROOT = Path(__file__).resolve().parents[1]  # the repository
ENV = {**{k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}, "OMP_NUM_THREADS": "1"}
MODEL = dict(vocab_size=450, context_length=64, d_model=32, n_layers=2, n_heads=2, d_ff=64)
SIGNALS = (signal.SIGINT, signal.SIGTERM)


def write_model(path, **overrides):
    path.write_text(json.dumps({**MODEL, **overrides}))
    return str(path)


def settings(data, out, model, **overrides):
    return {
        "data": str(data),
        "out": str(out),
        "model": model,
        "device": "cpu",
        "batch_size": 4,
        "context_length": 32,
        "max_steps": 4,
        "warmup_steps": 2,
        "lr": 3e-3,
        "eval_interval": 0,
        "eval_tokens": 256,
        "log_interval": 1,
        "checkpoint_interval": 0,
        **overrides,
    }


def config(*args, **overrides):
    return TrainConfig.of(**settings(*args, **overrides))


def flags(**kw):
    return [a for k, v in kw.items() for a in (f"--{k.replace('_', '-')}", str(v))]


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def records(run, key="loss"):
    return [r for r in map(json.loads, (Path(run) / "metrics.jsonl").read_text().splitlines()) if key in r]


def weights(checkpoint):
    from safetensors.torch import load_file  # torch: imported by the tests that read weights, not by tests/conftest.py

    return load_file(Path(checkpoint) / "model.safetensors")


def comparable(run):
    """A run's metrics without its timings: equal for a resumed run and an uninterrupted one."""
    lines = (Path(run) / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(r).items() if k not in ("tokens_per_s", "elapsed_s")} for r in lines]


def same_files(one, other):
    """Whether two directories hold the same files, byte for byte."""
    names = sorted(p.name for p in one.iterdir())
    return names == sorted(p.name for p in other.iterdir()) and all(
        (one / n).read_bytes() == (other / n).read_bytes() for n in names
    )


def stopped_after(run, step):
    """`run` as if interrupted after its checkpoint of `step`: the later checkpoints gone (their
    records stay, stale, as a kill leaves them), `latest` at it."""
    checkpoints = Path(run) / "checkpoints"
    for later in (c for c in checkpoints.glob("step-*") if int(c.name[5:11]) > step):
        shutil.rmtree(later)
    (Path(run) / "latest").unlink()
    (Path(run) / "latest").symlink_to(Path("checkpoints") / next(checkpoints.glob(f"step-{step:06d}_*")).name)


def latest_step(run):
    latest = Path(run) / "latest"
    try:
        return json.loads((latest / "trainer_state.json").read_text())["step"]
    except (FileNotFoundError, ValueError):
        return -1


def python_train(*args, **popen):
    return subprocess.Popen(
        [sys.executable, "-m", "gptkit.train", *map(str, args)],
        cwd=ROOT,
        env=ENV,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **popen,
    )


def wait_for(predicate, process, timeout=60):
    deadline = time.monotonic() + timeout
    while not predicate():
        if process.poll() is not None:
            pytest.fail(f"training exited early ({process.returncode}): {process.communicate()}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail("timed out waiting for training")
        time.sleep(0.02)


def run_flags(data, out, model, **kw):
    base = dict(
        data=data,
        out=out,
        model=model,
        device="cpu",
        batch_size=4,
        context_length=32,
        warmup_steps=1,
        eval_interval=0,
        eval_tokens=256,
        log_interval=1,
    )
    return flags(**{k: v for k, v in {**base, **kw}.items() if v is not None})


def torchrun(processes, *args):
    """`torchrun --standalone --nproc_per_node=N -m train ARGS` (as `python -m torch.distributed.run`,
    which needs no PATH)."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={processes}",
            "-m",
            "gptkit.train",
            *map(str, args),
        ],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=180,
    )
