"""One command, one grammar: `gptkit STAGE ...` and `python -m gptkit.STAGE ...`, the same flags
for the same things in every stage, --version, mistyped commands, and no top-level names that
collide with a user's files (nanoGPT's model.py and train.py) or other packages."""

import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import gptkit
from gptkit.cli import cli
from gptkit.shared import cli as shared_cli

STAGES = ("stories", "tokenizer", "pretokenize", "model", "train", "sample", "serve", "eval")
GPTKIT = Path(sys.executable).with_name("gptkit")


def run(args, cwd, **kwargs):
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120, **kwargs)


def commands(group=cli, path=("gptkit",)):
    """Every command under `gptkit`, with its path."""
    for name, command in group.commands.items():
        yield (*path, name), command
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))


def test_one_command_with_a_subcommand_per_stage_in_pipeline_order():
    assert tuple(cli.commands) == STAGES
    res = CliRunner().invoke(cli, ["--help"])
    assert res.exit_code == 0
    listed = [line.split()[0] for line in res.stdout.split("Commands:", 1)[1].splitlines() if line.strip()]
    assert listed == list(STAGES)


@pytest.mark.parametrize("args", [["--version"], *([stage, "--version"] for stage in STAGES)])
def test_version(args):
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0 and res.stdout == f"gptkit {gptkit.__version__}\n"


def test_a_group_with_a_default_command_shows_its_options_and_still_lists_its_commands():
    defaults = [(path, group) for path, group in commands() if isinstance(group, shared_cli.DefaultGroup)]
    assert [path for path, _ in defaults] == [("gptkit", "pretokenize"), ("gptkit", "train")]
    for path, group in defaults:
        res = CliRunner().invoke(cli, [*path[1:], "--help"], prog_name="gptkit")
        assert res.exit_code == 0
        default = next(iter(group.commands))
        assert f"Options of {default}, the default command:" in res.stdout
        listed = [line.split()[0] for line in res.stdout.split("Commands:", 1)[1].splitlines() if line.strip()]
        assert listed == list(group.commands)
        for option in (p for p in group.commands[default].params if isinstance(p, click.Option)):
            assert all(name in res.stdout for name in option.opts), (path, option.opts)
    train = CliRunner().invoke(cli, ["train", "--help"], prog_name="gptkit").stdout
    assert "--max-steps" in train and "--data" in train and train.startswith("Usage: gptkit train [OPTIONS]\n")


@pytest.mark.parametrize(
    "args, line",
    [
        (["train", "plto"], "Error: No such command 'plto'; did you mean 'plot'? (see 'gptkit train --help')"),
        (
            ["pretokenize", "inpsect"],
            "Error: No such command 'inpsect'; did you mean 'inspect'? (see 'gptkit pretokenize --help')",
        ),
        (
            ["tokenizer", "trian"],
            "Error: No such command 'trian'; did you mean 'train'? (see 'gptkit tokenizer --help')",
        ),
        (["model", "ifno"], "Error: No such command 'ifno'; did you mean 'info'? (see 'gptkit model --help')"),
        (["smaple"], "Error: No such command 'smaple'; did you mean 'sample'? (see 'gptkit --help')"),
        (
            ["train", "data/stories"],
            "Error: No such command 'data/stories' (commands: run, plot) (see 'gptkit train --help')",
        ),
    ],
)
def test_a_mistyped_command_is_named_with_a_suggestion(args, line):
    res = CliRunner().invoke(cli, args, prog_name="gptkit")
    assert res.exit_code == 2 and res.stdout == "" and res.stderr == line + "\n"


def test_a_file_named_like_a_command_is_still_a_corpus(tmp_path, monkeypatch, small_tokenizer):
    """`pretokenize PATH...` reads the paths: a word like a command that is a file is one of them."""
    monkeypatch.chdir(tmp_path)
    Path("inpsect").write_text("a little text to encode\n" * 50)
    res = CliRunner().invoke(cli, ["pretokenize", "inpsect", "-t", str(small_tokenizer[1]), "--out", "data", "-q"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "data/manifest.json").is_file()


def test_the_same_flag_for_the_same_thing_in_every_stage():
    """Outputs are --out, a checkpoint to read is --checkpoint, a tokenizer.json --tokenizer, CPU
    parallelism --threads; no stage has a flag of another name for any of them."""
    flags = {}
    for path, command in commands():
        for param in command.params:
            if isinstance(param, click.Option):
                for flag in param.opts:
                    flags.setdefault(flag, []).append(" ".join(path))
    assert not {"--out-dir", "--output", "--workers", "--jobs", "--ckpt", "--checkpoint-dir"} & flags.keys()
    scoring = {"gptkit eval text", "gptkit eval hellaswag", "gptkit eval choice"}
    assert {
        "gptkit tokenizer train",
        "gptkit pretokenize encode",
        "gptkit train run",
        "gptkit sample",
        *scoring,
    } <= set(flags["--threads"])
    assert {"gptkit sample", "gptkit model export-hf", *scoring} <= set(flags["--checkpoint"])
    assert {
        "gptkit stories",
        "gptkit tokenizer train",
        "gptkit pretokenize encode",
        "gptkit pretokenize download",
        "gptkit model init",
        "gptkit model export-hf",
        "gptkit train run",
        "gptkit eval download",
        *scoring,
    } <= set(flags["--out"])
    for path, command in commands():  # a checkpoint or an output is never a positional argument
        assert not [
            p for p in command.params if isinstance(p, click.Argument) and p.name in ("checkpoint", "out", "out_dir")
        ], path


def test_every_option_of_every_command_says_what_it_does():
    """--help describes every option; --checkpoint in the same words wherever it appears; a setting of a few
    choices lists them rather than TEXT."""
    undescribed = [
        (" ".join(path), option.opts[0])
        for path, command in [(("gptkit",), cli), *commands()]
        for option in command.params
        if isinstance(option, click.Option) and not (option.help or "").strip()
    ]
    assert undescribed == []
    described = {
        " ".join(path): option.help
        for path, command in commands()
        for option in command.params
        if isinstance(option, click.Option) and "--checkpoint" in option.opts
    }
    assert set(described) == {
        "gptkit model export-hf",
        "gptkit model export-gguf",
        "gptkit sample",
        "gptkit serve",
        "gptkit eval text",
        "gptkit eval hellaswag",
        "gptkit eval choice",
    }
    assert set(described.values()) == {shared_cli.CHECKPOINT_HELP}
    sample = " ".join(CliRunner().invoke(cli, ["sample", "--help"], terminal_width=400).stdout.split())
    assert "--max-new-tokens N Tokens to generate at most, for each sample" in sample
    assert "a training run's directory RUN, meaning its newest checkpoint" in sample
    train = " ".join(CliRunner().invoke(cli, ["train", "run", "--help"], terminal_width=400).stdout.split())
    for choices in ("--device auto|cpu|cuda", "--parallel ddp|fsdp", "--loader random|sequential"):
        assert choices in train
    assert (
        "--optimizer adamw|muon" in train
        and "--schedule cosine|wsd" in train
        and " TEXT " not in train.replace("--sample-prompt TEXT", "")
    )


def test_worker_threads_default_to_one_per_physical_core_shared_by_torchrun_processes(monkeypatch):
    """tokenizer train's and pretokenize's --threads (worker processes); torch's threads are measured
    up to the same share (tests/unit/test_threads.py)."""
    from gptkit.shared import workers

    cores = workers.physical_cores()
    assert 1 <= cores <= (len(__import__("os").sched_getaffinity(0)))
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert shared_cli.default_threads() == workers.cores_per_process() == cores
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(2 * cores))
    assert shared_cli.default_threads() == workers.cores_per_process() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the environment's own setting wins (torchrun sets 1)
    assert shared_cli.default_threads() == 3


NANOGPT_FILES = {
    name: "raise SystemExit('the wrong program ran: ' + __file__)\n"
    for name in ("model.py", "train.py", "sample.py", "tokenizer.py", "shared.py", "configurator.py")
}


def test_works_from_any_directory_even_one_with_nanogpts_files(tmp_path):
    """Run inside a checkout laid out like nanoGPT (model.py, train.py, sample.py at its top):
    our command and modules run, not those files."""
    for name, text in NANOGPT_FILES.items():
        (tmp_path / name).write_text(text)
    for args in (
        [str(GPTKIT), "--help"],
        [sys.executable, "-m", "gptkit.train", "--help"],
        [str(GPTKIT), "model", "info", "--config", "tiny"],
    ):
        res = run(args, tmp_path)
        assert res.returncode == 0 and "wrong program" not in res.stderr, res
    assert "Usage: gptkit train" in run([sys.executable, "-m", "gptkit.train", "--help"], tmp_path).stdout


def test_the_command_starts_without_torch(tmp_path):
    """`gptkit` imports every stage's options; none of them may import torch (2-3 s at every start,
    and pretokenize's forked workers twice as slow from a torch-sized parent)."""
    res = run([sys.executable, "-c", "import sys, gptkit.cli; print('torch' in sys.modules)"], tmp_path)
    assert res.returncode == 0 and res.stdout == "False\n", res


def test_installs_no_top_level_names_but_gptkit(tmp_path):
    """The distribution's modules are all under gptkit: `tokenizer`, `train`, `model`, ... stay free
    for the user and for other packages (PyPI's `tokenizer` installs `import tokenizer`)."""
    probe = (
        "import importlib.util as u; print(' '.join(n for n in ('tokenizer', 'pretokenize', 'model', 'train', "
        "'sample', 'serve', 'eval', 'shared', 'runtime', 'stories') if u.find_spec(n)))"
    )
    res = run([sys.executable, "-c", probe], tmp_path)
    assert res.returncode == 0 and res.stdout.strip() == "", res
