"""Every path a command is given is looked up with its errors caught (shared/files.py, looked_up):
a symbolic link loop, a name too long for the file system or a directory this user may not
search is one `Error:` line naming the flag and the path, exit status 2, for every command that
takes a path; a run or checkpoint directory whose `latest` is a loop too."""

import importlib
import os
import shutil

import pytest
from click.testing import CliRunner

from tests.conftest import assert_input_error, english_like
from tests.training import flags


def invoke(stage, *args):
    cli = importlib.import_module(f"gptkit.{stage}.cli").cli
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.fixture(scope="module")
def run(data, model_json, tmp_path_factory):
    """A 2-step run with its checkpoint."""
    out = tmp_path_factory.mktemp("lookup") / "run"
    res = invoke(
        "train",
        *flags(
            data=data,
            out=out,
            model=model_json,
            device="cpu",
            batch_size=4,
            context_length=32,
            max_steps=2,
            warmup_steps=1,
            eval_interval=0,
            log_interval=1,
        ),
    )
    assert res.exit_code == 0, res.output
    return out


def loop(tmp_path):
    """A link to a link to it."""
    (tmp_path / "loop").symlink_to(tmp_path / "loop-back")
    (tmp_path / "loop-back").symlink_to(tmp_path / "loop")
    return tmp_path / "loop"


BAD = {
    "a symlink loop": (loop, "a loop of symbolic links"),
    "a name too long": (lambda tmp_path: tmp_path / ("x" * 300), "a name too long for the file system"),
}


def new_run(ctx, **paths):
    """A new run's flags, with `paths` (None: not given)."""
    settings = {
        "data": ctx["data"],
        "out": ctx["tmp"] / "new",
        "model": ctx["model"],
        "device": "cpu",
        "max_steps": 1,
        **paths,
    }
    return flags(**{k: v for k, v in settings.items() if v is not None})


# (stage, the flag whose path is bad, the arguments given that path and the fixtures)
CASES = [
    ("train", "--out", lambda bad, ctx: ["--resume", "--out", bad]),
    ("train", "--out", lambda bad, ctx: new_run(ctx, out=bad)),
    ("train", "--data", lambda bad, ctx: new_run(ctx, data=bad)),
    ("train", "--init-from", lambda bad, ctx: new_run(ctx, init_from=bad, model=None)),
    ("train", "--eval-hellaswag", lambda bad, ctx: new_run(ctx, eval_hellaswag=bad)),
    ("train", "--from-checkpoint", lambda bad, ctx: ["--resume", "--out", ctx["run"], "--from-checkpoint", bad]),
    ("train", "--out", lambda bad, ctx: ["plot", ctx["run"], "--out", bad]),
    ("sample", "--checkpoint", lambda bad, ctx: ["--checkpoint", bad, "--prompt", "a", "--device", "cpu"]),
    ("eval", "--checkpoint", lambda bad, ctx: ["text", "--checkpoint", bad, "--input", ctx["text"]]),
    ("eval", "--input", lambda bad, ctx: ["text", "--checkpoint", ctx["run"], "--input", bad]),
    ("eval", "--data", lambda bad, ctx: ["text", "--checkpoint", ctx["run"], "--data", bad]),
    (
        "eval",
        "--copy-from",
        lambda bad, ctx: ["text", "--checkpoint", ctx["run"], "--input", ctx["text"], "--copy-from", bad],
    ),
    ("eval", "--out", lambda bad, ctx: ["text", "--checkpoint", ctx["run"], "--input", ctx["text"], "--out", bad]),
    ("eval", "--file", lambda bad, ctx: ["choice", "--checkpoint", ctx["run"], "--file", bad]),
    ("eval", "--out", lambda bad, ctx: ["download", "hellaswag", "--out", bad]),
    ("model", "--checkpoint", lambda bad, ctx: ["export-hf", "--checkpoint", bad, "--out", ctx["tmp"] / "hf"]),
    ("model", "--out", lambda bad, ctx: ["export-hf", "--checkpoint", ctx["run"], "--out", bad]),
    ("model", "--config", lambda bad, ctx: ["info", "--config", bad]),
    ("model", "--tokenizer", lambda bad, ctx: ["init", "--config", ctx["model"], "-t", bad, "--out", ctx["tmp"] / "m"]),
    ("model", "--out", lambda bad, ctx: ["init", "--config", ctx["model"], "-t", ctx["tokenizer"], "--out", bad]),
    ("model", "--from", lambda bad, ctx: ["import-hf", "--from", bad, "--out", ctx["tmp"] / "m"]),
    ("pretokenize", "--input", lambda bad, ctx: ["-t", ctx["tokenizer"], "--input", bad, "--out", ctx["tmp"] / "d"]),
    ("pretokenize", "--out", lambda bad, ctx: ["-t", ctx["tokenizer"], "--input", ctx["text"], "--out", bad]),
    ("pretokenize", "--tokenizer", lambda bad, ctx: ["-t", bad, "--input", ctx["text"], "--out", ctx["tmp"] / "d"]),
    ("pretokenize", "--out", lambda bad, ctx: ["download", "tinystories", "--out", bad]),
    (
        "tokenizer",
        "--input",
        lambda bad, ctx: ["train", "--input", bad, "--vocab-size", 300, "--out", ctx["tmp"] / "t.json"],
    ),
    ("tokenizer", "--out", lambda bad, ctx: ["train", "--input", ctx["text"], "--vocab-size", 300, "--out", bad]),
    ("serve", "--checkpoint", lambda bad, ctx: ["--checkpoint", bad, "--port", 0, "--device", "cpu"]),
    ("stories", "--out", lambda bad, ctx: ["--out", bad, "--size", "1k"]),
]


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize(
    "stage, flag, args", CASES, ids=[f"{stage} {flag} {i}" for i, (stage, flag, _) in enumerate(CASES)]
)
def test_a_path_that_cannot_be_looked_up_is_one_line_naming_the_flag(
    stage, flag, args, bad, run, data, model_json, small_tokenizer, tmp_path
):
    make, problem = BAD[bad]
    path = make(tmp_path)
    text = tmp_path / "text.txt"
    text.write_text(english_like(100))
    ctx = {
        "run": run,
        "data": data,
        "model": model_json,
        "tokenizer": small_tokenizer[1],
        "text": text,
        "tmp": tmp_path,
    }
    before = sorted(p.name for p in tmp_path.iterdir())
    assert_input_error(invoke(stage, *args(path, ctx)), f"{flag} {path}: {problem}")
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written


@pytest.fixture
def looping_run(run, tmp_path):
    """A copy of the run whose `latest` links to itself."""
    copy = tmp_path / "run"
    shutil.copytree(run, copy, symlinks=True)
    (copy / "latest").unlink()
    (copy / "latest").symlink_to("latest")
    return copy


def test_a_resume_whose_latest_is_a_loop_names_it_and_the_intact_checkpoint(looping_run):
    step = next((looping_run / "checkpoints").glob("step-*"))
    assert_input_error(
        invoke("train", "--resume", "--out", looping_run),
        f"--resume {looping_run / 'latest'}: a loop of symbolic links",
        f"{step.name} is intact: resume from it with --resume --from-checkpoint {step}",
    )
    res = invoke("train", "--resume", "--out", looping_run, "--from-checkpoint", step, "--max-steps", 3)
    assert res.exit_code == 0 and (looping_run / "latest" / "model.safetensors").is_file(), res.output  # mended


@pytest.mark.parametrize(
    "stage, args",
    [("sample", ["--prompt", "a", "--device", "cpu"]), ("eval", ["--input", __file__, "--device", "cpu"])],
)
def test_a_checkpoint_given_as_a_run_whose_latest_is_a_loop_is_one_line(stage, args, looping_run):
    command = ["text"] if stage == "eval" else []
    assert_input_error(
        invoke(stage, *command, "--checkpoint", looping_run, *args),
        f"--checkpoint {looping_run / 'latest'}: a loop of symbolic links",
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root searches any directory")
def test_a_directory_this_user_may_not_search_is_one_line(run, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "text.txt").write_text(english_like(100))
    locked.chmod(0)
    try:
        assert_input_error(
            invoke("eval", "text", "--checkpoint", run, "--input", locked / "text.txt"),
            f"--input {locked / 'text.txt'}: permission denied on the way to it",
        )
    finally:
        locked.chmod(0o700)
