"""bench/gpu_check.py (`make gpu-check`, issue 31) cannot rot: its dry run (GPU_CHECK_DRY=1: every
row's code on the CPU with tiny shapes, no torch.compile), through make in a Python where gptkit is not
installed, writes a report with every row and its verdict, and every row passes; without CUDA and without the dry run it says so in one line and
exits 2, writing nothing; GPU_CHECK_OUT is replaced only where it is the check's own. The dry run
takes about a minute on 2 cores."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.gpu_check_needs import unmet

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gpu_check.py"
ROWS = ["gpu-tier", "train-step", "resume", "fsdp", "recipe", "import-eval", "sampling", "loader", "serve"]


def env(**settings):
    return {**{k: v for k, v in os.environ.items() if not k.startswith("GPU_CHECK_")}, **settings}


def bare_python(root):
    """A Python as a GPU machine has one: torch and the packages gptkit needs, gptkit not installed (this
    interpreter's package folders read through a .pth file, whose own .pth files, gptkit's editable
    install among them, are not)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", root], check=True)
    python = root / "bin" / "python"
    folders = [p for p in sys.path if p.endswith("-packages")]
    site = subprocess.run(
        [python, "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True, text=True
    )
    (Path(site.stdout.strip()) / "packages.pth").write_text("\n".join(folders) + "\n")
    return python


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_the_dry_run_through_make_without_gptkit_installed_reports_every_row_and_passes(tmp_path):
    python = bare_python(tmp_path / "venv")
    assert subprocess.run([python, "-c", "import gptkit.train"], cwd=tmp_path).returncode != 0
    res = subprocess.run(
        ["make", "gpu-check", f"GPU_PYTHON={python}", "GPU_CHECK_DRY=1", f"GPU_CHECK_OUT={tmp_path / 'out'}"],
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["mode"] == "dry" and [row["name"] for row in report["rows"]] == ROWS
    for row in report["rows"]:
        assert (
            row["verdict"] in ("PASS", "FAIL", "SKIP") and "figures" in row and "target" in row and row["seconds"] >= 0
        )
    failed = {row["name"]: row.get("why") for row in report["rows"] if row["verdict"] != "PASS"}
    assert not failed and res.returncode == 0, (failed, res.stdout[-4000:], res.stderr[-2000:])
    table = [line for line in res.stdout.splitlines() if line.startswith("| ") and not line.startswith("| #")]
    assert [line.split(" | ")[2] for line in table] == ["PASS"] * len(ROWS)
    assert report["seconds"] < report["budget_s"]


def test_without_cuda_and_without_the_dry_run_it_says_so_in_one_line_and_exits_2(tmp_path):
    res = subprocess.run(
        [sys.executable, SCRIPT],
        cwd=ROOT,
        env=env(GPU_CHECK_OUT=str(tmp_path / "out"), CUDA_VISIBLE_DEVICES=""),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and res.stdout == "", res
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and "no CUDA" in lines[0] and "GPU_CHECK_DRY=1" in lines[0], res.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_gpu_check_installs_nothing_and_runs_a_python_with_torch(tmp_path):
    venv = Path(sys.executable).parents[1]
    res = subprocess.run(
        ["make", "-n", "gpu-check", f"VENV={venv}", f"GPU_CHECK_OUT={tmp_path}"],
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    # no CUDA here: the first Python with a torch, this one
    assert res.returncode == 0 and f"GPU_CHECK_OUT={tmp_path} " in res.stdout, res
    assert f"{venv}/bin/python bench/gpu_check.py" in res.stdout and "pip" not in res.stdout, res.stdout
    assert "make gpu-check" in subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True).stdout


def test_a_python_without_what_gptkit_needs_is_told_in_one_line():
    assert unmet(("numpy", "no_such_package_here")) == (
        "gpu-check: this Python lacks no_such_package_here; install it (without a package index: "
        "pip install --no-index --no-deps WHEELS, the wheels brought from elsewhere)"
    )
    assert unmet() is None  # this one has them all


def test_gpu_check_rows_runs_those_rows_alone_numbered_as_in_the_whole_table(tmp_path):
    """A rerun of what failed within a lent GPU's minutes: fsdp brings resume (it compares with
    resume's DDP run); an unknown row is one line naming the rows, before anything runs. (No time
    for the rows themselves: the dry run through make runs them all.)"""
    res = subprocess.run(
        [sys.executable, SCRIPT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env(GPU_CHECK_DRY="1", GPU_CHECK_OUT=str(tmp_path), GPU_CHECK_ROWS="sampling,fsdp", GPU_CHECK_BUDGET="1"),
    )
    report = json.loads((tmp_path / "report.json").read_text())
    assert [(row["row"], row["name"], row["verdict"]) for row in report["rows"]] == [
        (3, "resume", "SKIP"),
        (4, "fsdp", "SKIP"),
        (7, "sampling", "SKIP"),
    ], res.stdout[-3000:]
    table = [line for line in res.stdout.splitlines() if line.startswith("| ") and not line.startswith("| #")]
    assert [line.split(" | ")[0] for line in table] == ["| 3", "| 4", "| 7"] and res.returncode == 1
    bad = subprocess.run(
        [sys.executable, SCRIPT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env(GPU_CHECK_DRY="1", GPU_CHECK_OUT=str(tmp_path / "bad"), GPU_CHECK_ROWS="sampling fdsp"),
    )
    assert (
        bad.returncode != 0
        and bad.stdout == ""
        and bad.stderr.splitlines() == ["Error: GPU_CHECK_ROWS: no row fdsp (rows: " + ", ".join(ROWS) + ")"]
    )
    assert not (tmp_path / "bad").exists()


def no_rows(out):
    """The check with no time for any row (every row SKIP, none started): its output alone."""
    return subprocess.run(
        [sys.executable, SCRIPT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env(GPU_CHECK_DRY="1", GPU_CHECK_OUT=str(out), GPU_CHECK_ROWS="sampling", GPU_CHECK_BUDGET="1"),
    )


def assert_refused(res, *needles):
    assert res.returncode == 2 and res.stdout == "", res
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: GPU_CHECK_OUT ") and "Traceback" not in res.stderr, (
        res.stderr
    )
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_gpu_check_out_holding_a_users_files_or_a_file_is_refused_in_one_line_and_left_as_it_is(tmp_path):
    user = tmp_path / "mine"
    (user / "logs").mkdir(parents=True)
    (user / "logs" / "notes.txt").write_text("mine")
    assert_refused(no_rows(user), f"GPU_CHECK_OUT {user}: holds files gpu-check did not write (logs)")
    assert [p.name for p in user.rglob("*")] == ["logs", "notes.txt"] and (
        user / "logs" / "notes.txt"
    ).read_text() == "mine"

    file = tmp_path / "file"
    file.write_text("mine")
    assert_refused(no_rows(file), f"GPU_CHECK_OUT {file}: is a file")
    assert file.read_text() == "mine"
    assert_refused(no_rows(file / "out"), f"GPU_CHECK_OUT {file / 'out'}: cannot write there (Not a directory)")
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert_refused(no_rows(loop), f"GPU_CHECK_OUT {loop}: a loop of symbolic links")

    own = tmp_path / "own"  # an earlier check's output, in whose logs/ a user's file was put since
    assert no_rows(own).returncode == 1
    (own / "logs" / "notes.txt").write_text("mine")
    assert_refused(no_rows(own), f"GPU_CHECK_OUT {own}: holds files gpu-check did not write (logs/notes.txt)")
    assert (own / "logs" / "notes.txt").read_text() == "mine"


def test_gpu_check_replaces_its_own_earlier_output(tmp_path):
    first = no_rows(tmp_path / "out")
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert first.returncode == 1 and [row["verdict"] for row in report["rows"]] == ["SKIP"], first
    for stale in ("logs/resume.log", "rows/resume.json", "work/data/shards.bin"):  # what a longer run left
        (tmp_path / "out" / stale).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "out" / stale).write_text("old")
    again = no_rows(tmp_path / "out")
    assert again.returncode == 1 and again.stderr == "", again
    assert sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*")) == [
        "gptkit-gpu-check.json",
        "logs",
        "report.json",
        "rows",
        "rows/sampling.json",
        "work",
    ]
