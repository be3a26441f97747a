"""The eval stage as a library: each command's function gives the numbers the command prints and
writes the --out it writes, from a checkpoint directory, a Scorer loaded once or a model already
in memory; its errors name the arguments the command shows as flags."""

import dataclasses
import json

import pytest

from gptkit.eval import Scorer, choice_accuracy, hellaswag_accuracy, text_loss, val_loss
from gptkit.model.checkpoint import load_model
from gptkit.shared.cli import error_line
from gptkit.shared.errors import SettingError
from tests.conftest import english_like
from tests.integration.test_eval import EOT, checkpoint, hellaswag_items, invoke, ok, tok, write_jsonl  # noqa: F401 (fixtures)

# One thread in the command and in the library: the same numbers to the last bit, whatever the load.
ONE_THREAD = ("--threads", 1)


def test_hellaswag_and_choice_accuracy_are_what_the_commands_print_and_write(checkpoint, tmp_path):
    mine = [
        {"context": "the cat sat on the", "choices": [" mat", " moon over the big house", " tree"], "label": 0},
        {"context": "she said", "choices": [" hello.", "and then ran"], "label": 1},
    ]
    files = {
        "hellaswag": write_jsonl(tmp_path / "hs.jsonl", hellaswag_items()),
        "choice": write_jsonl(tmp_path / "mine.jsonl", mine),
    }
    for task, accuracy in (("hellaswag", hellaswag_accuracy), ("choice", choice_accuracy)):
        res = ok(
            task,
            "--checkpoint",
            checkpoint,
            "--file",
            files[task],
            "--limit",
            5,
            "--batch-size",
            3,
            "--out",
            tmp_path / "cli.json",
            "-q",
            *ONE_THREAD,
        )
        result = accuracy(
            checkpoint,
            files[task],
            limit=5,
            batch_size=3,
            device="cpu",
            threads=1,
            out=tmp_path / "library.json",
            quiet=True,
        )
        assert (tmp_path / "library.json").read_text() == (tmp_path / "cli.json").read_text()
        assert dataclasses.asdict(result) == {
            key: json.loads((tmp_path / "cli.json").read_text())[key] for key in ("acc", "acc_norm", "items", "cut")
        }
        assert result.items == {"hellaswag": 5, "choice": 2}[task]  # --limit 5
        assert res.stdout == f"{task}: acc {result.acc:.4f}, acc_norm {result.acc_norm:.4f} ({result.items} items)\n"


def test_text_and_val_loss_are_what_the_command_prints_and_writes(checkpoint, tok, data, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text(english_like(200, seed=3))
    scorer = Scorer.load(checkpoint, device="cpu", threads=1)  # loaded once, scored three ways
    cases = [
        (("--input", text, "--adapt"), lambda out: text_loss(scorer, text, adapt=True, out=out, quiet=True)),
        (("--data", data, "--eval-tokens", 300), lambda out: val_loss(scorer, data, eval_tokens=300, out=out)),
        (("--data", data, "--copy-from", data), lambda out: val_loss(scorer, data, copy_from=data, out=out)),
    ]
    for args, score in cases:
        res = ok("text", "--checkpoint", checkpoint, *args, "--out", tmp_path / "cli.json", "-q", *ONE_THREAD)
        result = score(tmp_path / "library.json")
        assert (tmp_path / "library.json").read_text() == (tmp_path / "cli.json").read_text(), args
        line = (
            f"loss {result.loss:.4f} nats/token, {result.bpb:.4f} bits/byte ({result.tokens:,} tokens, "
            f"{result.bytes:,} bytes of text)"
        )
        if result.model_loss is not None:
            line += f"; the model alone {result.model_loss:.4f}, {result.model_bpb:.4f} ("
        assert res.stdout.startswith(line), args
    assert result.copy_tokens > 0 and result.verbatim_share == 0 and result.bpb < result.model_bpb

    model, _ = load_model(checkpoint)
    in_memory = Scorer(model, tok, tok.special_tokens[EOT], threads=1)  # no checkpoint directory to record
    ok(
        "text",
        "--checkpoint",
        checkpoint,
        "--input",
        text,
        "--batch-size",
        2,
        "--out",
        tmp_path / "cli.json",
        "-q",
        *ONE_THREAD,
    )
    result = text_loss(in_memory, [text], batch_size=2, out=tmp_path / "library.json", quiet=True)
    library, command = (json.loads((tmp_path / name).read_text()) for name in ("library.json", "cli.json"))
    assert library == {**command, "checkpoint": None}
    assert dataclasses.asdict(result) == {
        **{key: command[key] for key in ("loss", "bpb", "tokens", "bytes")},
        "model_loss": None,
        "model_bpb": None,
        "copy_tokens": None,
        "verbatim_share": None,
        "adapt_learning_rates": None,
    }


def test_the_library_names_arguments_where_the_command_names_flags(checkpoint, data, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    missing, nowhere, notes = tmp_path / "missing.txt", tmp_path / "nowhere", tmp_path / "notes.json"
    notes.write_text('{"my": "notes"}')
    cases = [
        (lambda: text_loss(checkpoint, [missing]), ("text", "--input", missing), "input"),
        (
            lambda: val_loss(checkpoint, data, copy_from=nowhere),
            ("text", "--data", data, "--copy-from", nowhere),
            "copy_from",
        ),
        (lambda: val_loss(checkpoint, data, out=notes), ("text", "--data", data, "--out", notes), "out"),
        (lambda: choice_accuracy(checkpoint, missing), ("choice", "--file", missing), "file"),
        (lambda: hellaswag_accuracy(checkpoint), ("hellaswag",), "file"),
    ]  # the default file, not downloaded
    for call, args, setting in cases:
        with pytest.raises(SettingError) as error:
            call()
        assert error.value.setting == setting
        res = invoke(*args, "--checkpoint", checkpoint)
        assert res.exit_code == 2 and res.stderr == f"Error: {error_line(error.value)}\n"
    assert notes.read_text() == '{"my": "notes"}'

    text = tmp_path / "t.txt"
    text.write_text(english_like(50))
    with pytest.raises(SettingError, match=r"^batch_size 8: not with adapt, which reads one window at a time"):
        text_loss(checkpoint, [text], adapt=True, batch_size=8)
    with pytest.raises(SettingError, match=r"^eval_tokens 0: expected a whole number, 1 or more"):
        val_loss(checkpoint, data, eval_tokens=0)
    with pytest.raises(SettingError, match=r"^device 'cpu': not with a Scorer"):
        text_loss(Scorer.load(checkpoint, device="cpu"), [text], device="cpu")
