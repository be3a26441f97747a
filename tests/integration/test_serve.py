"""`gptkit serve` against the official openai client: a real server on a free port of 127.0.0.1
(tests/serving.py), its texts compared with the sample library's for the same seed."""
import http.client
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time

import openai
import pytest

from gptkit.model.generate import prompt_ids
from gptkit.sample.sampling import Sampler, Settings
from gptkit.serve.api import render_chat
from tests.conftest import assert_input_error
from tests.serving import CONTEXT, running, tiny_checkpoint

PROMPT = "the little cat sat on the"
KEY = "sesame"


@pytest.fixture(scope="module")
def checkpoint(small_tokenizer, tmp_path_factory):
    return tiny_checkpoint(small_tokenizer[0], tmp_path_factory.mktemp("serve") / "ckpt")


@pytest.fixture(scope="module")
def sampler(checkpoint):
    return Sampler(checkpoint, device="cpu")


@pytest.fixture(scope="module")
def url(sampler):
    with running(sampler) as url:
        yield url


@pytest.fixture
def client(url):
    with openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=60) as client:
        yield client


def alone(sampler, prompt, **settings):
    """What the sample library gives for the request (the server's decoding, its defaults)."""
    return Sampler.sample(sampler, prompt, Settings(**{"temperature": 1.0, "top_p": 1.0, **settings})).texts()


def chat_prompt(text):
    return render_chat([{"role": "user", "content": text}])


def raw(url, method, path, body=b"", headers=None):
    """(status, parsed JSON) of a request made without the client: bodies it would never send."""
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    connection.request(method, path, body=body, headers=headers or {})
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, json.loads(data)


def test_a_client_that_hangs_up_mid_request_leaves_no_traceback(url, client, capsys):
    """A connection reset while the server reads the request line (as a browser drops a kept-alive
    connection): socketserver printed "Exception occurred during processing of request" and a
    traceback; the server says nothing and goes on answering."""
    host, port = url.removeprefix("http://").split(":")
    for _ in range(3):
        with socket.create_connection((host, int(port)), timeout=30) as s:
            s.sendall(b"GET /v1/mod")  # half a request line
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends a reset
        time.sleep(0.2)
    assert [m.id for m in client.models.list()] == ["tiny"]
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "Exception occurred" not in captured.err, captured.err


# -- answers ---------------------------------------------------------------------------------------


def test_models_lists_the_checkpoint(client):
    assert [m.id for m in client.models.list()] == ["tiny"]


def test_completion_is_the_sample_librarys_text_with_usage(client, sampler):
    out = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=20, seed=3)
    [text] = alone(sampler, PROMPT, max_new_tokens=20, seed=3)
    assert out.choices[0].text == text and out.object == "text_completion"
    prompt_tokens = len(prompt_ids(sampler.tokenizer, PROMPT, sampler.bos_id))
    assert out.usage.prompt_tokens == prompt_tokens
    assert 1 <= out.usage.completion_tokens <= 20
    assert out.usage.total_tokens == prompt_tokens + out.usage.completion_tokens
    assert out.choices[0].finish_reason == ("length" if out.usage.completion_tokens == 20 else "stop")


def test_completion_streamed_is_the_whole_one_and_ends_with_usage(client):
    settings = dict(model="tiny", prompt=PROMPT, max_tokens=24, seed=5, temperature=0.7, top_p=0.9)
    whole = client.completions.create(**settings)
    chunks = list(client.completions.create(**settings, stream=True, stream_options={"include_usage": True}))
    assert len(chunks) > 3  # streamed piece by piece
    assert "".join(c.choices[0].text for c in chunks if c.choices) == whole.choices[0].text
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == whole.choices[0].finish_reason
    assert chunks[-1].choices == [] and chunks[-1].usage == whole.usage
    assert all(c.usage is None for c in chunks[:-1])
    plain = list(client.completions.create(**settings, stream=True))  # no usage unless asked for, as OpenAI
    assert all(getattr(c, "usage", None) is None for c in plain)


def test_chat_whole_and_streamed(client, sampler):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello there"},
                {"role": "assistant", "content": "hi"}, {"role": "user", "content": [{"type": "text", "text": "a cat?"}]}]
    out = client.chat.completions.create(model="tiny", messages=messages, max_tokens=30, seed=11)
    prompt, stops = render_chat(messages)
    assert prompt == "System: Be brief.\nUser: hello there\nAssistant: hi\nUser: a cat?\nAssistant:"
    [text] = alone(sampler, prompt, max_new_tokens=30, seed=11, stops=stops)
    assert out.choices[0].message.content == text.lstrip() and out.choices[0].message.role == "assistant"
    chunks = list(client.chat.completions.create(model="tiny", messages=messages, max_tokens=30, seed=11, stream=True))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == out.choices[0].message.content
    assert chunks[-1].choices[0].finish_reason == out.choices[0].finish_reason


def test_chat_without_max_tokens_may_fill_the_context(client):
    out = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "go"}], seed=2,
                                         stop=["\u0000"])
    assert out.usage.total_tokens <= CONTEXT


def test_a_stop_string_ends_the_text_before_it(client):
    settings = dict(model="tiny", prompt=PROMPT, max_tokens=40, seed=7)
    text = client.completions.create(**settings).choices[0].text
    assert len(text) > 12
    stop = text[8:11]
    stopped = client.completions.create(**settings, stop=[stop, "never-in-it"])
    assert stopped.choices[0].text == text[: text.index(stop)] and stopped.choices[0].finish_reason == "stop"
    streamed = client.completions.create(**settings, stop=stop, stream=True)
    assert "".join(c.choices[0].text for c in streamed) == text[: text.index(stop)]


def test_n_choices(client, sampler):
    out = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=10, seed=1, n=3)
    assert [c.index for c in out.choices] == [0, 1, 2]
    assert [c.text for c in out.choices] == alone(sampler, PROMPT, max_new_tokens=10, seed=1, num_samples=3)
    chunks = list(client.completions.create(model="tiny", prompt=PROMPT, max_tokens=10, seed=1, n=3, stream=True))
    assert ["".join(c.choices[0].text for c in chunks if c.choices[0].index == i) for i in range(3)] == \
           [c.text for c in out.choices]


def test_concurrent_clients_each_get_their_own_text(url):
    """Six requests at once, streamed and whole, completions and chat: each text is the one the
    same request gets alone."""
    requests = [("completions", dict(prompt=p, max_tokens=25, seed=s)) for p, s in ((PROMPT, 1), ("a dog", 2), (PROMPT, 3))]
    requests += [("chat", dict(messages=[{"role": "user", "content": p}], max_tokens=25, seed=s))
                 for p, s in (("hi", 4), ("the sun", 5), ("hi", 6))]

    def ask(kind, kwargs, stream):
        with openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120) as client:
            if kind == "chat":
                out = client.chat.completions.create(model="tiny", stream=stream, **kwargs)
                return "".join(c.choices[0].delta.content or "" for c in out) if stream else out.choices[0].message.content
            out = client.completions.create(model="tiny", stream=stream, **kwargs)
            return "".join(c.choices[0].text for c in out) if stream else out.choices[0].text

    expected = [ask(kind, kwargs, False) for kind, kwargs in requests]
    assert len(set(expected)) == len(expected)  # different texts: a mix-up would show
    got = [None] * (2 * len(requests))

    def run(k):
        kind, kwargs = requests[k % len(requests)]
        got[k] = ask(kind, kwargs, stream=k < len(requests))

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(got))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == expected + expected


# -- refusals --------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, param, needle", [
    (dict(temperature=-1), "temperature", "expected 0 (greedy) or more"),
    (dict(top_p=0), "top_p", "(0, 1]"),
    (dict(n=0), "n", "1 or more"),
    (dict(max_tokens=0), "max_tokens", "1 or more"),
    (dict(seed=-4), "seed", "whole number"),
    (dict(max_tokens=CONTEXT), "max_tokens", "context is 128 tokens"),
    (dict(prompt="word " * 200), "prompt", "context is 128 tokens"),
    (dict(n=10**9), "n", "more than the"),
    (dict(extra_body={"stop": 3}), "stop", "expected a string or a list"),
    (dict(extra_body={"prompt": [1, 2]}), "prompt", "expected a string"),
])
def test_bad_requests_are_refused_in_one_line_and_the_server_goes_on(client, kwargs, param, needle):
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(**{"model": "tiny", "prompt": PROMPT, "max_tokens": 5, **kwargs})
    error = caught.value.body
    assert caught.value.status_code == 400 and error["param"] == param and needle in error["message"], error
    assert "\n" not in error["message"] and set(error) == {"message", "type", "param", "code"}
    assert client.completions.create(model="tiny", prompt=PROMPT, max_tokens=3, seed=0).choices[0].finish_reason


def test_malformed_bodies_and_unknown_paths(url, client):
    status, body = raw(url, "POST", "/v1/completions", b"{not json", {"Content-Type": "application/json"})
    assert status == 400 and "not JSON" in body["error"]["message"]
    status, body = raw(url, "POST", "/v1/chat/completions", json.dumps({"messages": [{"role": "robot"}]}).encode())
    assert status == 400 and body["error"]["param"] == "messages[0]"
    status, body = raw(url, "POST", "/v1/chat/completions", b"[]")
    assert status == 400 and "JSON object" in body["error"]["message"]
    status, body = raw(url, "GET", "/v1/nothing")
    assert status == 404 and body["error"]["code"] == "not_found"
    assert [m.id for m in client.models.list()] == ["tiny"]


def test_api_key(sampler):
    with running(sampler, api_key=KEY) as url:
        with openai.OpenAI(base_url=url + "/v1", api_key="wrong", max_retries=0) as client:
            with pytest.raises(openai.AuthenticationError) as caught:
                client.models.list()
            assert caught.value.status_code == 401 and caught.value.body["code"] == "invalid_api_key"
        status, body = raw(url, "POST", "/v1/completions", b"{}")  # no header at all
        assert status == 401
        with openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0) as client:
            assert client.completions.create(model="tiny", prompt=PROMPT, max_tokens=3).choices[0].text is not None
        connection = http.client.HTTPConnection("127.0.0.1", int(url.rsplit(":", 1)[1]), timeout=30)
        connection.request("GET", "/")  # the page itself is public; it asks for the key
        response = connection.getresponse()
        assert response.status == 200 and b"/v1/chat/completions" in response.read()


# -- the command -----------------------------------------------------------------------------------


def test_the_command_serves_until_stopped(checkpoint, tmp_path):
    env = {**os.environ, "GPTKIT_API_KEY": KEY}
    process = subprocess.Popen([sys.executable, "-m", "gptkit.serve", "--checkpoint", str(checkpoint), "--port", "0",
                                "--device", "cpu", "--name", "demo"], stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = process.stderr.readline()
        assert line.startswith("serving demo at http://127.0.0.1:"), line
        url = line.split(" at ")[1].split("/ ")[0]
        with openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0) as client:
            assert [m.id for m in client.models.list()] == ["demo"]
            assert client.chat.completions.create(model="demo", messages=[{"role": "user", "content": "hi"}],
                                                  max_tokens=4).choices[0].message is not None
    finally:
        process.terminate()
        process.wait(timeout=30)
        process.stderr.close()


def test_the_command_refuses_bad_input_in_one_line(tmp_path, url):
    from click.testing import CliRunner

    from gptkit.serve.cli import cli

    res = CliRunner().invoke(cli, ["--checkpoint", str(tmp_path / "none"), "--port", "0"])
    assert_input_error(res, "none")
    busy = url.rsplit(":", 1)[1]
    res = CliRunner().invoke(cli, ["--checkpoint", str(tmp_path / "none"), "--port", busy])
    assert_input_error(res, f"--port {busy}", "cannot listen")
    assert_input_error(CliRunner().invoke(cli, ["--checkpoint", "x", "--api-key", " "]), "--api-key")
