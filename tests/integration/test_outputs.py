"""Outputs, every command: one live process owns a run or shard directory (a second is refused,
naming it; a killed one's lock is taken over), nothing a command did not write is replaced
without --overwrite, and a directory swapped for a new one is never missing after a kill."""

import hashlib
import importlib.util
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from gptkit.cli import cli
from gptkit.model.checkpoint import load_model
from gptkit.pretokenize import download as dl
from gptkit.shared.errors import SettingError
from gptkit.shared.files import settle_directory
from gptkit.shared.lock import LOCK_FILE, output_lock
from gptkit.train.run_dir import RunDir
from tests.conftest import assert_input_error
from tests.integration.test_download import PAYLOAD, FakeServer
from tests.integration.test_lora import lora_checkpoint
from tests.training import ENV, ROOT, flags

# Holds the lock of a directory, as a live command does, until killed.
HOLDER = textwrap.dedent("""
    import sys, time
    from gptkit.shared.lock import output_lock
    with output_lock(sys.argv[1], sys.argv[2]):
        print("locked", flush=True)
        time.sleep(600)
""")


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def ok(*args):
    res = invoke(*args)
    assert res.exit_code == 0, res.output
    return res


def train_args(data, out, model, **kw):
    return [
        "train",
        *flags(
            **{
                **dict(
                    data=data,
                    out=out,
                    model=model,
                    device="cpu",
                    batch_size=4,
                    context_length=32,
                    warmup_steps=1,
                    eval_interval=0,
                    eval_tokens=256,
                    max_steps=2,
                ),
                **kw,
            }
        ),
    ]


@pytest.fixture(scope="module")
def finished_run(data, model_json, tmp_path_factory):
    run = tmp_path_factory.mktemp("outputs") / "run"
    ok(*train_args(data, run, model_json))
    return run


def hold(directory, owner):
    """A process that owns `directory` until killed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(directory), owner], cwd=ROOT, env=ENV, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline() == "locked\n"
    return proc


def kill(proc):
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()


# -- one live process owns a run or shard directory -----------------------------------------------


def test_a_second_train_into_a_live_runs_directory_is_refused_until_that_process_dies(data, model_json, tmp_path):
    run = tmp_path / "run"
    holder = hold(run, "gptkit train")
    try:
        res = invoke(*train_args(data, run, model_json))
        assert_input_error(
            res, f"--out {run}: in use by process {holder.pid} (gptkit train)", "choose another directory"
        )
        assert sorted(os.listdir(run)) == [LOCK_FILE]  # the refused run wrote nothing
    finally:
        kill(holder)
    assert (run / LOCK_FILE).exists()  # a kill -9 leaves the lock file, not the lock: taken over silently
    ok(*train_args(data, run, model_json))
    assert (run / "latest").exists() and not (run / LOCK_FILE).exists()

    holder = hold(run, "gptkit train")  # --resume too
    try:
        res = invoke(*train_args(data, run, model_json, max_steps=3), "--resume")
        assert_input_error(res, f"--out {run}: in use by process {holder.pid} (gptkit train)")
    finally:
        kill(holder)
    ok(*train_args(data, run, model_json, max_steps=3), "--resume")


def test_a_second_pretokenize_into_a_live_directory_is_refused_until_that_process_dies(
    small_tokenizer, small_text, tmp_path
):
    corpus, out = tmp_path / "corpus.txt", tmp_path / "data"
    corpus.write_text("<|endoftext|>".join(small_text[i : i + 2000] for i in range(0, 20000, 2000)))
    args = [
        "pretokenize",
        "-t",
        small_tokenizer[1],
        "--input",
        corpus,
        "--out",
        out,
        "--val-fraction",
        "0.2",
        "--quiet",
    ]
    holder = hold(out, "gptkit pretokenize")
    try:
        assert_input_error(invoke(*args), f"--out {out}: in use by process {holder.pid} (gptkit pretokenize)")
        assert os.listdir(out) == [LOCK_FILE]
    finally:
        kill(holder)
    ok(*args)
    assert (out / "manifest.json").exists() and not (out / LOCK_FILE).exists()


def test_a_second_download_into_a_live_directory_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(urllib.request, "urlopen", FakeServer())
    monkeypatch.setitem(dl.DATASETS, "stories", (["https://example.org/s-train.txt"], []))
    holder = hold(tmp_path / "stories", "gptkit pretokenize download")
    try:
        with pytest.raises(SettingError, match=f"in use by process {holder.pid} "):
            dl.download_dataset("stories", tmp_path / "stories", quiet=True)
    finally:
        kill(holder)
    dl.download_dataset("stories", tmp_path / "stories", quiet=True)
    assert sorted(os.listdir(tmp_path / "stories")) == ["s-train.txt", "s-train.txt.sha256"]


def test_the_lock_leaves_nothing_behind_and_hides_from_the_directory_checks(tmp_path):
    new = tmp_path / "new"
    with pytest.raises(SettingError):
        with output_lock(new, "gptkit train"):
            assert os.listdir(new) == [LOCK_FILE]
            assert (new / LOCK_FILE).read_text() == f"{os.getpid()} gptkit train\n"
            raise SettingError("data", "a failure before anything is written")
    assert not new.exists()  # made for the lock alone: removed with it
    with output_lock(new, "gptkit train"):
        (new / "config.json").write_text("{}")
    assert os.listdir(new) == ["config.json"]  # what the command wrote stays, the lock goes
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / LOCK_FILE).write_text("garbage")  # a dead process's, damaged: taken over
    with output_lock(tmp_path / "run", "gptkit train"):
        RunDir(tmp_path / "run", master=False).start(None)  # not "a directory of other files"
    (tmp_path / "file").write_text("mine")
    with pytest.raises(SettingError, match="exists and is not a directory"):
        with output_lock(tmp_path / "file", "gptkit train"):
            pass
    assert (tmp_path / "file").read_text() == "mine"


# -- one rule for outputs: nothing a command did not write is replaced without --overwrite ----------


@pytest.fixture
def commands(finished_run, small_tokenizer, small_text, tmp_path):
    """name -> (the command writing OUT, whether it replaces its own output without --overwrite)."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(small_text[:20000])
    tok_json = small_tokenizer[0].to_json()
    vocab, merges = tmp_path / "vocab.json", tmp_path / "merges.txt"
    vocab.write_text(json.dumps(tok_json["model"]["vocab"]))
    merges.write_text("#version: 0.2\n" + "\n".join(tok_json["model"]["merges"]) + "\n")
    return {
        "stories": (["stories", "--size", "1KB"], False),
        "tokenizer train": (["tokenizer", "train", "--input", corpus, "--vocab-size", 300, "--quiet"], True),
        "tokenizer convert": (["tokenizer", "convert", "--vocab", vocab, "--merges", merges], True),
        "train plot": (["train", "plot", finished_run], True),
        "model init": (["model", "init", "--config", "tiny", "--tokenizer", small_tokenizer[1]], True),
        "model export-hf": (["model", "export-hf", "--checkpoint", finished_run / "latest"], True),
    }


@pytest.mark.parametrize(
    "name", ["stories", "tokenizer train", "tokenizer convert", "train plot", "model init", "model export-hf"]
)
def test_an_output_replaces_only_its_own_kind_unless_overwrite(commands, name, tmp_path):
    if name == "train plot":
        pytest.importorskip("matplotlib")
    args, replaces_its_own = commands[name]
    mine = tmp_path / "out" / "mine.txt"
    mine.parent.mkdir()
    mine.write_text("precious")
    assert_input_error(invoke(*args, "--out", mine), f"--out {mine}: exists and is a file", "--overwrite")
    assert mine.read_text() == "precious" and os.listdir(mine.parent) == ["mine.txt"]  # nothing beside it either
    ok(*args, "--out", mine, "--overwrite")
    assert mine.is_dir() or mine.read_bytes() != b"precious"  # the checkpoint and the export are directories
    res = invoke(*args, "--out", mine)  # now the command's own output
    if replaces_its_own:
        assert res.exit_code == 0, res.output
    else:  # a text corpus: nothing tells the command's own from the user's
        assert_input_error(res, f"--out {mine}", "--overwrite")


def test_a_file_output_never_replaces_a_directory_and_a_directory_output_takes_an_empty_one(commands, tmp_path):
    directory = tmp_path / "dir"
    (directory / "notes").mkdir(parents=True)
    for name in ("stories", "tokenizer train"):
        res = invoke(*commands[name][0], "--out", directory, "--overwrite")
        assert_input_error(res, f"--out {directory}: is a directory")
    assert_input_error(invoke(*commands["model init"][0], "--out", directory), "a directory of other files (notes)")
    (directory / "notes").rmdir()
    ok(*commands["model init"][0], "--out", directory)  # empty: nothing to lose
    load_model(directory)


def make_node(path, kind):
    """A named pipe, a socket or a device at `path` (a device: a link to /dev/null where this user may
    not make one; a command follows the link to it)."""
    if kind == "a named pipe":
        os.mkfifo(path)
    elif kind == "a socket":
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(path))
    else:
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null's numbers
        except PermissionError:
            path.symlink_to("/dev/null")


@pytest.mark.parametrize("kind", ["a named pipe", "a socket", "a device"])
def test_no_output_replaces_a_device_a_named_pipe_or_a_socket(
    commands, finished_run, data, model_json, small_tokenizer, kind, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # a short relative path: a socket's name has at most 107 bytes
    node = Path("node")
    make_node(node, kind)
    before = os.lstat(node)
    latest = finished_run / "latest"
    every = {name: args for name, (args, _) in commands.items()}
    every["model export-gguf"] = ["model", "export-gguf", "--checkpoint", latest]
    every["eval text"] = ["eval", "text", "--checkpoint", latest, "--data", data, "--device", "cpu"]
    if importlib.util.find_spec("matplotlib") is None:
        del every["train plot"]
    if importlib.util.find_spec("gguf") is None:
        del every["model export-gguf"]
    for args in every.values():
        assert_input_error(
            invoke(*args, "--out", node, "--overwrite"), f"--out {node}: is {kind}, not a file to replace"
        )
    corpus = tmp_path / "corpus.txt"  # the commands fixture's
    directories = [
        ["pretokenize", "-t", small_tokenizer[1], "--input", corpus, "--out", node, "--overwrite"],
        train_args(data, node, model_json),
    ]
    for args in directories:
        assert_input_error(invoke(*args), f"--out {node}")
    after = os.lstat(node)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)


def test_pretokenize_keeps_a_tokenizer_json_of_another_tokenizer_in_its_out(small_tokenizer, small_text, tmp_path):
    from gptkit.tokenizer import Tokenizer

    corpus, out = tmp_path / "corpus.txt", tmp_path / "data"
    corpus.write_text("<|endoftext|>".join(small_text[i : i + 2000] for i in range(0, 20000, 2000)))
    tok = small_tokenizer[0]
    other = Tokenizer(tok.vocab[:-1], tok.merges, {})
    out.mkdir()
    other.save(out / "tokenizer.json")
    args = ["pretokenize", "-t", small_tokenizer[1], "--input", corpus, "--out", out, "--quiet"]
    assert_input_error(
        invoke(*args), f"--out {out / 'tokenizer.json'}: exists and is a file, not tokenizer {tok.fingerprint}"
    )
    assert Tokenizer.from_file(out / "tokenizer.json").fingerprint == other.fingerprint and os.listdir(out) == [
        "tokenizer.json"
    ]
    ok(*args, "--overwrite")
    ok(*args)  # its own dataset now: re-encoded in place
    assert Tokenizer.from_file(out / "tokenizer.json").fingerprint == tok.fingerprint


def test_download_keeps_a_file_it_did_not_download(tmp_path, monkeypatch):
    server = FakeServer()
    monkeypatch.setattr(urllib.request, "urlopen", server)
    monkeypatch.setitem(dl.DATASETS, "stories", (["https://example.org/s-train.txt"], []))
    target = tmp_path / "stories" / "s-train.txt"
    target.parent.mkdir()
    target.write_text("my own notes")
    assert_input_error(
        invoke("pretokenize", "download", "stories", "--out", target.parent), f"--out {target}", "--overwrite"
    )
    assert target.read_text() == "my own notes" and not server.ranges
    target.write_bytes(PAYLOAD)  # the right file, its .sha256 not yet written (a kill between the two): kept
    ok("pretokenize", "download", "stories", "--out", target.parent)
    assert (
        not server.ranges
        and (target.parent / "s-train.txt.sha256").read_text().strip() == hashlib.sha256(PAYLOAD).hexdigest()
    )
    (target.parent / "s-train.txt.sha256").unlink()
    target.write_text("my own notes")
    ok("pretokenize", "download", "stories", "--out", target.parent, "--overwrite")
    assert target.read_bytes() == PAYLOAD and server.ranges == [0]


# -- what is written: the mode the umask gives, a failed write's cause -----------------------------


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_weights_and_exports_get_the_mode_the_umask_gives(umask, data, model_json, small_tokenizer, tmp_path):
    """As the JSON beside them: safetensors' save_file alone would make every weight file 0600."""
    out = tmp_path / "out"
    old = os.umask(umask)
    try:
        _, lora = lora_checkpoint(small_tokenizer[0], out, "llama", ["wq"])  # adapters.safetensors
        ok(*train_args(data, out / "run", model_json, max_steps=1))  # model and optimizer.safetensors
        ok("model", "init", "--config", model_json, "-t", small_tokenizer[1], "--out", out / "init")
        ok("model", "export-hf", "--checkpoint", lora, "--out", out / "hf")
        ok("model", "export-hf", "--checkpoint", lora, "--out", out / "peft", "--peft")
        if importlib.util.find_spec("gguf") is not None:
            ok("model", "export-gguf", "--checkpoint", lora, "--out", out / "m.gguf")
    finally:
        os.umask(old)
    files = [p for p in out.rglob("*") if p.is_file() and not p.is_symlink()]
    names = {p.name for p in files}
    assert {"model.safetensors", "optimizer.safetensors", "adapters.safetensors", "adapter_model.safetensors"} <= names
    modes = {str(p.relative_to(out)): oct(p.stat().st_mode & 0o777) for p in files}
    assert modes == dict.fromkeys(modes, oct(0o666 & ~umask))


# `gptkit model ARGS...` for each line of standard input, as a user runs them, in one process (torch
# imported once) whose files may not grow past 1,000 bytes; the exit status and standard error of each.
FILE_SIZE_LIMITED = textwrap.dedent("""
    import json, resource, signal, sys
    from click.testing import CliRunner
    from gptkit.model.cli import cli
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # as Python sets it: a write past the limit fails (EFBIG)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
    for line in sys.stdin:
        res = CliRunner().invoke(cli, json.loads(line))
        print(json.dumps([res.exit_code, res.stderr]), flush=True)
""")


def test_a_write_past_the_file_size_limit_names_its_cause(small_tokenizer, tmp_path):
    """A real failed write: the kernel refuses a file past the limit, in every writer. The GGUF
    writer (numpy's tofile) reports a short write without its cause; the line names it all the same."""
    pytest.importorskip("resource")
    _, lora = lora_checkpoint(small_tokenizer[0], tmp_path, "llama", ["wq"])
    commands = [
        ["export-hf"],
        ["export-hf", "--peft"],
        *([["export-gguf"]] if importlib.util.find_spec("gguf") else []),
    ]
    outs = [tmp_path / f"{command[-1]}-out" for command in commands]
    lines = "".join(
        json.dumps([*command, "--checkpoint", str(lora), "--out", str(out)]) + "\n"
        for command, out in zip(commands, outs)
    )
    proc = subprocess.run(
        [sys.executable, "-c", FILE_SIZE_LIMITED], input=lines, cwd=ROOT, env=ENV, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(line) for line in proc.stdout.splitlines()] == [
        [2, f"Error: --out {out}: cannot write (File too large); nothing was written there\n"] for out in outs
    ]
    assert sorted(os.listdir(tmp_path)) == ["base", "lora"]  # no export, nor a temporary of one


# -- a directory swapped for a new one is never missing ---------------------------------------------

# `gptkit model ...`, killed (os._exit, as kill -9: nothing is cleaned up) at a rename of atomic_directory's
# swap of OUT: "in", the new directory into OUT (the old one is aside); "old", deleting the old one after.
KILLED_AT_RENAME = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    kill_at, out = sys.argv[1], Path(sys.argv[2])
    real_replace = os.replace
    def replace(src, dst):
        if kill_at == "in" and Path(dst) == out or kill_at == "old" and Path(src).name.startswith(f".{out.name}.old-"):
            os._exit(9)
        real_replace(src, dst)
    os.replace = replace
    from gptkit.cli import cli
    cli(sys.argv[3:])
""")


def killed_at_rename(kill_at, out, *args):
    """Run the command into `out`, killed at that rename; its process id."""
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_AT_RENAME, kill_at, str(out), *map(str, args), "--out", str(out)],
        cwd=ROOT,
        env=ENV,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, stderr = proc.communicate()
    assert proc.returncode == 9, stderr
    return proc.pid


@pytest.mark.parametrize("next_one", ["reader", "writer"])
def test_a_kill_between_the_two_renames_leaves_the_old_checkpoint_for_the_next_command(
    small_tokenizer, tmp_path, next_one
):
    init = ["model", "init", "--config", "tiny", "--tokenizer", small_tokenizer[1]]
    out = tmp_path / "model"
    ok(*init, "--out", out, "--seed", 1)
    old = load_model(out)[0].embedding.weight.clone()
    pid = killed_at_rename("in", out, *init, "--seed", 2)
    assert sorted(os.listdir(tmp_path)) == [f".model.old-{pid}", f".model.tmp-{pid}"]  # nothing under the name
    if next_one == "reader":  # sample, export-hf, a resume: each reads the old one where it lies, changing nothing
        assert torch.equal(load_model(out)[0].embedding.weight, old)
        ok("sample", "--checkpoint", out, "--prompt", "the", "--max-new-tokens", 2, "--seed", 1, "--device", "cpu")
        assert sorted(os.listdir(tmp_path)) == [
            f".model.old-{pid}",
            f".model.tmp-{pid}",
        ]  # the next writer settles them
    else:
        ok(*init, "--out", out, "--seed", 3)
        assert not torch.equal(load_model(out)[0].embedding.weight, old)
        assert os.listdir(tmp_path) == ["model"]  # the killed run's old and new copies are gone


def test_a_kill_after_the_swap_leaves_the_new_export_and_the_next_command_deletes_the_old(finished_run, tmp_path):
    export = ["model", "export-hf", "--checkpoint", finished_run / "latest"]
    out = tmp_path / "hf"
    ok(*export, "--out", out)
    (out / "config.json").write_text(
        "{}"
    )  # tells the old copy from the new (and makes it no export of ours: --overwrite)
    pid = killed_at_rename("old", out, *export, "--overwrite")
    assert (out / "config.json").read_text() != "{}"
    assert sorted(os.listdir(tmp_path)) == [f".hf.old-{pid}", "hf"]
    assert (
        tmp_path / f".hf.old-{pid}" / "config.json"
    ).read_text() == "{}"  # whole: it is deleted under a temporary name
    settle_directory(out)  # what the next export does first
    assert os.listdir(tmp_path) == ["hf"] and (out / "config.json").read_text() != "{}"
