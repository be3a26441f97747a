"""`gptkit train --nproc-per-node N`: torch's launcher starts the processes of a run once the
settings and --out are checked; a worker's error reads as one process's (one `Error:` line, once,
the same exit status); SIGINT and SIGTERM stop the workers at a checkpoint as they stop one
process. Two processes on gloo, tiny models, a few steps."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from gptkit.train import launch
from gptkit.train.cli import cli
from tests.conftest import assert_input_error
from tests.integration.test_bad_input import copy_data, past_the_vocabulary
from tests.training import ROOT, records

GPTKIT = os.path.join(os.path.dirname(sys.executable), "gptkit")
# The launcher's own environment: not under torchrun, and OMP_NUM_THREADS left to the launcher.
ENV = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "OMP_NUM_THREADS")}


@pytest.fixture(scope="module")
def settings(model_json, tmp_path_factory):
    """A --config file: the tiny model of tests/training.py, 3 steps."""
    path = tmp_path_factory.mktemp("launch") / "settings.json"
    path.write_text(
        json.dumps(
            {
                "model": model_json,
                "device": "cpu",
                "batch_size": 4,
                "context_length": 32,
                "max_steps": 3,
                "warmup_steps": 1,
                "lr": 3e-3,
                "eval_interval": 0,
                "eval_tokens": 256,
                "log_interval": 1,
            }
        )
    )
    return path


def two_processes(*args, **popen):
    return subprocess.Popen(
        [GPTKIT, "train", "--nproc-per-node", "2", "--threads", "1", *map(str, args)],
        cwd=ROOT,
        env=ENV,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **popen,
    )


def train_in_two(*args):
    proc = two_processes(*args)
    proc.stdout_text, proc.stderr_text = proc.communicate(timeout=120)
    return proc


@pytest.fixture(scope="module")
def finished_run(data, settings, tmp_path_factory):
    """A run trained by `gptkit train --nproc-per-node 2`, and what it printed."""
    run = tmp_path_factory.mktemp("launched") / "run"
    return run, train_in_two("--config", settings, "--data", data, "--out", run)


def one_error_line(proc, exit_code, *needles):
    """The status one process would have had, and a single `Error:` line: no traceback, no
    launcher report, no line per rank."""
    assert proc.returncode == exit_code, proc.stderr_text
    output = proc.stdout_text + proc.stderr_text
    assert "Traceback" not in output and "ChildFailedError" not in output, output
    errors = [line for line in proc.stderr_text.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("Error: "), proc.stderr_text
    for needle in needles:
        assert str(needle) in errors[0]
    return errors[0]


def test_two_processes_train_the_run_one_process_would(data, settings, finished_run, tmp_path):
    run, proc = finished_run
    assert proc.returncode == 0, proc.stderr_text
    assert (
        "on cpu x 2 (torch.distributed gloo" in proc.stdout_text and proc.stdout_text.count("| loss ") == 3
    )  # rank 0 logs
    assert (run / "latest" / "model.safetensors").is_file()
    one = CliRunner().invoke(
        cli, ["--config", str(settings), "--data", str(data), "--out", str(tmp_path / "one"), "--threads", "1"]
    )
    assert one.exit_code == 0, one.output
    assert [r["loss"] for r in records(run)] == pytest.approx([r["loss"] for r in records(tmp_path / "one")], abs=1e-5)


@pytest.mark.parametrize(
    "args, needles",
    [
        (["--out", "RUN"], ["--out", "holds a run already"]),
        (["--out", "NEW", "--lr", "nan"], ["--lr nan"]),
        (["--out", "NEW", "--resume"], ["--out", "no run to resume"]),
        (["--out", "NEW", "--nnodes", "2"], ["--nnodes 2", "--rdzv-endpoint"]),
        (["--out", "NEW", "--nnodes", "2", "--rdzv-endpoint", "localhost"], ["--rdzv-endpoint localhost", "HOST:PORT"]),
    ],
)
def test_the_settings_and_out_are_checked_before_any_worker_starts(
    data, settings, finished_run, tmp_path, monkeypatch, args, needles
):
    monkeypatch.setattr(launch, "elastic_launch", lambda *a, **kw: pytest.fail("the workers were started"))
    paths = {"RUN": str(finished_run[0]), "NEW": str(tmp_path / "new")}
    res = CliRunner().invoke(
        cli, ["--nproc-per-node", "2", "--config", str(settings), "--data", str(data), *(paths.get(a, a) for a in args)]
    )
    assert_input_error(res, *needles)
    assert not (tmp_path / "new").exists()


def test_the_launcher_flags_need_nproc_per_node(data, settings, tmp_path):
    res = CliRunner().invoke(
        cli,
        ["--config", str(settings), "--data", str(data), "--out", str(tmp_path / "r"), "--rdzv-endpoint", "host:29500"],
    )
    assert_input_error(res, "--rdzv-endpoint: only with --nproc-per-node")


def test_a_damaged_checkpoint_is_one_line_from_the_workers(finished_run, tmp_path):
    """Only a worker reads the checkpoint back (it builds the model first): both fail, one line shows."""
    run = tmp_path / "run"
    shutil.copytree(finished_run[0], run, symlinks=True)
    optimizer = run / "latest" / "optimizer.safetensors"
    damaged = bytearray(optimizer.read_bytes())
    damaged[-5] ^= 0xFF
    optimizer.write_bytes(damaged)
    one_error_line(train_in_two("--out", run, "--resume", "--max-steps", "5"), 2, "optimizer.safetensors: corrupted")


def test_an_error_of_rank_0_alone_is_shown_not_what_its_peer_ran_into(data, settings, tmp_path):
    """--out below a file: the parent cannot tell before rank 0, the only writer, makes the
    directory; rank 1 meanwhile waits for rank 0 in a collective, and is stopped or fails there."""
    (tmp_path / "file").write_text("mine")
    proc = train_in_two("--config", settings, "--data", data, "--out", tmp_path / "file" / "run")
    one_error_line(proc, 2, f"--out {tmp_path / 'file' / 'run'}: cannot write there")


def test_a_failure_in_the_workers_exits_1_as_one_process_would(data, settings, tmp_path):
    proc = train_in_two(
        "--config", settings, "--data", data, "--out", tmp_path / "run", "--lr", "1e30", "--max-steps", "4"
    )
    line = one_error_line(proc, 1, "stopping (no checkpoint was written")
    assert line.startswith("Error: step ") and (": the loss is " in line or ": the gradient norm is " in line)


def test_a_batch_that_the_processes_cannot_share_is_the_workers_error(data, settings, tmp_path):
    proc = train_in_two("--config", settings, "--data", data, "--out", tmp_path / "run", "--batch-size", "3")
    one_error_line(proc, 2, "--batch-size 3: not divisible among 2 processes")


def test_a_crash_shows_the_workers_traceback_in_torchs_report(data, settings, tmp_path, monkeypatch):
    """A bug is no one-line error: torch's report of the failed worker shows its traceback. The bug
    is planted by a sitecustomize module that every process of the run imports first."""
    (tmp_path / "bug").mkdir()
    (tmp_path / "bug" / "sitecustomize.py").write_text(
        "from gptkit.train.data import Loader\n\n\n"
        "def batch(*args):\n"
        "    raise IndexError('index out of range in self')\n\n\n"
        "Loader.batch = batch\n"
    )
    monkeypatch.setitem(ENV, "PYTHONPATH", str(tmp_path / "bug"))
    proc = train_in_two("--config", settings, "--data", data, "--out", tmp_path / "run")
    assert proc.returncode == 1
    assert "ChildFailedError" in proc.stderr_text and "IndexError: index out of range" in proc.stderr_text


def test_an_unverified_id_past_the_vocabulary_is_the_workers_error_line(data, settings, tmp_path):
    """--no-verify-data: the ids of each batch are checked still, in every process."""
    copy, shard = copy_data(data, tmp_path)
    bad = past_the_vocabulary(shard, slice(None))
    proc = train_in_two("--config", settings, "--data", copy, "--out", tmp_path / "run", "--no-verify-data")
    one_error_line(proc, 2, f"is id {bad}, not below the vocabulary size {bad - 3}")


def test_the_first_reported_error_is_shown_whichever_rank_torch_saw_fail(tmp_path):
    """Rank 0 crashed on the collective that rank 1's error left without a peer: torch may report
    rank 0, the line is rank 1's."""
    attempt = tmp_path / "run_x" / "attempt_0"
    for rank, report in (
        (
            0,
            {
                "message": {
                    "message": "RuntimeError: Connection closed by peer",
                    "extraInfo": {"py_callstack": "Traceback ...", "timestamp": "1700000001"},
                }
            },
        ),
        (1, {"message": "--data d: no train shards", "timestamp": 1700000000.5, "exit_code": 2}),
    ):
        (attempt / str(rank)).mkdir(parents=True)
        (attempt / str(rank) / "error.json").write_text(json.dumps(report))
    error = launch._first_reported_error(tmp_path)
    assert (str(error), error.exit_code) == ("--data d: no train shards", 2)


def test_ctrl_c_stops_the_workers_at_a_checkpoint(data, settings, tmp_path):
    """Ctrl-C reaches every process of the terminal's group, and the run stops as one process does: a
    checkpoint, exit status 0 (a SIGTERM sent to the launcher alone: test_fsdp.py's signal test)."""
    run = tmp_path / "run"
    proc = two_processes(
        "--config",
        settings,
        "--data",
        data,
        "--out",
        run,
        "--max-steps",
        "100000",
        "--checkpoint-interval",
        "100000",
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while not ((run / "metrics.jsonl").exists() and len(records(run)) >= 3):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert err == "" and "stopped by SIGINT" in out and f"resume with: gptkit train --out {run} --resume" in out
    assert (run / "latest" / "model.safetensors").is_file()


def test_an_error_file_cut_short_by_the_agent_is_passed_over_for_a_whole_one(tmp_path):
    """The agent ends the other workers once one has failed, and one may have been writing its
    error file then: the whole report is the run's error, a cut one is none, and a worker writes
    its own whole or not at all."""
    whole, cut = tmp_path / "attempt_0" / "0" / "error.json", tmp_path / "attempt_0" / "1" / "error.json"
    cut.parent.mkdir(parents=True)
    cut.write_text('{"message": "Error: --lr 1e+30: the lo')
    assert launch._first_reported_error(str(tmp_path)) is None
    whole.parent.mkdir(parents=True)
    whole.write_text(json.dumps({"message": "Error: a loss that is not finite", "timestamp": 1.0, "exit_code": 1}))
    reported = launch._first_reported_error(str(tmp_path))
    assert reported is not None and (str(reported), reported.exit_code) == ("Error: a loss that is not finite", 1)
