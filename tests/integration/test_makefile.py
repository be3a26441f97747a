"""The Makefile's steps taken out of order: a step whose input an earlier step makes says which
`make` target makes it, before its gptkit command runs. make -o keeps the install stamp as it is:
these runs install nothing."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(sys.executable).parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make")


def make(target, **variables):
    args = [
        "make",
        "-s",
        "-o",
        f"{VENV}/.installed",
        target,
        f"VENV={VENV}",
        *(f"{k}={v}" for k, v in variables.items()),
    ]
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=60)


def first_error(res):
    assert res.returncode != 0 and res.stdout == "", res
    return res.stderr.splitlines()[0]


def test_sampling_before_training_names_make_train_and_the_demos_model_when_there_is_one(tmp_path):
    run, demo = tmp_path / "runs/stories", tmp_path / "demo"
    missing = f"Error: {run}/latest: no such checkpoint; make train writes it"
    assert first_error(make("sample", RUN=run, DEMO=demo)) == missing
    (demo / "run/latest").mkdir(parents=True)
    assert first_error(make("sample", RUN=run, DEMO=demo)) == (
        f"{missing} (the demo's model: make sample CKPT={demo}/run/latest)"
    )


@pytest.mark.parametrize(
    "target, variables, line",
    [
        ("train", {"DATA": "out/stories"}, "{tmp}/out/stories: no such data directory; make encode writes it"),
        (
            "encode",
            {"CORPUS": "corpus.txt", "TOKENIZER": "tok.json"},
            "{tmp}/tok.json: no such tokenizer; make tokenizer trains it",
        ),
        (
            "tokenizer",
            {"CORPUS": "data/tinystories"},
            "{tmp}/data/tinystories: no such corpus; make corpus CORPUS={tmp}/data/"
            "tinystories generates stories there (or make data downloads a corpus into data/DATASET)",
        ),
        ("plot", {"RUN": "runs/stories"}, "{tmp}/runs/stories: no such run; make train writes it"),
    ],
)
def test_a_step_before_the_one_that_makes_its_input_names_that_step(tmp_path, target, variables, line):
    (tmp_path / "corpus.txt").write_text("Once upon a time\n")
    res = make(target, **{name: tmp_path / value for name, value in variables.items()})
    assert first_error(res) == "Error: " + line.format(tmp=tmp_path)


def test_an_input_that_is_there_goes_on_to_the_command(tmp_path):
    res = make("plot", RUN=tmp_path)
    assert first_error(res) == f"Error: {tmp_path}: no metrics.jsonl (not a run directory?)"  # gptkit train plot's
