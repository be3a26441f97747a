"""Training as subprocesses: `python -m gptkit.train` stopped by SIGINT/SIGTERM and killed at random
moments, and `torchrun` (gloo on CPU) with 2 processes equal to one (Muon; AdamW in test_fsdp.py) and
1 process on the distributed path."""

import json
import random
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from gptkit.model.checkpoint import load_model
from tests.training import ENV, ROOT, latest_step, python_train, records, run_flags, torchrun, wait_for, weights


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_training_with_a_checkpoint(data, model_json, tmp_path, signum):
    run = tmp_path / "run"
    proc = python_train(*run_flags(data, run, model_json, max_steps=100000, checkpoint_interval=100000))
    wait_for(lambda: (run / "metrics.jsonl").exists() and len(records(run)) >= 3, proc)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert f"stopped by {signum.name}" in out and f"resume with: gptkit train --out {run} --resume" in out
    last = records(run)[-1]["step"]
    assert latest_step(run) == last >= 3
    load_model(run / "latest")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_the_recipe_ends_the_run_at_once_in_one_line(data, tmp_path, signum):
    """Before the training loop there is no model to save: a run stopped while the recipe times its
    shapes (its first line, on standard error, comes before the timing) says so in one line and ends
    with the shell's status for the signal (130, 143), leaving no run directory. A long budget: the
    recipe is still at work when the signal comes."""
    run = tmp_path / "run"
    proc = python_train("--data", data, "--out", run, "--device", "cpu", "--max-time", "10h")
    first = proc.stderr.readline()
    assert first.startswith("recipe: choosing the model for ") and "10h on cpu" in first, first
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    assert out == f"stopped by {signum.name} before training began: nothing was trained, no checkpoint written\n"
    assert all(line.startswith("recipe: ") for line in err.splitlines()), err  # no traceback, no "Aborted!"
    assert not run.exists()


def test_kill_at_random_moments_leaves_a_resumable_checkpoint(data, model_json, tmp_path):
    run, rng = tmp_path / "run", random.Random(0)
    args = run_flags(data, run, model_json, max_steps=100000, checkpoint_interval=1, keep_last=2)
    for attempt in range(4):
        proc = python_train(*(args if attempt == 0 else ["--out", run, "--resume"]))
        reached = latest_step(run)
        wait_for(lambda reached=reached: latest_step(run) >= reached + 2, proc)
        time.sleep(rng.uniform(0, 0.05))
        proc.kill()
        proc.communicate()
        latest = (run / "latest").resolve()
        model, tok = load_model(latest)
        state = json.loads((latest / "trainer_state.json").read_text())
        assert latest.name == f"step-{state['step']:06d}_tokens-{state['tokens']}" and state["step"] >= reached + 2
        assert load_file(latest / "optimizer.safetensors")
        for checkpoint in (run / "checkpoints").glob("step-*"):  # the latest and any newer one are whole
            if checkpoint.name >= latest.name:
                load_model(checkpoint)
    proc = python_train("--out", run, "--resume")
    reached = latest_step(run)
    wait_for(lambda: latest_step(run) >= reached + 2, proc)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    steps = [r["step"] for r in records(run)]
    assert steps == list(range(1, steps[-1] + 1))  # records of killed attempts past their checkpoint are dropped
    assert len(list((run / "checkpoints").glob("step-*"))) <= 2


@pytest.fixture(scope="module")
def muon_run(data, model_json, tmp_path_factory):
    """4 steps with Muon (two micro-steps a step, validation every 2) in one plain process: what
    torchrun's processes must train (AdamW in two processes: test_fsdp.py's runs)."""
    common = run_flags(
        data, None, model_json, batch_size=4, grad_accum=2, max_steps=4, eval_interval=2, optimizer="muon"
    )
    run = tmp_path_factory.mktemp("muon") / "one"
    single = subprocess.run(
        [sys.executable, "-m", "gptkit.train", *common, "--out", run],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert single.returncode == 0, single.stderr
    return common, run


def test_ddp_on_two_processes_matches_one(muon_run, tmp_path):
    common, one_run = muon_run
    ddp = torchrun(2, *common, "--out", tmp_path / "two")
    assert ddp.returncode == 0, ddp.stderr[-3000:]
    assert (
        "cpu x 2 (torch.distributed gloo, DDP, 1 thread)" in ddp.stdout and ddp.stdout.count("| loss ") == 4
    )  # rank 0 alone logs
    for key in ("loss", "val_loss", "val_bpb"):
        one, two = records(one_run, key), records(tmp_path / "two", key)
        assert [r["step"] for r in one] == [r["step"] for r in two] and one
        assert [r[key] for r in two] == pytest.approx([r[key] for r in one], abs=1e-5)
    w1, w2 = weights(one_run / "latest"), weights(tmp_path / "two/latest")
    for name in w1:
        torch.testing.assert_close(w2[name], w1[name], atol=1e-5, rtol=0, msg=name)


def test_torchrun_with_one_process_takes_the_distributed_path(muon_run, tmp_path):
    """One process under torchrun runs the process group, the DDP wrapper and every collective,
    so a single GPU tests what eight would (here on gloo), and trains as a plain process does."""
    common, plain = muon_run
    one = torchrun(1, *common, "--out", tmp_path / "one")
    assert one.returncode == 0, one.stderr[-3000:]
    assert "cpu x 1 (torch.distributed gloo, DDP, 1 thread)" in one.stdout
    for key in ("loss", "grad_norm", "val_loss"):
        assert [r[key] for r in records(tmp_path / "one", key)] == [r[key] for r in records(plain, key)] != []
