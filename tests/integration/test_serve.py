"""`gptkit serve` against the official openai client: a real server on a free port of 127.0.0.1
(tests/serving.py), its texts compared with the sample library's for the same seed."""

import http.client
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gptkit.model.generate import prompt_ids
from gptkit.sample.sampling import Sampler, Settings
from gptkit.serve.api import render_chat
from gptkit.serve.server import INTERNAL_ERROR, Engine, default_name, make_server
from tests.conftest import assert_input_error
from tests.serving import CONTEXT, raw, running, send, tiny_checkpoint

openai = pytest.importorskip("openai")  # the reference client, a test extra

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


def test_a_model_by_its_id_and_the_health_check(client, url):
    model = client.models.retrieve("tiny")
    assert model.id == "tiny" and model.context_length == CONTEXT
    with pytest.raises(openai.NotFoundError) as caught:  # as OpenAI answers a model it does not have
        client.models.retrieve("gpt-4o")
    assert caught.value.body["code"] == "model_not_found" and caught.value.body["param"] == "model"
    assert "'gpt-4o' does not exist" in caught.value.body["message"]
    assert raw(url, "GET", "/health") == (200, {"status": "ok"})
    status, headers, data = send(url, "HEAD", "/health")  # as uptime monitors ask
    assert status == 200 and int(headers["Content-Length"]) > 0 and data == b""


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
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hello there"},
        {"role": "assistant", "content": "hi"},
        {"role": "user", "content": [{"type": "text", "text": "a cat?"}]},
    ]
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
    out = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "go"}], seed=2, stop=["\u0000"]
    )
    assert out.usage.total_tokens <= CONTEXT


def test_a_reply_continued_goes_on_from_its_text(client, sampler):
    """continue_final_message (vLLM's and transformers' name): the last message is the assistant's
    reply cut short, which the model goes on with instead of answering it."""
    messages = [{"role": "user", "content": "hello there"}, {"role": "assistant", "content": "the cat"}]
    settings = dict(model="tiny", messages=messages, max_tokens=12, seed=4, extra_body={"continue_final_message": True})
    out = client.chat.completions.create(**settings)
    prompt, stops = render_chat(messages, continue_final=True)
    assert prompt == "User: hello there\nAssistant: the cat"
    [text] = alone(sampler, prompt, max_new_tokens=12, seed=4, stops=stops)
    assert out.choices[0].message.content == text  # as it comes: its leading space, where it has one, is the text's
    assert (
        "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(**settings, stream=True))
        == text
    )
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(**{**settings, "messages": messages[:1]})
    assert caught.value.body["param"] == "continue_final_message" and "the last message is the user's" in str(
        caught.value
    )


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
    assert ["".join(c.choices[0].text for c in chunks if c.choices[0].index == i) for i in range(3)] == [
        c.text for c in out.choices
    ]


def test_concurrent_clients_each_get_their_own_text(url):
    """Six requests at once, streamed and whole, completions and chat: each text is the one the
    same request gets alone."""
    requests = [
        ("completions", dict(prompt=p, max_tokens=25, seed=s)) for p, s in ((PROMPT, 1), ("a dog", 2), (PROMPT, 3))
    ]
    requests += [
        ("chat", dict(messages=[{"role": "user", "content": p}], max_tokens=25, seed=s))
        for p, s in (("hi", 4), ("the sun", 5), ("hi", 6))
    ]

    def ask(kind, kwargs, stream):
        with openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120) as client:
            if kind == "chat":
                out = client.chat.completions.create(model="tiny", stream=stream, **kwargs)
                return (
                    "".join(c.choices[0].delta.content or "" for c in out) if stream else out.choices[0].message.content
                )
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


@pytest.mark.parametrize(
    "kwargs, param, needle",
    [
        (dict(temperature=-1), "temperature", "expected a number from 0 (greedy) to 2"),
        (dict(temperature=2.01), "temperature", "expected a number from 0 (greedy) to 2"),
        (dict(top_p=0), "top_p", "above 0, at most 1"),
        (dict(n=0), "n", "1 or more"),
        (dict(max_tokens=0), "max_tokens", "1 or more"),
        (dict(seed=-4), "seed", "whole number"),
        (dict(max_tokens=CONTEXT), "max_tokens", "context is 128 tokens"),
        (dict(prompt="word " * 200), "prompt", "context is 128 tokens"),
        (dict(n=10**9), "n", "more samples than this server decodes at once (8)"),
        (dict(extra_body={"stop": 3}), "stop", "expected a string or a list of up to 4 strings"),
        (dict(stop=["a", "b", "c", "d", "e"]), "stop", "up to 4"),
        (dict(extra_body={"top_k": "5"}), "top_k", "top_k '5': expected a whole number, 1 or more"),
        (dict(extra_body={"prompt": [1, 2]}), "prompt", "expected a string"),
    ],
)
def test_bad_requests_are_refused_in_one_line_and_the_server_goes_on(client, kwargs, param, needle):
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(**{"model": "tiny", "prompt": PROMPT, "max_tokens": 5, **kwargs})
    error = caught.value.body
    assert caught.value.status_code == 400 and error["param"] == param and needle in error["message"], error
    assert "\n" not in error["message"] and set(error) == {"message", "type", "param", "code"}
    assert client.completions.create(model="tiny", prompt=PROMPT, max_tokens=3, seed=0).choices[0].finish_reason


def test_a_prompt_too_long_for_the_context_says_what_to_shorten(client, sampler):
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "word " * 200}])
    error = caught.value.body
    assert error["code"] == "context_length_exceeded" and error["param"] == "messages", error
    assert re.fullmatch(
        r"this model's context is 128 tokens: the messages have \d+ tokens, no room for a reply; "
        r"shorten the messages or start a new chat",
        error["message"],
    ), error
    length = len(prompt_ids(sampler.tokenizer, PROMPT, sampler.bos_id))
    for field in ("max_tokens", "max_completion_tokens"):
        with pytest.raises(openai.BadRequestError) as caught:
            client.completions.create(model="tiny", prompt=PROMPT, extra_body={field: CONTEXT - 3})
        assert caught.value.body["param"] == field and caught.value.body["message"] == (
            f"this model's context is 128 tokens: the prompt has {length} tokens and {field} asks for {CONTEXT - 3} "
            f"more; ask for at most {CONTEXT - length} or shorten the prompt"
        )


class Broken:
    """A Sampler that fails as a bug of ours would, with a path of this machine in its error:
    before any text (`at="start"`), or after the stream's first piece (`at="stream"`)."""

    def __init__(self, sampler, at):
        self._sampler, self._at = sampler, at

    def __getattr__(self, name):
        return getattr(self._sampler, name)

    def sample_ids(self, ids, settings, steps=None):
        if self._at == "start":
            raise FileNotFoundError(2, "No such file or directory", "/home/secret/weights.bin")
        samples = self._sampler.sample_ids(ids, settings, steps)

        class Failing:
            tokens, finish_reasons, close = samples.tokens, samples.finish_reasons, samples.close

            def __iter__(self):
                yield next(iter(samples))
                raise FileNotFoundError(2, "No such file or directory", "/home/secret/weights.bin")

        return Failing()


def test_a_fault_of_the_server_is_a_500_naming_no_path_and_the_log_has_it(sampler, caplog):
    body = json.dumps({"prompt": PROMPT, "max_tokens": 5, "stream": True}).encode()
    with running(Broken(sampler, "start")) as url:
        status, _, data = send(url, "POST", "/v1/completions", body)
        assert status == 500 and json.loads(data)["error"] == {
            "message": INTERNAL_ERROR,
            "type": "server_error",
            "param": None,
            "code": None,
        }
    with running(Broken(sampler, "stream")) as url:
        status, _, data = send(url, "POST", "/v1/completions", body)
        events = [json.loads(line[6:]) for line in data.decode().splitlines() if line.startswith("data: {")]
        assert status == 200 and events[0]["choices"][0]["text"] and events[-1]["error"]["message"] == INTERNAL_ERROR
    assert "/home/secret" not in INTERNAL_ERROR and caplog.text.count("/home/secret/weights.bin") == 2


def test_cors_is_off_unless_asked_and_then_answers_the_origins_given(sampler, url):
    origin, key = "http://app.example:3000", {"Authorization": f"Bearer {KEY}"}
    preflight = {
        "Origin": origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type",
    }
    status, headers, _ = send(url, "OPTIONS", "/v1/chat/completions", headers=preflight)
    assert status == 204 and "Access-Control-Allow-Origin" not in headers
    body = json.dumps({"prompt": PROMPT, "max_tokens": 2}).encode()
    with running(sampler, api_key=KEY, cors_origins=[origin]) as cors:
        status, headers, _ = send(cors, "OPTIONS", "/v1/chat/completions", headers=preflight)  # no key: none is sent
        assert status == 204 and headers["Access-Control-Allow-Origin"] == origin
        assert (
            "Authorization" in headers["Access-Control-Allow-Headers"]
            and "POST" in headers["Access-Control-Allow-Methods"]
        )
        for stream in (False, True):
            status, headers, _ = send(
                cors,
                "POST",
                "/v1/completions",
                json.dumps({"prompt": PROMPT, "max_tokens": 2, "stream": stream}).encode(),
                {"Origin": origin, **key},
            )
            assert status == 200 and headers["Access-Control-Allow-Origin"] == origin and headers["Vary"] == "Origin"
        status, headers, _ = send(cors, "GET", "/v1/models", headers={"Origin": origin})
        assert status == 401 and headers["Access-Control-Allow-Origin"] == origin  # the page can read why
        status, headers, _ = send(cors, "POST", "/v1/completions", body, {"Origin": "http://other.example", **key})
        assert status == 200 and "Access-Control-Allow-Origin" not in headers
    with running(sampler, cors_origins=["*"]) as anyone:
        status, headers, _ = send(anyone, "POST", "/v1/completions", body, {"Origin": "http://other.example"})
        assert status == 200 and headers["Access-Control-Allow-Origin"] == "*"


def test_malformed_bodies_and_unknown_paths(url, client):
    status, body = raw(url, "POST", "/v1/completions", b"{not json", {"Content-Type": "application/json"})
    assert status == 400 and "not JSON" in body["error"]["message"]
    status, body = raw(url, "POST", "/v1/chat/completions", json.dumps({"messages": [{"role": "robot"}]}).encode())
    assert status == 400 and body["error"]["param"] == "messages[0].role"
    status, body = raw(url, "POST", "/v1/chat/completions", b"[]")
    assert status == 400 and "JSON object" in body["error"]["message"]
    status, body = raw(url, "GET", "/v1/nothing")
    assert status == 404 and body["error"]["code"] == "not_found"
    status, headers, data = send(url, "GET", "/v1/completions")
    assert status == 405 and headers["Allow"] == "POST" and json.loads(data)["error"]["code"] == "method_not_allowed"
    assert [m.id for m in client.models.list()] == ["tiny"]


def test_api_key(sampler):
    with running(sampler, api_key=KEY) as url:
        with openai.OpenAI(base_url=url + "/v1", api_key="wrong", max_retries=0) as client:
            with pytest.raises(openai.AuthenticationError) as caught:
                client.models.list()
            assert caught.value.status_code == 401 and caught.value.body["code"] == "invalid_api_key"
        assert raw(url, "POST", "/v1/completions", b"{}")[0] == 401  # no header at all
        assert raw(url, "GET", "/health") == (200, {"status": "ok"})  # a health check needs no key
        with openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0) as client:
            assert client.completions.create(model="tiny", prompt=PROMPT, max_tokens=3).choices[0].text is not None
        connection = http.client.HTTPConnection("127.0.0.1", int(url.rsplit(":", 1)[1]), timeout=30)
        connection.request("GET", "/")  # the page itself is public; it asks for the key
        response = connection.getresponse()
        assert response.status == 200 and b"/v1/chat/completions" in response.read()


# -- the command -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def long_checkpoint(small_tokenizer, tmp_path_factory):
    """A model with room for a stream longer than the sockets between a server and its client hold."""
    return tiny_checkpoint(small_tokenizer[0], tmp_path_factory.mktemp("serve") / "long", context=512)


def stalled_stream(port, body, headers):
    """A stream request whose client reads its first event and then nothing: with a small receive
    buffer the server's writes soon wait for it, so the request stays in flight until it reads on.
    (the response, its first line)"""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window it offers
    sock.settimeout(60)
    sock.connect(("127.0.0.1", port))
    connection = http.client.HTTPConnection("127.0.0.1", port)
    connection.sock = sock
    connection.request("POST", "/v1/completions", json.dumps(body).encode(), headers)
    response = connection.getresponse()
    assert response.status == 200
    return response, response.readline()


@pytest.mark.parametrize(
    ("signals", "timeout", "reason"),
    [
        (["SIGINT"], 60, "length"),  # Ctrl-C: the stream finishes within the grace period
        (["SIGTERM"], 0, "abort"),  # no grace: it ends at once
        (["SIGTERM", "SIGINT"], 60, "abort"),  # a second signal ends it
    ],
)
def test_the_command_serves_until_a_signal_then_drains_and_exits_0(long_checkpoint, signals, timeout, reason):
    """Streams in flight end with a final chunk per choice and [DONE], new requests meanwhile get a 503,
    and the command exits 0 (Ctrl-C was SIGABRT, 'terminate called without an active exception'; SIGTERM
    cut streams short)."""
    env = {**os.environ, "GPTKIT_API_KEY": KEY}
    command = [sys.executable, "-m", "gptkit.serve", "--checkpoint", str(long_checkpoint), "--port", "0"]
    process = subprocess.Popen(
        [*command, "--device", "cpu", "--name", "demo", "--max-batch", "4", "--shutdown-timeout", str(timeout)],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = process.stderr.readline()
        assert line.startswith("serving demo at http://127.0.0.1:"), line
        url = line.split(" at ")[1].split("/ ")[0]
        key = {"Authorization": f"Bearer {KEY}"}
        with openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0) as client:
            assert [m.id for m in client.models.list()] == ["demo"]
            chat = client.chat.completions.create(
                model="demo", messages=[{"role": "user", "content": "hi"}], max_tokens=4
            )
            assert chat.choices[0].message is not None
            # 4 greedy choices of 400 tokens: some 300 kB of events, more than the sockets hold (~110 kB)
            body = {"prompt": PROMPT, "max_tokens": 400, "n": 4, "temperature": 0, "stream": True}
            stream, first = stalled_stream(int(url.rsplit(":", 1)[1]), body, key)
            process.send_signal(getattr(signal, signals[0]))
            said = process.stderr.readline()  # a request just answered may still count: "the 2 requests"
            assert re.match(f"stopping on {signals[0]}: new requests get a 503, the [12] requests? in flight ", said), (
                said
            )
            if timeout:
                with pytest.raises(openai.InternalServerError) as caught:
                    client.completions.create(model="demo", prompt=PROMPT, max_tokens=2)
                assert caught.value.status_code == 503 and caught.value.body["code"] == "server_shutting_down"
                status, headers, data = send(url, "GET", "/health")
                assert status == 503 and headers["Connection"] == "close"
                assert json.loads(data)["error"]["message"] == "the server is shutting down and takes no new requests"
            for name in signals[1:]:
                process.send_signal(getattr(signal, name))
            data = first + stream.read()
        events = [json.loads(line[6:]) for line in data.split(b"\n") if line.startswith(b"data: {")]
        assert data.rstrip().endswith(b"\n\ndata: [DONE]")  # after the last chunk, as a stream ends
        finals = [choice for event in events for choice in event["choices"] if choice["finish_reason"] is not None]
        assert sorted(c["index"] for c in finals) == [0, 1, 2, 3] and {c["finish_reason"] for c in finals} == {reason}
        assert all(choice["finish_reason"] is None for event in events[:-4] for choice in event["choices"])
        assert process.wait(timeout=60) == 0
        rest = process.stderr.read()
        assert "Traceback" not in rest and "terminate" not in rest, rest
        ended = re.search(r"stopping: ended the \d+ requests? still in flight \(finish_reason abort\)", rest)
        assert bool(ended) == (reason == "abort" and timeout > 0), rest
    finally:
        process.kill()
        process.wait()
        process.stderr.close()


def test_the_command_warns_where_it_listens_beyond_this_machine_without_a_key(checkpoint):
    env = {k: v for k, v in os.environ.items() if k != "GPTKIT_API_KEY"}
    started = {
        host: subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gptkit.serve",
                "--checkpoint",
                str(checkpoint),
                "--port",
                "0",
                "--device",
                "cpu",
                "--host",
                host,
            ],
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for host in ("0.0.0.0", "localhost")
    }
    try:
        warning, line = started["0.0.0.0"].stderr.readline(), started["0.0.0.0"].stderr.readline()
        assert warning.startswith(
            "warning: --host 0.0.0.0 listens beyond this machine without --api-key: anyone who can reach port "
        ), warning
        assert line.startswith("serving ckpt at http://0.0.0.0:"), line
        line = started["localhost"].stderr.readline()  # a name of this machine: no warning before it
        assert line.startswith("serving ckpt at http://localhost:"), line
    finally:
        for process in started.values():
            process.terminate()
            process.wait(timeout=30)
            process.stderr.close()


def test_the_default_name_is_the_training_runs(checkpoint, tmp_path):
    run = tmp_path / "runs" / "demo"
    step = run / "checkpoints" / "step-000300_tokens-614400"
    shutil.copytree(checkpoint, step)
    (run / "latest").symlink_to(Path("checkpoints") / step.name)
    assert [default_name(given) for given in (run, run / "latest", step)] == ["demo"] * 3
    assert default_name(checkpoint) == "ckpt"  # not a run's: the directory's own name


def test_an_ipv6_address(sampler):
    try:
        server = make_server("::1", 0, engine=Engine(sampler, "tiny"))
    except OSError:
        pytest.skip("this machine has no IPv6 loopback")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        connection = http.client.HTTPConnection("::1", server.server_port, timeout=30)
        connection.request("GET", "/health")
        assert connection.getresponse().status == 200
        connection.close()
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_the_command_refuses_bad_input_in_one_line(tmp_path, url, checkpoint):
    from click.testing import CliRunner

    from gptkit.serve.cli import cli

    res = CliRunner().invoke(cli, ["--checkpoint", str(tmp_path / "none"), "--port", "0"])
    assert_input_error(res, "none")
    busy = url.rsplit(":", 1)[1]
    res = CliRunner().invoke(cli, ["--checkpoint", str(tmp_path / "none"), "--port", busy])
    assert_input_error(res, f"--port {busy}", "cannot listen")
    assert_input_error(CliRunner().invoke(cli, ["--checkpoint", "x", "--api-key", " "]), "--api-key")
    assert_input_error(
        CliRunner().invoke(cli, ["--checkpoint", "x", "--cors-origin", "https://app.example/chat"]),
        "--cors-origin https://app.example/chat: expected * or an origin",
    )
    res = CliRunner().invoke(cli, ["--checkpoint", str(checkpoint), "--port", "0", "--max-batch", str(10**12)])
    assert_input_error(res, "--max-batch", "rows of the whole context", "serve fewer at once")
