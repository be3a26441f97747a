"""The eval stage: HellaSwag scored as llm.c scores it, item by item equal to `transformers` on the
exported model; text loss and bits per byte equal to a direct computation and, on a data
directory, to the trainer's validation; the user's own multiple-choice files; --out; bad input in
one line; the download (offline, format check); --eval-hellaswag in training and its plot."""

import contextlib
import json
import math
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from click.testing import CliRunner

from gptkit.eval import tasks
from gptkit.eval.choice import frame, score
from gptkit.eval.cli import cli
from gptkit.model.checkpoint import load_model, save_model
from gptkit.model.config import ModelConfig
from gptkit.model.model import TransformerLM
from gptkit.train.evaluate import HellaSwag
from gptkit.train.processes import Dist
from gptkit.train.run import train
from tests.conftest import assert_input_error, english_like
from tests.integration.test_download import FakeResponse
from tests.training import config, records, write_model

EOT = "<|endoftext|>"
CONTEXT = 64


@pytest.fixture(scope="module")
def tok(small_tokenizer):
    return small_tokenizer[0]


@pytest.fixture(scope="module")
def checkpoint(tok, tmp_path_factory):
    """A random model whose norm gains are not 1 and whose weights are large enough for its
    losses to differ from choice to choice."""
    torch.manual_seed(0)
    model = TransformerLM(
        ModelConfig(
            vocab_size=tok.vocab_size,
            context_length=CONTEXT,
            d_model=64,
            n_layers=2,
            n_heads=4,
            n_kv_heads=2,
            d_ff=128,
            init_std=0.2,
        )
    ).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.uniform_(0.5, 1.5)
    path = tmp_path_factory.mktemp("eval") / "ckpt"
    save_model(model, tok, path, eot_id=tok.special_tokens[EOT])
    return path


def hellaswag_items(n=6, seed=0):
    """Items in HellaSwag's format, with its other fields; endings of different lengths, so that
    the summed and the mean loss can pick differently."""
    rng = np.random.default_rng(seed)
    items = []
    for i in range(n):
        endings = [english_like(int(rng.integers(1, 14)), seed=100 * seed + 10 * i + j).strip() for j in range(4)]
        ctx_a, ctx_b = (
            english_like(int(rng.integers(5, 20)), seed=1000 + i).strip(),
            english_like(3, seed=2000 + i).strip(),
        )
        items.append(
            {
                "ind": i,
                "activity_label": "Cats",
                "ctx_a": ctx_a,
                "ctx_b": ctx_b,
                "ctx": f"{ctx_a} {ctx_b}",
                "split": "val",
                "split_type": "indomain",
                "label": int(rng.integers(0, 4)),
                "endings": endings,
                "source_id": f"activitynet~v_{i}",
            }
        )
    return items


def write_jsonl(path, items):
    path.write_text("".join(json.dumps(item) + "\n" for item in items))
    return path


def invoke(*args):
    """`gptkit eval ARGS`; a scoring command on the CPU, whose numbers the tests compare with CPU
    computations (on a GPU machine --device auto would score under bf16 autocast)."""
    device = ["--device", "cpu"] if args[0] in ("text", "hellaswag", "choice") and "--device" not in args else []
    return CliRunner().invoke(cli, [str(a) for a in (*args, *device)])


def ok(*args):
    res = invoke(*args)
    assert res.exit_code == 0, res.output
    return res


def direct_choice_losses(model, prompt, choice):
    """The losses of `choice`'s tokens after `prompt`, from the model's logits, one row alone."""
    row = torch.tensor([prompt + choice])
    logits, _ = model(row[:, :-1])
    return F.cross_entropy(logits[0].double(), row[0, 1:], reduction="none")[len(prompt) - 1 :]


# -- HellaSwag ------------------------------------------------------------------------------------


def test_hellaswag_equals_transformers_on_the_export_item_by_item(checkpoint, tok, tmp_path):
    transformers = pytest.importorskip("transformers")
    from gptkit.model.hf import export_hf

    export_hf(checkpoint, tmp_path / "hf")
    hf_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    hf_model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    file = write_jsonl(tmp_path / "hellaswag_val.jsonl", hellaswag_items())
    theirs = []  # per item: (summed losses, mean losses) of the four endings
    for item in hellaswag_items():
        prompt = hf_tok(item["ctx"])[
            "input_ids"
        ]  # the export's tokenizer puts the eot first, as sample frames a prompt
        sums, means = [], []
        for ending in item["endings"]:
            row = prompt + hf_tok(" " + ending, add_special_tokens=False)["input_ids"]
            with torch.no_grad():
                logits = hf_model(torch.tensor([row])).logits[0].double()
            losses = F.cross_entropy(logits[:-1], torch.tensor(row[1:]), reduction="none")[len(prompt) - 1 :]
            sums.append(losses.sum().item())
            means.append(losses.mean().item())
        theirs.append((sums, means))

    model, _ = load_model(checkpoint)
    framing = frame(tasks.read_hellaswag(file), tok, tok.special_tokens[EOT], CONTEXT, file)
    assert framing.cut == 0
    scores = score(model.eval(), framing.items, 3, contextlib.nullcontext())  # batches of 3 rows: items straddle them
    acc, acc_norm = (p.tolist() for p in scores.predictions())
    labels = [item["label"] for item in hellaswag_items()]
    for i, (sums, means) in enumerate(theirs):
        assert scores.sums[i].tolist() == pytest.approx(sums, rel=1e-5)
        assert (scores.sums[i] / scores.counts[i]).tolist() == pytest.approx(means, rel=1e-5)
        assert acc[i] == int(np.argmin(sums)) and acc_norm[i] == int(np.argmin(means))
    assert acc != acc_norm  # the fixture tells the two apart
    expected = {
        "acc": np.mean([a == y for a, y in zip(acc, labels)]),
        "acc_norm": np.mean([a == y for a, y in zip(acc_norm, labels)]),
    }

    res = ok(
        "hellaswag", "--checkpoint", checkpoint, "--file", file, "--out", tmp_path / "results.json", "--device", "cpu"
    )
    assert res.stdout == f"hellaswag: acc {expected['acc']:.4f}, acc_norm {expected['acc_norm']:.4f} (6 items)\n"
    assert json.loads((tmp_path / "results.json").read_text()) == {
        "format": "gptkit-eval",
        "task": "hellaswag",
        "checkpoint": str(checkpoint.resolve()),
        "file": str(file.resolve()),
        "items": 6,
        "cut": 0,
        **expected,
    }
    assert "hellaswag: 6 items / 6 (100%)" in res.stderr  # the progress line
    limited = ok("hellaswag", "--checkpoint", checkpoint, "--file", file, "--limit", 2, "-q")
    assert "(2 items)" in limited.stdout and limited.stderr == ""


def test_a_context_too_long_is_cut_on_the_left_for_every_ending_alike(checkpoint, tok, tmp_path):
    items = hellaswag_items(2)
    items[1]["ctx"] = english_like(120, seed=7)  # well over the context of 64 tokens
    file = write_jsonl(tmp_path / "long.jsonl", items)
    model, _ = load_model(checkpoint)
    framing = frame(tasks.read_hellaswag(file), tok, tok.special_tokens[EOT], CONTEXT, file)
    assert framing.cut == 1
    endings = [tok.encode(" " + e) for e in items[1]["endings"]]
    kept = framing.items[1].prompt
    assert len(kept) + max(map(len, endings)) == CONTEXT + 1  # the longest row just fits
    assert kept == ([tok.special_tokens[EOT]] + tok.encode(items[1]["ctx"]))[-len(kept) :]
    scores = score(model, framing.items, 32, contextlib.nullcontext())
    for j, ending in enumerate(endings):
        assert scores.sums[1, j].item() == pytest.approx(
            direct_choice_losses(model, kept, ending).sum().item(), rel=1e-5
        )
    res = ok("hellaswag", "--checkpoint", checkpoint, "--file", file, "--out", tmp_path / "r.json", "-q")
    assert res.stderr == (
        f"warning: {file}: 1 of 2 items are longer than the model's context of 64 tokens: their "
        "contexts were cut on the left to fit\n"
    )
    assert "1 context cut on the left to fit" in res.stdout
    assert json.loads((tmp_path / "r.json").read_text())["cut"] == 1


# -- the user's own multiple-choice items ---------------------------------------------------------


def test_choice_scores_the_choices_as_written(checkpoint, tok, tmp_path):
    items = [
        {"context": "the cat sat on the", "choices": [" mat", " moon over the big house", " tree"], "label": 0},
        {"context": "she said", "choices": [" hello.", "and then ran"], "label": 1},
        {"context": "", "choices": ["the dog", "a bird flew", " 42", "東京"], "label": 3},
    ]  # the eot alone before it
    file = write_jsonl(tmp_path / "mine.jsonl", items)
    model, _ = load_model(checkpoint)
    right = right_norm = 0
    for item in items:
        prompt = [tok.special_tokens[EOT]] + tok.encode(item["context"])
        losses = [direct_choice_losses(model, prompt, tok.encode(c)) for c in item["choices"]]
        right += int(np.argmin([loss.sum().item() for loss in losses])) == item["label"]
        right_norm += int(np.argmin([loss.mean().item() for loss in losses])) == item["label"]
    res = ok(
        "choice", "--checkpoint", checkpoint, "--file", file, "--out", tmp_path / "r.json", "--batch-size", 2, "-q"
    )
    results = json.loads((tmp_path / "r.json").read_text())
    assert results == {
        "format": "gptkit-eval",
        "task": "choice",
        "checkpoint": str(checkpoint.resolve()),
        "file": str(file.resolve()),
        "acc": right / 3,
        "acc_norm": right_norm / 3,
        "items": 3,
        "cut": 0,
    }
    assert res.stdout == f"choice: acc {right / 3:.4f}, acc_norm {right_norm / 3:.4f} (3 items)\n"


# -- text -----------------------------------------------------------------------------------------


def test_text_loss_and_bits_per_byte_equal_a_direct_computation(checkpoint, tok, tmp_path):
    texts = [english_like(150, seed=1), "tiny", english_like(40, seed=2) + " <|endoftext|> is text here"]
    paths = []
    for i, text in enumerate(texts):
        paths.append(tmp_path / f"t{i}.txt")
        paths[-1].write_text(text, encoding="utf-8")
    model, _ = load_model(checkpoint)
    eot = tok.special_tokens[EOT]
    ids = [t for text in texts for t in [eot] + tok.encode(text, allowed_special=())]
    assert len(ids) > 3 * CONTEXT and (len(ids) - 1) % CONTEXT  # whole windows and a shorter last one
    losses = []
    for start in range(0, len(ids) - 1, CONTEXT):  # each window's first token the last one's last
        window = torch.tensor([ids[start : start + CONTEXT + 1]])
        logits, _ = model(window[:, :-1])
        losses.append(F.cross_entropy(logits[0].double(), window[0, 1:], reduction="none"))
    losses = torch.cat(losses)
    text_losses = losses[torch.tensor(ids[1:]) != eot]
    nbytes = sum(len(t.encode()) for t in texts)
    res = ok(
        "text",
        "--checkpoint",
        checkpoint,
        "--input",
        paths[0],
        paths[1],
        paths[2],
        "--out",
        tmp_path / "r.json",
        "--batch-size",
        2,
    )
    results = json.loads((tmp_path / "r.json").read_text())
    assert results["loss"] == pytest.approx(losses.mean().item(), rel=1e-6)
    assert results["bpb"] == pytest.approx(text_losses.sum().item() / math.log(2) / nbytes, rel=1e-6)
    assert (results["tokens"], results["bytes"]) == (len(ids) - 1, nbytes)
    assert results["input"] == [str(p.resolve()) for p in paths] and results["task"] == "text"
    assert res.stdout == (
        f"loss {results['loss']:.4f} nats/token, {results['bpb']:.4f} bits/byte "
        f"({len(ids) - 1:,} tokens, {nbytes:,} bytes of text)\n"
    )


def test_text_on_a_data_directory_equals_the_trainers_validation(data, tmp_path):
    run = tmp_path / "run"
    model = write_model(tmp_path / "model.json", context_length=32)  # the trainer's windows are the model's context
    train(config(data, run, model, max_steps=3, eval_tokens=200))
    (record,) = records(run, "val_loss")
    res = ok(
        "text",
        "--checkpoint",
        run / "latest",
        "--data",
        data,
        "--eval-tokens",
        200,
        "--batch-size",
        4,
        "--out",
        tmp_path / "r.json",
        "-q",
    )
    results = json.loads((tmp_path / "r.json").read_text())
    assert (results["loss"], results["bpb"], results["tokens"]) == (record["val_loss"], record["val_bpb"], 192)
    assert results["data"] == str(data.resolve()) and results["eval_tokens"] == 200
    assert "192 tokens" in res.stdout
    ok("text", "--checkpoint", run / "latest", "--data", data, "--out", tmp_path / "r.json", "-q")
    whole = json.loads((tmp_path / "r.json").read_text())
    assert whole["tokens"] > 192 and whole["eval_tokens"] is None  # all of the split by default

    other = tmp_path / "other-data"
    shutil.copytree(data, other)
    manifest = json.loads((other / "manifest.json").read_text())
    ours, manifest["tokenizer"]["fingerprint"] = manifest["tokenizer"]["fingerprint"], "0123456789abcdef"
    (other / "manifest.json").write_text(json.dumps(manifest))
    assert_input_error(
        invoke("text", "--checkpoint", run / "latest", "--data", other), f"--data {other}", "0123456789abcdef", ours
    )


# -- --out ----------------------------------------------------------------------------------------


def test_out_replaces_only_a_result_and_is_never_half_written(checkpoint, tmp_path):
    file = write_jsonl(tmp_path / "hs.jsonl", hellaswag_items(2))
    mine = tmp_path / "mine.json"
    mine.write_text('{"my": "notes"}')
    assert_input_error(
        invoke("hellaswag", "--checkpoint", checkpoint, "--file", file, "--out", mine), f"--out {mine}", "--overwrite"
    )
    assert mine.read_text() == '{"my": "notes"}'
    ok("hellaswag", "--checkpoint", checkpoint, "--file", file, "--out", mine, "--overwrite", "-q")
    ok("hellaswag", "--checkpoint", checkpoint, "--file", file, "--out", mine, "-q")  # its own: replaced
    before = mine.read_text()
    write_jsonl(file, hellaswag_items(2) + [{"ctx": "x", "endings": ["a", "b"], "label": 0}])
    assert_input_error(invoke("hellaswag", "--checkpoint", checkpoint, "--file", file, "--out", mine), f"{file} line 3")
    assert mine.read_text() == before and sorted(p.name for p in tmp_path.iterdir()) == ["hs.jsonl", "mine.json"]


def test_out_is_never_an_input_even_with_overwrite(checkpoint, tmp_path):
    file = write_jsonl(tmp_path / "hs.jsonl", hellaswag_items(2))
    before = file.read_text()
    assert_input_error(
        invoke("hellaswag", "--checkpoint", checkpoint, "--file", file, "--out", file, "--overwrite"),
        f"--out {file}: is --file {file}, the input",
    )
    assert_input_error(
        invoke(
            "hellaswag", "--checkpoint", checkpoint, "--file", file, "--out", Path(checkpoint) / "r.json", "--overwrite"
        ),
        "lies inside --checkpoint",
    )
    text = tmp_path / "t.txt"
    text.write_text("Once upon a time.\n")
    assert_input_error(
        invoke("text", "--checkpoint", checkpoint, "--input", text, "--out", text, "--overwrite"),
        f"--out {text}: is --input {text}, the input",
    )
    assert file.read_text() == before and text.read_text() == "Once upon a time.\n"


# -- bad input --------------------------------------------------------------------------------------


LINE_1 = json.dumps(hellaswag_items(1)[0])


@pytest.mark.parametrize(
    "text, needles",
    [
        (LINE_1 + "\n{not json\n", ["line 2: not JSON"]),
        (
            LINE_1 + "\n" + json.dumps({**hellaswag_items(1)[0], "label": 4}) + "\n",
            ["line 2: expected", '"label" (0 to 3)'],
        ),
        (json.dumps({**hellaswag_items(1)[0], "label": "2"}) + "\n", ["line 1: expected"]),
        (
            json.dumps({**hellaswag_items(1)[0], "endings": ["a", "b", "c"]}) + "\n",
            ["line 1: expected", '"endings" (4 texts)'],
        ),
        ("[1, 2]\n", ["line 1: expected a JSON object"]),
        ("\n\n", ["no items"]),
        (
            LINE_1 + "\n" + json.dumps({**hellaswag_items(1)[0], "endings": ["x " * 80] * 4}) + "\n",
            ["line 2: choice 0 has", "leaving no room for the context in the model's context of 64"],
        ),
        (
            LINE_1 + "\n" + json.dumps({**hellaswag_items(1)[0], "ctx": "the cat \ud800 sat"}) + "\n",
            ["line 2: a text holds '\\ud800', a lone surrogate"],
        ),
    ],
)
def test_a_bad_hellaswag_file_is_one_line_naming_the_line(checkpoint, tmp_path, text, needles):
    file = tmp_path / "bad.jsonl"
    file.write_text(text)
    assert_input_error(
        invoke("hellaswag", "--checkpoint", checkpoint, "--file", file, "--out", tmp_path / "r.json"),
        str(file),
        *needles,
    )
    assert not (tmp_path / "r.json").exists()


def test_bad_input_of_every_command_is_one_line(checkpoint, tmp_path, monkeypatch):
    bad_utf8 = tmp_path / "bad-utf8.jsonl"
    bad_utf8.write_bytes(LINE_1.encode() + b"\n" + LINE_1.encode()[:20] + b"\xff\xfe" + b"\n")
    assert_input_error(
        invoke("hellaswag", "--checkpoint", checkpoint, "--file", bad_utf8), f"{bad_utf8} line 2: not UTF-8"
    )
    monkeypatch.chdir(tmp_path)
    assert_input_error(
        invoke("hellaswag", "--checkpoint", checkpoint),
        "--file data/hellaswag/hellaswag_val.jsonl: no such file",
        "gptkit eval download hellaswag",
    )
    assert_input_error(
        invoke(
            "hellaswag",
            "--checkpoint",
            tmp_path / "nowhere",
            "--file",
            write_jsonl(tmp_path / "h.jsonl", hellaswag_items(1)),
        ),
        "nowhere",
    )
    one_choice = write_jsonl(tmp_path / "one.jsonl", [{"context": "a", "choices": ["b"], "label": 0}])
    assert_input_error(
        invoke("choice", "--checkpoint", checkpoint, "--file", one_choice),
        f"{one_choice} line 1",
        '"choices" (2 or more texts, none empty)',
    )
    surrogate = write_jsonl(tmp_path / "surrogate.jsonl", [{"context": "a", "choices": ["b", "c\udfff"], "label": 0}])
    assert_input_error(
        invoke("choice", "--checkpoint", checkpoint, "--file", surrogate),
        f"{surrogate} line 1: a text holds '\\udfff', a lone surrogate",
    )
    label = write_jsonl(tmp_path / "label.jsonl", [{"context": "a", "choices": ["b", "c"], "label": 2}])
    assert_input_error(invoke("choice", "--checkpoint", checkpoint, "--file", label), f"{label} line 1", '"label"')
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert_input_error(
        invoke("text", "--checkpoint", checkpoint, "--input", empty), f"--input {empty}: 1 token(s), nothing to score"
    )
    assert_input_error(invoke("text", "--checkpoint", checkpoint), "--input or --data: give one")
    assert_input_error(
        invoke("text", "--checkpoint", checkpoint, "--input", empty, "--data", tmp_path), "--input and --data"
    )
    assert_input_error(
        invoke("text", "--checkpoint", checkpoint, "--input", empty, "--eval-tokens", 5),
        "--eval-tokens: only with --data",
    )
    assert_input_error(
        invoke("text", "--checkpoint", checkpoint, "--input", tmp_path / "missing.txt"),
        "--input",
        "missing.txt: no such file",
    )
    assert_input_error(
        invoke("text", "--checkpoint", checkpoint, "--data", tmp_path), f"--data {tmp_path}: no val shards"
    )


def test_losses_that_are_not_numbers_are_refused_not_scored(checkpoint, tok, tmp_path):
    """Finite weights whose computation overflows make every loss NaN: an argmin over them would
    pick the first choice and score it. (A NaN weight is refused as the checkpoint is read,
    tests/integration/test_lora.py.)"""
    model, _ = load_model(checkpoint)
    with torch.no_grad():
        model.layers[0].ffn.w1.weight[0] = 3e38  # float32's largest is 3.4e38: the row's sum overflows
    save_model(model, tok, tmp_path / "nan", eot_id=tok.special_tokens[EOT])
    text = tmp_path / "t.txt"
    text.write_text(english_like(50))
    mine = [{"context": "the cat", "choices": [" sat", " ran"], "label": 0}]
    files = {
        "hellaswag": write_jsonl(tmp_path / "hs.jsonl", [{**item, "label": 0} for item in hellaswag_items(4)]),
        "choice": write_jsonl(tmp_path / "mine.jsonl", mine),
    }
    out = ["--out", tmp_path / "r.json", "-q"]
    for task, file in files.items():
        assert_input_error(
            invoke(task, "--checkpoint", tmp_path / "nan", "--file", file, *out),
            f"--checkpoint {tmp_path / 'nan'}: its losses on {file} are not all finite",
        )
    assert_input_error(
        invoke("text", "--checkpoint", tmp_path / "nan", "--input", text, *out),
        f"--checkpoint {tmp_path / 'nan'}: its loss is nan",
    )
    assert not (tmp_path / "r.json").exists()


# -- download -------------------------------------------------------------------------------------


class Server:
    """Serves `body` with no published hash (as raw.githubusercontent.com); honours Range."""

    def __init__(self, body):
        self.body, self.ranges = body, []

    def __call__(self, request, timeout=None):
        headers = {"Content-Length": str(len(self.body))}
        if request.get_method() == "HEAD":
            return FakeResponse(b"", 200, headers)
        start = int(request.headers.get("Range", "bytes=0-")[6:-1])
        self.ranges.append(start)
        return FakeResponse(self.body[start:], 206 if start else 200, headers)


def test_download_offline_is_one_line(tmp_path, monkeypatch):
    def offline(request, timeout=None):
        raise urllib.error.URLError("Name or service not known")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    assert_input_error(invoke("download", "hellaswag", "--out", tmp_path / "hs.jsonl"), tasks.HELLASWAG_URL, "offline")
    assert list(tmp_path.iterdir()) == []


def test_download_checks_the_format_and_the_count(tmp_path, monkeypatch):
    good = "".join(json.dumps(item) + "\n" for item in hellaswag_items(3)).encode()
    out = tmp_path / "hellaswag" / "hellaswag_val.jsonl"
    monkeypatch.setattr(urllib.request, "urlopen", Server(good))
    assert_input_error(
        invoke("download", "hellaswag", "--out", out, "-q"), tasks.HELLASWAG_URL, "3 items", "validation set has 10,042"
    )  # a fixture of 3 is not the validation set
    assert not out.parent.exists() or list(out.parent.iterdir()) == []
    monkeypatch.setattr(urllib.request, "urlopen", Server(good.replace(b'"label": ', b'"label": 1', 1)))
    assert_input_error(
        invoke("download", "hellaswag", "--out", out, "-q"),
        "not HellaSwag's format (line 1: expected",
        "the download was removed",
    )
    assert not out.parent.exists() or list(out.parent.iterdir()) == []

    monkeypatch.setattr(tasks, "HELLASWAG_VAL_ITEMS", 3)
    server = Server(good)
    monkeypatch.setattr(urllib.request, "urlopen", server)
    assert ok("download", "hellaswag", "--out", out, "-q").stdout == f"{out}: HellaSwag's validation set, checked\n"
    assert out.read_bytes() == good and sorted(p.name for p in out.parent.iterdir()) == [
        "hellaswag_val.jsonl",
        "hellaswag_val.jsonl.sha256",
    ]
    res = ok("download", "hellaswag", "--out", out, "-q")
    assert server.ranges == [0] and "already downloaded and checked" in res.stderr  # not fetched again


# -- during training --------------------------------------------------------------------------------


def test_train_scores_hellaswag_at_every_evaluation_and_plots_it(data, tmp_path, monkeypatch):
    file = write_jsonl(tmp_path / "hs.jsonl", hellaswag_items(5))
    run = tmp_path / "run"
    model = write_model(tmp_path / "model.json", context_length=32)
    monkeypatch.chdir(tmp_path)
    train(config(data, run, model, max_steps=4, eval_interval=2, eval_hellaswag=file.name))
    assert json.loads((run / "config.json").read_text())["eval_hellaswag"] == str(
        file
    )  # a resume from elsewhere finds it
    evaluations = records(run, "val_loss")
    assert [r["step"] for r in evaluations] == [2, 4]
    assert all(0 <= r["hellaswag_acc"] <= 1 and 0 <= r["hellaswag_acc_norm"] <= 1 for r in evaluations)
    results = tmp_path / "r.json"
    ok("hellaswag", "--checkpoint", run / "latest", "--file", file, "--batch-size", 4, "--out", results, "-q")
    final = json.loads(results.read_text())
    assert (evaluations[-1]["hellaswag_acc"], evaluations[-1]["hellaswag_acc_norm"]) == (
        final["acc"],
        final["acc_norm"],
    )

    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    from gptkit.train.plot import plot_run

    drawn, savefig = [], Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **kw: (drawn.append(fig), savefig(fig, *a, **kw))[1])
    plot_run(run)
    (axis,) = [a for a in drawn[0].axes if a.get_ylabel() == "HellaSwag accuracy"]
    lines = {line.get_label(): list(line.get_ydata()) for line in axis.get_lines()}
    assert lines["acc"] == [r["hellaswag_acc"] for r in evaluations]
    assert lines["acc_norm"] == [r["hellaswag_acc_norm"] for r in evaluations]


def test_train_logs_hellaswag_beside_the_validation_loss(data, tmp_path, capsys):
    file = write_jsonl(tmp_path / "hs.jsonl", hellaswag_items(3))
    train(
        config(
            data,
            tmp_path / "run",
            write_model(tmp_path / "m.json", context_length=32),
            max_steps=2,
            eval_hellaswag=file,
        )
    )
    (line,) = [line for line in capsys.readouterr().out.splitlines() if "val loss" in line]
    assert " | hellaswag acc " in line and line.endswith(" (3 items)")


def test_the_ranks_share_the_items_and_add_up_to_one_process(checkpoint, tok, tmp_path):
    file = write_jsonl(tmp_path / "hs.jsonl", hellaswag_items(5))
    model, _ = load_model(checkpoint)
    eot, nothing = tok.special_tokens[EOT], contextlib.nullcontext()
    # 4 sequences of all processes together
    whole = HellaSwag(str(file), tok, eot, CONTEXT, 4, Dist())(model, nothing)
    ranks = [HellaSwag(str(file), tok, eot, CONTEXT, 4, Dist(rank=rank, world=2))(model, nothing) for rank in range(2)]
    assert [r[2] for r in ranks] == [3, 2]
    assert whole[2] == 5 and sum(r[0] * r[2] for r in ranks) == pytest.approx(whole[0] * 5)
    assert sum(r[1] * r[2] for r in ranks) == pytest.approx(whole[1] * 5)


# -- --copy-from ------------------------------------------------------------------------------------


def test_copy_from_mixes_the_model_with_the_ngram_of_the_training_split_and_the_text_before(
    checkpoint, tok, data, tmp_path
):
    from gptkit.eval import copy
    from gptkit.eval.loss import eval_sequences, token_bytes
    from gptkit.shared.shard_data import ShardData
    from gptkit.shared.shard_dir import ShardDir

    ok("text", "--checkpoint", checkpoint, "--data", data, "--out", tmp_path / "alone.json", "-q")
    res = ok(
        "text", "--checkpoint", checkpoint, "--data", data, "--copy-from", data, "--out", tmp_path / "r.json", "-q"
    )
    alone, results = (json.loads((tmp_path / name).read_text()) for name in ("alone.json", "r.json"))
    assert results["model_bpb"] == pytest.approx(alone["bpb"], rel=1e-9) and results["tokens"] == alone["tokens"]
    assert results["bpb"] < 0.8 * alone["bpb"]  # a random model, words that recur: copying wins

    # the same numbers from the stream the flag names: the training split, then the scored tokens
    model, _ = load_model(checkpoint)

    def split(name):
        return ShardData(ShardDir(data), name, tok.vocab_size, tok.fingerprint, CONTEXT)

    train_split = split("train")
    train_tokens = np.asarray(train_split.span(0, int(train_split.starts[-1])), np.int64)
    sequences, _ = eval_sequences(split("val"), CONTEXT, 2**62)
    with torch.no_grad():
        logits, _ = model(torch.from_numpy(sequences[:, :-1].astype(np.int64)))
    targets = sequences[:, 1:].ravel().astype(np.int64)
    p_model = torch.softmax(logits.double(), -1).flatten(0, 1)[torch.arange(len(targets)), targets].numpy()
    stream = np.concatenate([train_tokens, sequences[:1, 0], targets])
    p = copy.mixed(p_model, copy.ngram(stream, len(train_tokens) + 1, p_model))
    nbytes = np.array(token_bytes(tok))[targets]
    assert results["bpb"] == pytest.approx(-np.log2(p)[nbytes > 0].sum() / nbytes.sum(), rel=1e-6)
    assert results["copy_from"] == str(data.resolve()) and results["copy_tokens"] == len(train_tokens)
    assert results["verbatim_share"] == 0 and res.stderr == ""  # held-out documents of random words
    assert (
        f"the model alone {alone['loss']:.4f}, {alone['bpb']:.4f} (copying from {len(train_tokens):,} training tokens; "
        "0.0% of the scored tokens in spans of 32+ found there verbatim)" in res.stdout
    )

    text = tmp_path / "t.txt"
    text.write_text(english_like(300, seed=5))
    ok("text", "--checkpoint", checkpoint, "--input", text, "--copy-from", data, "--out", tmp_path / "t.json", "-q")
    scored = json.loads((tmp_path / "t.json").read_text())
    assert scored["bpb"] < scored["model_bpb"]


def verbatim_share(train_tokens, ids, k=32):
    """The share of ids[1:] (ids[0] is read, not scored) inside windows of k tokens of `ids` that
    `train_tokens` holds, by comparing every window."""
    held = {tuple(train_tokens[j : j + k]) for j in range(len(train_tokens) - k + 1)}
    covered = np.zeros(len(ids), bool)
    for a in range(len(ids) - k + 1):
        covered[a : a + k] |= tuple(ids[a : a + k]) in held
    return covered[1:].mean()


def test_copy_from_says_how_much_of_the_text_it_found_verbatim_in_the_training_split(checkpoint, tok, data, tmp_path):
    """A text half made of a training document: about half its tokens lie in spans of 32+ tokens
    that the training split holds, which the line and --out say, with a warning; a fresh text: none."""
    from gptkit.shared.shard_data import ShardData
    from gptkit.shared.shard_dir import ShardDir

    train_split = ShardData(ShardDir(data), "train", tok.vocab_size, tok.fingerprint, 1)
    train_tokens = train_split.span(0, int(train_split.starts[-1])).tolist()
    eot = tok.special_tokens[EOT]
    start = train_tokens.index(eot) + 1  # the second training document, whole
    document = train_tokens[start : train_tokens.index(eot, start)]
    half, fresh = tmp_path / "half.txt", tmp_path / "fresh.txt"
    fresh.write_text(english_like(len(document) // 2, seed=99))
    half.write_text(tok.decode(document) + fresh.read_text())

    res = ok(
        "text", "--checkpoint", checkpoint, "--input", half, "--copy-from", data, "--out", tmp_path / "half.json", "-q"
    )
    share = verbatim_share(train_tokens, [eot] + tok.encode(half.read_text(), allowed_special=()))
    assert 0.4 < share < 0.6, share
    results = json.loads((tmp_path / "half.json").read_text())
    assert results["verbatim_share"] == pytest.approx(share, rel=1e-12)
    assert f"; {share:.1%} of the scored tokens in spans of 32+ found there verbatim)" in res.stdout
    assert res.stderr == (
        f"warning: --copy-from {data}: {share:.1%} of the scored tokens lie in spans of 32+ tokens found "
        "verbatim in its training split, which the n-gram copies at almost no cost: the result measures "
        "recall of the training text, not prediction; score text held out from it (its val split)\n"
    )

    res = ok(
        "text",
        "--checkpoint",
        checkpoint,
        "--input",
        fresh,
        "--copy-from",
        data,
        "--out",
        tmp_path / "fresh.json",
        "-q",
    )
    assert json.loads((tmp_path / "fresh.json").read_text())["verbatim_share"] == 0 and res.stderr == ""


def test_copy_from_a_directory_it_cannot_copy_from_is_one_line(checkpoint, data, tmp_path, monkeypatch):
    args = ("text", "--checkpoint", checkpoint, "--data", data, "--out", tmp_path / "r.json", "--copy-from")
    assert_input_error(invoke(*args, tmp_path / "nowhere"), f"--copy-from {tmp_path / 'nowhere'}: no such directory")
    val_only = tmp_path / "val-only"
    shutil.copytree(data, val_only, ignore=shutil.ignore_patterns("*_train_*"))
    assert_input_error(invoke(*args, val_only), f"{val_only}/data_train_000001.bin: cannot read")
    other = tmp_path / "other-data"
    shutil.copytree(data, other)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["tokenizer"]["fingerprint"] = "0123456789abcdef"
    (other / "manifest.json").write_text(json.dumps(manifest))
    assert_input_error(invoke(*args, other), f"--copy-from {other}: encoded with tokenizer 0123456789abcdef")
    monkeypatch.setattr("gptkit.eval.copy.MAX_STREAM", 1000)
    assert_input_error(
        invoke(*args, data), f"--copy-from {data}: ", "training tokens and", "to score, more than the 1,000"
    )
    assert not (tmp_path / "r.json").exists()


# -- --adapt ----------------------------------------------------------------------------------------


def test_adapt_scores_the_model_learning_as_it_reads_alone_and_with_copy_from(checkpoint, tok, data, tmp_path):
    from gptkit.eval import adapt
    from gptkit.eval.loss import text_windows, token_bytes

    text = tmp_path / "t.txt"
    text.write_text(english_like(60, seed=7) * 8)  # a text that repeats: a model that learns as it reads wins
    ok("text", "--checkpoint", checkpoint, "--input", text, "--out", tmp_path / "alone.json", "-q")
    res = ok("text", "--checkpoint", checkpoint, "--input", text, "--adapt", "--out", tmp_path / "r.json", "-q")
    alone, results = (json.loads((tmp_path / name).read_text()) for name in ("alone.json", "r.json"))
    assert results["model_bpb"] == pytest.approx(alone["bpb"], rel=1e-6) and results["tokens"] == alone["tokens"]
    assert results["bpb"] < 0.9 * alone["bpb"] and results["adapt_learning_rates"] == list(adapt.LEARNING_RATES)
    assert f"the model alone {alone['loss']:.4f}, {alone['bpb']:.4f} (adapting)" in res.stdout

    # the same numbers from eval/adapt.py on the windows the text makes
    model, _ = load_model(checkpoint)
    ids = [tok.special_tokens[EOT]] + tok.encode(text.read_text(), allowed_special=())
    parts = [w for w in text_windows(ids, CONTEXT) if w is not None]
    mixed, _ = adapt.adapted_losses(model, parts, contextlib.nullcontext(), torch.device("cpu"))
    nbytes = np.array(token_bytes(tok))[ids[1:]]
    assert results["bpb"] == pytest.approx(mixed[nbytes > 0].sum() / math.log(2) / nbytes.sum(), rel=1e-6)

    res = ok(
        "text",
        "--checkpoint",
        checkpoint,
        "--data",
        data,
        "--adapt",
        "--copy-from",
        data,
        "--out",
        tmp_path / "both.json",
        "-q",
    )
    ok("text", "--checkpoint", checkpoint, "--data", data, "--copy-from", data, "--out", tmp_path / "copy.json", "-q")
    both, copied = (json.loads((tmp_path / name).read_text()) for name in ("both.json", "copy.json"))
    assert both["bpb"] < copied["bpb"] and both["model_bpb"] == pytest.approx(copied["model_bpb"], rel=1e-6)
    assert f"(adapting and copying from {both['copy_tokens']:,} training tokens; " in res.stdout


def test_adapt_with_a_batch_size_is_one_line(checkpoint, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text(english_like(100))
    assert_input_error(
        invoke(
            "text",
            "--checkpoint",
            checkpoint,
            "--input",
            text,
            "--adapt",
            "--batch-size",
            8,
            "--out",
            tmp_path / "r.json",
        ),
        "--batch-size: not with --adapt",
    )
    assert not (tmp_path / "r.json").exists()
