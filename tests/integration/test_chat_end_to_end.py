"""Chat fine-tuning end to end, through the commands: conversations about the project's own stories
(stories --chat) -> a tokenizer with the chat tokens -> pretokenize --chat -> train
--init-from a tiny model -> gptkit serve, asked through the official openai client. The replies
to openings it never saw follow the trained answer format and end at the end of turn; the
untrained model's do not (so the format is what fine-tuning taught)."""

import json
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from gptkit.model.cli import cli as model_cli
from gptkit.pretokenize.cli import cli as pretokenize_cli
from gptkit.sample.sampling import Sampler, Settings
from gptkit.stories import conversations
from gptkit.stories.cli import cli as stories_cli
from gptkit.stories.generate import WHO, write_corpus
from gptkit.tokenizer.cli import cli as tokenizer_cli
from gptkit.train.cli import cli as train_cli

openai = pytest.importorskip("openai")  # the reference client, a test extra

MODEL = {
    "vocab_size": 512,
    "context_length": 128,
    "d_model": 64,
    "n_layers": 2,
    "n_heads": 4,
    "d_ff": 192,
    "tie_embeddings": True,
}
ANSWER = re.compile(r"The story is about [A-Z][a-z]+(?: and [A-Z][a-z]+)?, (?:an?|two) [a-z -]+\.")
MAX_TOKENS = 24


def ok(cli, *args):
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert res.exit_code == 0, (res.output, res.exception)
    return res


def test_a_tiny_model_fine_tuned_on_conversations_answers_in_their_format_through_serve(tmp_path):
    ok(stories_cli, "--chat", "--out", tmp_path / "chat.jsonl", "--size", "160KB", "--seed", 0)  # 507 chats
    write_corpus(tmp_path / "stories.txt", 100_000, seed=1)
    tokenizer = tmp_path / "tokenizer.json"
    ok(
        tokenizer_cli,
        "train",
        "--input",
        tmp_path / "stories.txt",
        "--vocab-size",
        512,
        "--chat",
        "--out",
        tokenizer,
        "--quiet",
    )
    ok(
        pretokenize_cli,
        "--chat",
        "--tokenizer",
        tokenizer,
        "--input",
        tmp_path / "chat.jsonl",
        "--out",
        tmp_path / "chat",
        "--quiet",
    )
    (tmp_path / "model.json").write_text(json.dumps(MODEL))
    ok(model_cli, "init", "--config", tmp_path / "model.json", "--tokenizer", tokenizer, "--out", tmp_path / "init")
    run = tmp_path / "run"
    ok(
        train_cli,
        "--init-from",
        tmp_path / "init",
        "--data",
        tmp_path / "chat",
        "--out",
        run,
        "--max-steps",
        200,
        "--batch-size",
        8,
        "--lr",
        3e-3,
        "--eval-interval",
        0,
        "--sample-interval",
        0,
        "--seed",
        0,
        "--device",
        "cpu",
    )

    # Questions about openings it never saw (another seed), each with room for its answer.
    tuned, untrained = Sampler(run / "latest", device="cpu"), Sampler(tmp_path / "init", device="cpu")
    asked = [chat[:1] for chat in conversations(40, seed=1) if chat[0]["content"].endswith(WHO)]
    asked = [chat for chat in asked if len(tuned.chat_ids(chat)) + MAX_TOKENS <= MODEL["context_length"]][:4]
    assert len(asked) == 4
    greedy = Settings(temperature=0, max_new_tokens=MAX_TOKENS)
    assert not any(ANSWER.fullmatch(untrained.chat(chat, greedy).texts()[0]) for chat in asked)

    server = subprocess.Popen(
        [sys.executable, "-m", "gptkit.serve", "--checkpoint", run / "latest", "--port", "0", "--device", "cpu"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = server.stderr.readline()
        assert "chat with its chat template" in line, line
        url = line.split(" at ")[1].split("/ ")[0]
        with openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120) as client:
            for chat in asked:
                out = client.chat.completions.create(
                    model="latest", messages=chat, max_tokens=MAX_TOKENS, temperature=0
                )
                reply = out.choices[0]
                assert ANSWER.fullmatch(reply.message.content), reply.message.content
                assert reply.finish_reason == "stop" and out.usage.completion_tokens < MAX_TOKENS  # its end of turn
    finally:
        server.terminate()
        server.wait(timeout=30)
        server.stderr.close()
