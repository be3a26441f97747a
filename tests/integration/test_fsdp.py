"""`--parallel fsdp`: two processes on gloo train the run one process trains, with their shards
of the weights, gradients and AdamW state; the checkpoints they write are the one format, read
by a single process, a DDP run or FSDP again on any number of processes; a signal stops them at
a checkpoint and a resume is exact. Tiny models, a few steps."""

import json
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

from gptkit.sample.cli import cli as sample_cli
from tests.conftest import assert_input_error
from tests.integration.test_launch import train_in_two, two_processes
from tests.training import ENV, ROOT, invoke, records, run_flags, stopped_after, torchrun, weights

COMPARED = ("loss", "grad_norm", "val_loss", "val_bpb")


def comparable(run):
    return {key: [(r["step"], r[key]) for r in records(run, key)] for key in COMPARED}


def assert_same_run(run, reference, tolerance):
    got, expected = comparable(run), comparable(reference)
    for key in COMPARED:
        assert [s for s, _ in got[key]] == [s for s, _ in expected[key]] and expected[key], key
        assert [v for _, v in got[key]] == pytest.approx([v for _, v in expected[key]], abs=tolerance), key


@pytest.fixture(scope="module")
def runs(data, model_json, tmp_path_factory):
    """The same 20 steps (AdamW, two micro-steps a step, validation every 10 steps over windows the
    two processes cannot share evenly) in one process, in two with DDP, in two with FSDP, and in two
    with FSDP and activation checkpointing (DDP with Muon: test_train_processes.py)."""
    root = tmp_path_factory.mktemp("fsdp")
    common = run_flags(
        data,
        None,
        model_json,
        batch_size=4,
        grad_accum=2,
        max_steps=20,
        eval_interval=10,
        eval_tokens=160,
        checkpoint_interval=10,
    )
    one = subprocess.run(
        [sys.executable, "-m", "gptkit.train", *common, "--out", root / "one"],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert one.returncode == 0, one.stderr
    outputs = {}
    for name, flags in (
        ("ddp", ["--parallel", "ddp"]),
        ("fsdp", ["--parallel", "fsdp"]),
        ("fsdp-recompute", ["--parallel", "fsdp", "--activation-checkpointing"]),
    ):
        two = torchrun(2, *common, *flags, "--out", root / name)
        assert two.returncode == 0, two.stderr[-3000:]
        outputs[name] = two.stdout
    return root, common, outputs


def test_fsdp_and_ddp_in_two_processes_train_the_run_one_process_does(runs):
    root, _, outputs = runs
    assert "cpu x 2 (torch.distributed gloo, FSDP2, 1 thread)" in outputs["fsdp"]
    assert "cpu x 2 (torch.distributed gloo, DDP, 1 thread)" in outputs["ddp"]
    assert all(output.count("| loss ") == 20 for output in outputs.values())  # rank 0 alone logs
    assert_same_run(root / "ddp", root / "one", 1e-5)
    assert_same_run(root / "fsdp", root / "one", 1e-5)
    assert_same_run(root / "fsdp-recompute", root / "one", 1e-5)
    one = weights(root / "one/latest")
    for run in ("ddp", "fsdp"):  # the checkpoint holds every tensor whole, as one process writes it
        two = weights(root / run / "latest")
        assert two.keys() == one.keys(), run
        for name in one:
            torch.testing.assert_close(two[name], one[name], atol=1e-5, rtol=0, msg=f"{run}: {name}")


def test_an_fsdp_resume_is_exact_on_two_processes_and_goes_on_in_one(runs, tmp_path):
    root, common, _ = runs
    for name in ("two", "one"):
        shutil.copytree(root / "fsdp", tmp_path / name, symlinks=True)
        stopped_after(tmp_path / name, 10)
    resumed = torchrun(2, "--out", tmp_path / "two", "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert comparable(tmp_path / "two") == comparable(root / "fsdp")  # bit for bit
    for file in ("model.safetensors", "optimizer.safetensors"):
        a, b = load_file(root / "fsdp/latest" / file), load_file(tmp_path / "two/latest" / file)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), file
    # the checkpoint of two sharded processes, resumed by one plain process
    res = invoke("--out", tmp_path / "one", "--resume", "--threads", "1")
    assert res.exit_code == 0, res.output
    assert_same_run(tmp_path / "one", root / "fsdp", 1e-5)


def test_an_fsdp_checkpoint_is_sampled_by_one_process(runs):
    root, _, _ = runs
    args = ["--max-new-tokens", "12", "--temperature", "0", "--prompt", "the cat", "--device", "cpu"]
    sharded = CliRunner().invoke(sample_cli, ["--checkpoint", str(root / "fsdp/latest"), *args])
    plain = CliRunner().invoke(sample_cli, ["--checkpoint", str(root / "one/latest"), *args])
    assert sharded.exit_code == 0 and plain.exit_code == 0, sharded.output
    assert sharded.stdout == plain.stdout and sharded.stdout.startswith("the cat")


def test_a_signal_stops_fsdp_processes_at_a_checkpoint_they_resume_from(data, model_json, tmp_path):
    """A SIGTERM sent to the launcher alone is passed on to the workers, which stop as one process
    does (Ctrl-C to the whole group: test_launch.py)."""
    run = tmp_path / "run"
    proc = two_processes(
        *run_flags(data, run, model_json, max_steps=100000, checkpoint_interval=100000, parallel="fsdp")
    )
    deadline = time.monotonic() + 60
    while not ((run / "metrics.jsonl").exists() and len(records(run)) >= 3):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and err == "" and "stopped by SIGTERM" in out, err
    assert f"resume with: gptkit train --out {run} --resume" in out and (run / "latest" / "model.safetensors").is_file()
    stopped = json.loads((run / "latest/trainer_state.json").read_text())["step"]
    resumed = train_in_two("--out", run, "--resume", "--max-steps", stopped + 2)
    assert resumed.returncode == 0, resumed.stderr_text
    assert [r["step"] for r in records(run)][-2:] == [stopped + 1, stopped + 2]


def test_fsdp_without_nproc_per_node_shards_over_its_one_process(data, model_json, tmp_path):
    common = run_flags(data, None, model_json, max_steps=4, eval_interval=2, eval_tokens=160, checkpoint_interval=2)
    plain = invoke(*common, "--out", tmp_path / "plain", "--threads", "1")
    sharded = invoke(*common, "--out", tmp_path / "fsdp", "--threads", "1", "--parallel", "fsdp")
    assert plain.exit_code == 0 and sharded.exit_code == 0, sharded.output
    assert "cpu x 1 (torch.distributed gloo, FSDP2, 1 thread)" in sharded.stdout
    assert_same_run(tmp_path / "fsdp", tmp_path / "plain", 1e-5)
    stopped_after(tmp_path / "fsdp", 2)
    resumed = invoke("--out", tmp_path / "fsdp", "--resume", "--threads", "1")  # sharded again, from the one format
    assert resumed.exit_code == 0 and "FSDP2" in resumed.stdout, resumed.output
    assert_same_run(tmp_path / "fsdp", tmp_path / "plain", 1e-5)


def test_fsdp_refuses_muon_in_one_line(data, model_json, tmp_path):
    res = invoke(*run_flags(data, tmp_path / "run", model_json, parallel="fsdp", optimizer="muon"))
    assert_input_error(res, "--parallel fsdp", "Muon", "--optimizer adamw")
    assert not (tmp_path / "run").exists()
