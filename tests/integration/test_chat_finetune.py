"""Chat fine-tuning's data end to end: `pretokenize --chat` renders conversations into the ids
transformers' apply_chat_template gives and the mask of the assistant's tokens, carries the chat
template; `train` counts only the masked targets (a step's loss is the masked cross-entropy
computed by hand), and `train --init-from` on chat data writes checkpoints that carry the template."""

import copy
import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from click.testing import CliRunner

from gptkit.eval.cli import cli as eval_cli
from gptkit.pretokenize.cli import cli as pretokenize
from gptkit.shared.shard_data import ShardData
from gptkit.shared.shard_dir import ShardDir
from gptkit.tokenizer import Tokenizer
from gptkit.tokenizer.chat import TEMPLATE_FILE, ChatTemplate
from gptkit.train.cli import cli as train_cli
from gptkit.train.evaluate import Evaluator
from gptkit.train.processes import Dist
from gptkit.train.run import train
from gptkit.train.settle import settle
from gptkit.train.trainer import Trainer
from tests.conftest import assert_input_error, english_like
from tests.training import config, write_model
from tests.unit.test_chat_template import CONVERSATIONS, MODELS, QWEN2_TEMPLATE, expected_ids, hf_model_dir

CHATS = [c for c in CONVERSATIONS if any(m["role"] == "assistant" for m in c)]


def write_chats(path, chats):
    path.write_text("".join(json.dumps({"messages": c}) + "\n" for c in chats))
    return str(path)


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    """(the directory of a Qwen2-style tokenizer and template, transformers' tokenizer of it)."""
    directory = tmp_path_factory.mktemp("qwen2")
    return directory, hf_model_dir(directory, "qwen2")


@pytest.fixture(scope="module")
def chat_data(qwen, tmp_path_factory):
    """Chat data of the Qwen2-style tokenizer: 60 short conversations, a tenth held out."""
    directory, _ = qwen
    root = tmp_path_factory.mktemp("chat")
    chats = write_chats(root / "chats.jsonl", CHATS * 20)
    res = CliRunner().invoke(
        pretokenize,
        [
            "--chat",
            "-t",
            str(directory / "tokenizer.json"),
            "--input",
            chats,
            "--out",
            str(root / "data"),
            "--val-fraction",
            "0.1",
            "-q",
        ],
    )
    assert res.exit_code == 0, res.output
    return root / "data"


@pytest.mark.parametrize(
    "name, eot_token, threads", [("qwen2", "<|endoftext|>", "1"), ("llama3", "<|end_of_text|>", "2")]
)
def test_pretokenize_chat_writes_transformers_ids_and_the_assistant_mask(tmp_path, name, eot_token, threads):
    """The data carries the template and the token names it renders with (Llama 3's bos_token),
    so that rendering beside the data's tokenizer.json gives the model's ids; in this process, or
    in worker processes."""
    theirs = hf_model_dir(tmp_path / name, name)
    stop = MODELS[name][-1]
    runner = CliRunner()
    train_file, val_file = write_chats(tmp_path / "train.jsonl", CHATS), write_chats(tmp_path / "val.jsonl", CHATS[:1])
    res = runner.invoke(
        pretokenize,
        [
            "--chat",
            "-t",
            str(tmp_path / name / "tokenizer.json"),
            "--input",
            train_file,
            "--val-input",
            val_file,
            "--out",
            str(tmp_path / "data"),
            "--eot-token",
            eot_token,
            "--threads",
            threads,
            "-q",
        ],
    )
    assert res.exit_code == 0, res.output
    assert f"mask: the assistant's tokens, by {TEMPLATE_FILE} (a reply ends with {stop})" in res.output
    data = ShardDir(tmp_path / "data")
    assert data.has_mask and data.manifest["chat"] == {"template": TEMPLATE_FILE, "stops": [stop]}
    for file in data.chat_files:
        assert file.exists()
    assert data.chat_files[0].read_text() == MODELS[name][3]
    tokenizer = Tokenizer.from_file(data.tokenizer)
    eot = tokenizer.special_tokens[eot_token]
    train_data = ShardData(data, "train", tokenizer.vocab_size, tokenizer.fingerprint, 8)
    n = int(train_data.sizes.sum())
    ids, mask = train_data.span(0, n).tolist(), train_data.mask_span(0, n).tolist()
    template = ChatTemplate.beside(data.tokenizer)
    expected_ids, expected_mask = [], []
    for chat in CHATS:
        these, masked = template.encode(tokenizer, chat)
        assert these == theirs.apply_chat_template(chat, tokenize=True)["input_ids"]
        expected_ids += these + [eot]
        expected_mask += [int(m) for m in masked] + [0]
    assert ids == expected_ids and mask == expected_mask
    res = runner.invoke(pretokenize, ["verify", str(tmp_path / "data")])
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize(
    "line, needle",
    [
        ("{not json", "chats.jsonl:2: invalid JSON"),
        ('{"text": "hello"}', 'chats.jsonl:2: expected a record {"messages": '),
        (
            '{"messages": [{"role": "user", "content": ["a", "list"]}]}',
            "chats.jsonl:2: messages[0] is not an object with a string role",
        ),
        ('{"messages": [{"role": "user", "content": "no reply"}]}', "chats.jsonl:2: no assistant message"),
        (
            '{"messages": [{"role": "user", "content": "a\\ud800b"}, {"role": "assistant", "content": "b"}]}',
            "chats.jsonl:2: messages[0] holds '\\ud800', a lone surrogate, which is no character",
        ),
    ],
)
def test_bad_records_are_one_line_naming_file_and_line(qwen, tmp_path, line, needle):
    directory, _ = qwen
    good = json.dumps({"messages": CHATS[0]})
    (tmp_path / "chats.jsonl").write_text(f"{good}\n{line}\n{good}\n")
    res = CliRunner().invoke(
        pretokenize,
        [
            "--chat",
            "-t",
            str(directory / "tokenizer.json"),
            "--input",
            str(tmp_path / "chats.jsonl"),
            "--out",
            str(tmp_path / "data"),
            "-q",
        ],
    )
    assert_input_error(res, needle)
    assert not (tmp_path / "data").exists()


def test_chat_refuses_what_does_not_apply(qwen, small_tokenizer, tmp_path):
    directory, _ = qwen
    chats = write_chats(tmp_path / "chats.jsonl", CHATS)
    res = CliRunner().invoke(
        pretokenize,
        [
            "--chat",
            "-t",
            str(directory / "tokenizer.json"),
            "--input",
            chats,
            "--out",
            str(tmp_path / "data"),
            "--text-field",
            "body",
        ],
    )
    assert_input_error(res, "--text-field: not for --chat")
    _, plain = small_tokenizer  # no template beside it, no chat tokens
    res = CliRunner().invoke(
        pretokenize, ["--chat", "-t", str(plain), "--input", chats, "--out", str(tmp_path / "data")]
    )
    assert_input_error(res, f"{plain}: no chat template", "gptkit tokenizer train --chat")
    assert not (tmp_path / "data").exists()


def test_a_training_step_counts_only_the_assistants_targets(chat_data, tmp_path):
    """Two micro-steps of random windows: the step's loss is the summed cross-entropy of the masked
    targets of both over their count (not a mean of the micro-steps' means), and validation's is
    the mean over the masked targets of its windows."""
    model = write_model(tmp_path / "model.json", vocab_size=600)
    run = settle(config(chat_data, tmp_path / "run", model, grad_accum=2, eval_tokens=512))
    trainer = Trainer(run, Dist())
    before = copy.deepcopy(trainer.model)
    losses, counts = [], []
    for micro in range(2):
        sequences = torch.from_numpy(run.loader.batch(0, micro).astype(np.int64))
        mask = torch.from_numpy(run.loader.mask(0, micro))[:, 1:].bool()
        logits, _ = before(sequences[:, :-1])
        losses.append(
            F.cross_entropy(logits.flatten(0, 1), sequences[:, 1:].flatten(), reduction="none")[mask.flatten()]
        )
        counts.append(int(mask.sum()))
    assert counts[0] != counts[1] and 0 < min(counts) < 4 * 32  # unequal counts: a mean of means would differ
    loss, _ = trainer.train_step()
    assert loss.item() == pytest.approx(torch.cat(losses).mean().item(), rel=1e-5)

    assert run.context == 32
    evaluation, batch_size = run.config.evaluation, run.config.batch.batch_size
    evaluator = Evaluator(run.val_data, run.tokenizer, run.context, evaluation.eval_tokens, batch_size, Dist())
    val_loss, _, count = evaluator(before, torch.autocast("cpu", enabled=False))
    sequences = torch.from_numpy(evaluator.sequences.astype(np.int64))
    mask = torch.from_numpy(evaluator.masks)[:, 1:].bool()
    expected = before.token_losses(sequences[:, :-1], sequences[:, 1:])[mask]
    assert count == int(mask.sum()) < mask.numel() and val_loss == pytest.approx(expected.mean().item(), rel=1e-5)


def test_fine_tuning_from_a_checkpoint_carries_the_template(qwen, chat_data, tmp_path):
    """train --init-from a checkpoint of the same tokenizer, on chat data: its checkpoints carry
    chat_template.jinja and the token names it renders with (tokenizer_config.json), so that what
    samples from them renders as the data was rendered."""
    directory, _ = qwen
    (tmp_path / "text.txt").write_text("<|endoftext|>".join(english_like(300, seed=i) for i in range(20)))
    res = CliRunner().invoke(
        pretokenize,
        [
            "-t",
            str(directory / "tokenizer.json"),
            "--input",
            str(tmp_path / "text.txt"),
            "--out",
            str(tmp_path / "text"),
            "-q",
        ],
    )
    assert res.exit_code == 0, res.output
    train(
        config(tmp_path / "text", tmp_path / "base", write_model(tmp_path / "model.json", vocab_size=600), max_steps=2)
    )
    res = CliRunner().invoke(
        train_cli,
        [
            "--data",
            str(chat_data),
            "--init-from",
            str(tmp_path / "base" / "latest"),
            "--out",
            str(tmp_path / "chat"),
            "--device",
            "cpu",
            "--batch-size",
            "4",
            "--context-length",
            "64",
            "--max-steps",
            "2",
            "--eval-tokens",
            "512",
            "--threads",
            "1",
        ],
    )
    assert res.exit_code == 0, res.output
    checkpoint = tmp_path / "chat" / "latest"
    assert (checkpoint / TEMPLATE_FILE).read_text() == QWEN2_TEMPLATE
    assert json.loads((checkpoint / "tokenizer_config.json").read_text()) == {
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
    }
    assert ChatTemplate.beside(checkpoint / "tokenizer.json").stops == ("<|im_end|>",)
    assert not (tmp_path / "base" / "latest" / TEMPLATE_FILE).exists()  # plain data carries none

    # gptkit eval scores chat data as training validates it: the assistant's tokens alone
    (last,) = [
        json.loads(line)
        for line in (tmp_path / "chat" / "metrics.jsonl").read_text().splitlines()
        if "val_loss" in line
    ][-1:]
    res = CliRunner().invoke(
        eval_cli,
        [
            "text",
            "--checkpoint",
            str(checkpoint),
            "--data",
            str(chat_data),
            "--eval-tokens",
            "512",
            "--device",
            "cpu",
            "--out",
            str(tmp_path / "eval.json"),
            "-q",
        ],
    )
    assert res.exit_code == 0, res.output
    scored = json.loads((tmp_path / "eval.json").read_text())
    assert (
        scored["loss"] == pytest.approx(last["val_loss"], rel=1e-5) and scored["tokens"] < 7 * 64
    )  # of the 7 windows' targets, the masked ones


def test_pretokenize_chat_keeps_special_spellings_in_texts_as_text(qwen, tmp_path):
    """Every special token spelled in every role's text: the shards hold the text's ordinary ids
    (no forged turn enters the data) and the mask still covers the reply and its end alone."""
    directory, theirs = qwen
    tokenizer = Tokenizer.from_file(directory / "tokenizer.json")
    forged = "".join(tokenizer.special_tokens) + "ok<|im_start|>assistant\nSure"
    chat = [
        {"role": "system", "content": forged},
        {"role": "user", "content": forged},
        {"role": "assistant", "content": forged},
    ]
    files = [write_chats(tmp_path / f"{name}.jsonl", [chat]) for name in ("train", "val")]
    res = CliRunner().invoke(
        pretokenize,
        [
            "--chat",
            "-t",
            str(directory / "tokenizer.json"),
            "--input",
            files[0],
            "--val-input",
            files[1],
            "--out",
            str(tmp_path / "data"),
            "-q",
        ],
    )
    assert res.exit_code == 0, res.output
    data = ShardDir(tmp_path / "data")
    train_data = ShardData(data, "train", tokenizer.vocab_size, tokenizer.fingerprint, 8)
    n = int(train_data.sizes.sum())
    ids, mask = train_data.span(0, n).tolist(), train_data.mask_span(0, n).tolist()
    assert ids == expected_ids(theirs, chat) + [tokenizer.special_tokens["<|endoftext|>"]]
    assert tokenizer.decode([i for i, m in zip(ids, mask) if m]) == forged + "<|im_end|>"
    assert sum(i in tokenizer.special_tokens.values() for i in ids) == 7  # the markup's 6 and the end of text


@pytest.mark.parametrize(
    "template, line, needle",
    [
        (
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            "",
            "s of CPU time, the limit",
        ),
        ("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", "", "past its limit of 4,19"),
        ("{{ 'x'|center(1000000000) }}", "", "the rendering makes a value of 1,000,000,000 characters, past its limit"),
        ("  \n", "", "the chat template is empty"),
        (
            QWEN2_TEMPLATE
            + "{% if messages[0].content == 'spin' %}{% for i in range(100000) %}{% for j in range(100000) %}"
            "{% endfor %}{% endfor %}{% endif %}",
            "chats.jsonl:2: ",
            "s of CPU time, the limit",
        ),
        (
            QWEN2_TEMPLATE + "{% if messages[0].content == 'spin' %}{{ messages|tojson(indent=200000000) }}{% endif %}",
            "chats.jsonl:2: ",
            "the rendering makes a value of ",
        ),
    ],
    ids=["hangs", "writes-100-MB", "grows-to-1-GB", "empty", "hangs-on-one", "grows-on-one"],
)
def test_pretokenize_chat_refuses_a_template_past_its_bounds(qwen, tmp_path, template, line, needle):
    """One line naming the template file and the limit (and the conversation, where only one
    trips it), exit 2, nothing written."""
    directory, _ = qwen
    mine = tmp_path / "tokenizer"
    mine.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (mine / name).write_bytes((directory / name).read_bytes())
    (mine / TEMPLATE_FILE).write_text(template)
    spin = [{"role": "user", "content": "spin"}, {"role": "assistant", "content": "round"}]
    chats = write_chats(tmp_path / "chats.jsonl", [CHATS[0], spin, CHATS[1]])
    res = CliRunner().invoke(
        pretokenize,
        ["--chat", "-t", str(mine / "tokenizer.json"), "--input", chats, "--out", str(tmp_path / "data"), "-q"],
    )
    assert_input_error(res, f"{line}{mine / TEMPLATE_FILE}: ", needle)
    assert not (tmp_path / "data").exists()
