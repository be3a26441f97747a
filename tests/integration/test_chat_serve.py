"""Chat with a checkpoint's chat template: `gptkit sample --chat` and serve's /v1/chat/completions
(through the official openai client) render the messages with the template the checkpoint carries
(or gptkit's own for its chat tokens) and end a reply at the template's end of turn; a checkpoint
without one is refused by sample --chat and served with the plain-text template."""
import re
import subprocess
import sys

import openai
import pytest
from click.testing import CliRunner

from gptkit.sample.cli import cli as sample_cli
from gptkit.sample.sampling import Sampler, Settings
from gptkit.tokenizer.chat import GPTKIT_TEMPLATE
from tests.conftest import assert_input_error
from tests.serving import chat_checkpoint, running, tiny_checkpoint

# A template whose end of turn is the letter "e", which an untrained model writes often: its replies
# must stop at the first one. It answers only a user.
E_TEMPLATE = ("{% if add_generation_prompt and messages[-1]['role'] != 'user' %}"
              "{{ raise_exception('the last message is not the user\\'s') }}{% endif %}"
              "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}e{% endfor %}"
              "{% if add_generation_prompt %}[assistant] {% endif %}")
CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "the little cat sat on the"}]


@pytest.fixture(scope="module")
def checkpoints(small_tokenizer, tmp_path_factory):
    root, tok = tmp_path_factory.mktemp("chat"), small_tokenizer[0]
    return {"gptkit": chat_checkpoint(tok, root / "gptkit"), "e": chat_checkpoint(tok, root / "e", E_TEMPLATE),
            "plain": tiny_checkpoint(tok, root / "plain")}


@pytest.fixture(scope="module")
def samplers(checkpoints):
    return {name: Sampler(path, device="cpu") for name, path in checkpoints.items()}


def replies(sampler, messages=CHAT, **settings):
    samples = sampler.chat(messages, Settings(**{"temperature": 1.0, "top_p": 1.0, **settings}))
    return samples.texts(), samples.finish_reasons


def test_the_sampler_renders_with_the_template_and_stops_at_its_end_of_turn(samplers):
    assert samplers["gptkit"].template.source == GPTKIT_TEMPLATE and samplers["plain"].template is None
    e = samplers["e"]
    assert e.chat_ids(CHAT) == e.tokenizer.encode("[system] Be brief.e[user] the little cat sat on thee[assistant] ")
    texts, reasons = replies(e, max_new_tokens=60, seed=1, num_samples=4)
    assert all("e" not in text for text in texts) and reasons == ["stop"] * 4


def run_sample(*args):
    return CliRunner().invoke(sample_cli, [str(a) for a in args] + ["--device", "cpu"])


def test_sample_chat_prints_the_reply(checkpoints, samplers):
    res = run_sample("--checkpoint", checkpoints["e"], "--chat", "--system", "Be brief.", "--prompt", CHAT[1]["content"],
                     "--seed", 3, "--max-new-tokens", 40)
    assert res.exit_code == 0, res.output
    [text], _ = replies(samplers["e"], seed=3, max_new_tokens=40, temperature=0.8, top_p=0.9)
    assert res.stdout == text + "\n"


def test_sample_chat_is_refused_without_a_template_and_system_without_chat(checkpoints):
    plain = checkpoints["plain"]
    assert_input_error(run_sample("--checkpoint", plain, "--chat", "--prompt", "hi"), f"--chat is refused for {plain}: ",
                       "no chat template", "tokenizer train --chat")
    assert_input_error(run_sample("--checkpoint", plain, "--system", "x", "--prompt", "hi"), "--system", "--chat")


@pytest.fixture(scope="module")
def clients(samplers):
    with running(samplers["e"]) as e, running(samplers["gptkit"]) as gptkit:
        clients = {name: openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=60)
                   for name, url in (("e", e), ("gptkit", gptkit))}
        yield clients
        for client in clients.values():  # before the servers stop: a connection they still read from is closed cleanly
            client.close()


@pytest.mark.parametrize("name", ["e", "gptkit"])
def test_serve_chat_renders_with_the_template(clients, samplers, name):
    sampler = samplers[name]
    out = clients[name].chat.completions.create(model="tiny", messages=CHAT, max_tokens=30, seed=5, n=2)
    texts, reasons = replies(sampler, max_new_tokens=30, seed=5, num_samples=2)
    assert [c.message.content for c in out.choices] == [t.lstrip() for t in texts]
    assert [c.finish_reason for c in out.choices] == reasons
    assert out.usage.prompt_tokens == len(sampler.chat_ids(CHAT))
    stream = clients[name].chat.completions.create(model="tiny", messages=CHAT, max_tokens=30, seed=5, stream=True)
    [text], _ = replies(sampler, max_new_tokens=30, seed=5)
    assert "".join(chunk.choices[0].delta.content or "" for chunk in stream) == text.lstrip()


def test_serve_stops_at_the_end_of_turn_and_at_a_stop_asked(clients):
    out = clients["e"].chat.completions.create(model="tiny", messages=CHAT, max_tokens=60, seed=2, n=4)
    assert all("e" not in c.message.content and c.finish_reason == "stop" for c in out.choices)
    out = clients["e"].chat.completions.create(model="tiny", messages=CHAT, max_tokens=60, seed=2, n=4, stop=["a"])
    assert all(not re.search("[ae]", c.message.content) for c in out.choices)


def test_a_template_refusal_is_a_400_naming_messages_and_developer_is_system(clients, samplers):
    with pytest.raises(openai.BadRequestError) as e:
        clients["e"].chat.completions.create(model="tiny", messages=[*CHAT, {"role": "assistant", "content": "x"}],
                                             max_tokens=2)
    assert e.value.body["param"] == "messages" and "the last message is not the user's" in e.value.body["message"]
    developer = [{"role": "developer", "content": "Be brief."}, CHAT[1]]
    out = clients["e"].chat.completions.create(model="tiny", messages=developer, max_tokens=1, temperature=0)
    assert out.usage.prompt_tokens == len(samplers["e"].chat_ids(CHAT))


def test_the_command_says_which_template_it_chats_with(checkpoints):
    for name, said in (("gptkit", "chat with its chat template"), ("plain", "chat with the plain-text template")):
        process = subprocess.Popen([sys.executable, "-m", "gptkit.serve", "--checkpoint", checkpoints[name], "--port", "0",
                                    "--device", "cpu"], stderr=subprocess.PIPE, text=True)
        try:
            line = process.stderr.readline()
        finally:
            process.terminate()
            process.wait(timeout=30)
        assert said in line, line
