"""A client's mistake is a 4xx, never a 500: every field of /v1/completions and
/v1/chat/completions tried with JSON values of every kind (null, booleans, numbers small, huge and
negative, strings, lone surrogates, lists, objects). What each field accepts is written here, apart
from the server's code; a value it accepts is answered, any other is a 400 in OpenAI's error shape
naming the field, and the server goes on answering."""

import copy
import json
import socket

import pytest

from gptkit.sample.sampling import Sampler
from tests.serving import CONTEXT, raw, running, send, tiny_checkpoint

# JSON values of every kind, tried in every field.
VALUES = [
    None,
    True,
    False,
    0,
    1,
    2,
    3,
    -1,
    0.5,
    1.5,
    2.5,
    10**30,
    -(10**30),
    1e300,
    "5",
    "",
    "NaN",
    "Infinity",
    "ok",
    "a\ud800b",
    "\udfff",
    [],
    [1],
    ["x"],
    ["a\ud800"],
    ["a", "b", "c", "d", "e"],
    [[[[]]]],
    {},
    {"a": 1},
    {"include_usage": True},
    {"include_usage": "yes"},
    {"type": "text", "text": "hi"},
    [{"type": "text", "text": "hi"}],
    [{"type": "image_url"}],
]


def number(value):
    return type(value) in (int, float)  # a bool is none


def whole(value):
    return type(value) is int


def text(value):
    """A string of Unicode that UTF-8 encodes (no lone surrogate)."""
    return isinstance(value, str) and not any("\ud800" <= c <= "\udfff" for c in value)


def part(value):
    return isinstance(value, dict) and value.get("type") == "text" and text(value.get("text"))


# What each field accepts (None: the field absent or null). A prompt of a few tokens leaves the
# context room for any max_tokens up to CONTEXT - 8; a tiny model has memory for a few samples.
COMMON = {
    "model": lambda v: v is None or text(v),
    "max_tokens": lambda v: v is None or whole(v) and 1 <= v <= CONTEXT - 8,
    "max_completion_tokens": lambda v: v is None or whole(v) and 1 <= v <= CONTEXT - 8,
    "n": lambda v: v is None or whole(v) and 1 <= v <= 3,
    "temperature": lambda v: v is None or number(v) and 0 <= v <= 2,
    "top_p": lambda v: v is None or number(v) and 0 < v <= 1,
    "top_k": lambda v: v is None or whole(v) and v >= 1,
    "seed": lambda v: v is None or whole(v) and 0 <= v < 2**63,
    "stop": lambda v: v is None or text(v) or isinstance(v, list) and len(v) <= 4 and all(map(text, v)),
    "stream": lambda v: v is None or isinstance(v, bool),
    "stream_options": lambda v: v is None or isinstance(v, dict) and isinstance(v.get("include_usage", False), bool),
}
COMPLETIONS = {**COMMON, "prompt": lambda v: v is None or text(v) or isinstance(v, list) and len(v) == 1 and text(v[0])}
CHAT = {
    **COMMON,
    "messages": lambda v: False,  # no value of VALUES is a list of {role, content} objects
    "messages[0].role": lambda v: v in ("system", "developer", "user", "assistant"),
    "messages[0].content": lambda v: text(v) or isinstance(v, list) and all(map(part, v)),
    "messages[0].content[0]": part,
    "messages[0].content[0].type": lambda v: v == "text",
    "messages[0].content[0].text": text,
    "continue_final_message": lambda v: v is None or v is False,  # true needs an assistant's message last
}
BASE = {
    "/v1/completions": {"model": "tiny", "prompt": "hi", "max_tokens": 2},
    "/v1/chat/completions": {
        "model": "tiny",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "max_tokens": 2,
    },
}


@pytest.fixture(scope="module")
def url(small_tokenizer, tmp_path_factory):
    sampler = Sampler(tiny_checkpoint(small_tokenizer[0], tmp_path_factory.mktemp("requests") / "ckpt"), device="cpu")
    with running(sampler) as url:
        yield url


def with_value(body, field, value):
    """A copy of `body` with `field` (a name, or a path into messages) set to `value`."""
    body = copy.deepcopy(body)
    if field == "messages[0].role":
        body["messages"][0]["role"] = value
    elif field == "messages[0].content":
        body["messages"][0]["content"] = value
    elif field == "messages[0].content[0]":
        body["messages"][0]["content"][0] = value
    elif field.startswith("messages[0].content[0]."):
        body["messages"][0]["content"][0][field.rsplit(".", 1)[1]] = value
    else:
        body[field] = value
    return body


def post(url, path, body: bytes, headers=None):
    status, _, data = send(url, "POST", path, body, {"Content-Type": "application/json", **(headers or {})})
    return status, data


def assert_refused(status, data, param=None, needle=""):
    """A 400 in OpenAI's shape, one line; `param` the field named (or one inside it)."""
    assert status == 400, (status, data)
    error = json.loads(data)["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error", error
    assert "\n" not in error["message"] and needle in error["message"], error
    if param is not None:
        assert error["param"] == param or error["param"].startswith((param + ".", param + "[")), error
    return error


def assert_serving(url):
    status, body = raw(url, "GET", "/health")
    assert status == 200 and body == {"status": "ok"}


@pytest.mark.parametrize("path, fields", [("/v1/completions", COMPLETIONS), ("/v1/chat/completions", CHAT)])
def test_every_field_takes_what_it_says_and_refuses_the_rest_in_a_400_naming_it(url, path, fields):
    tried = refused = 0
    for field, accepts in fields.items():
        for value in VALUES:
            status, data = post(url, path, json.dumps(with_value(BASE[path], field, value)).encode())
            tried += 1
            if accepts(value):
                assert status == 200, (field, value, data)
            else:
                refused += 1
                assert_refused(status, data, field)
            assert_serving(url)
    assert refused > tried / 2  # most values are wrong for most fields: the table tries what it says


@pytest.mark.parametrize(
    "path, body, param, needle",
    [
        ("/v1/completions", {"prompt": "hi", "top_k": "5"}, "top_k", "top_k '5': expected a whole number, 1 or more"),
        ("/v1/completions", {"prompt": "hi", "n": True}, "n", "n True: expected a whole number, 1 or more"),
        (
            "/v1/completions",
            {"prompt": "hi", "temperature": 2.5},
            "temperature",
            "expected a number from 0 (greedy) to 2",
        ),
        ("/v1/completions", {"prompt": "hi", "stop": list("abcde")}, "stop", "up to 4 strings"),
        ("/v1/completions", {"prompt": "a\ud800b"}, "prompt", "lone surrogate, '\\ud800', at character 1"),
        ("/v1/completions", {"prompt": "hi", "stop": "\ud800"}, "stop", "lone surrogate"),
        (
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "a\ud800b"}]},
            "messages[0].content",
            "lone surrogate",
        ),
        (
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 10**50},
            "max_tokens",
            "asks for 100000000000000000...0000000000000000000 more",
        ),  # a huge number shown cut
    ],
)
def test_the_400_says_what_the_field_accepts(url, path, body, param, needle):
    error = assert_refused(*post(url, path, json.dumps(body).encode()), param)
    assert needle in error["message"], error


# Both endpoints' fields: a completion ignores messages, a chat its prompt.
BOTH = b'"prompt": "hi", "messages": [{"role": "user", "content": "hi"}]'


@pytest.mark.parametrize(
    "body, param, needle",
    [
        (b"{" + BOTH + b', "temperature": NaN}', None, "NaN is not a JSON value"),
        (b"{" + BOTH + b', "top_p": -Infinity}', None, "-Infinity is not a JSON value"),
        (b"{" + BOTH + b', "n": 1e400}', "n", "n inf: expected a whole number"),  # Python reads 1e400 as infinity
        (b"{" + BOTH + b', "seed": ' + b"9" * 5000 + b"}", None, "not JSON: a number of 5,000 digits, more than 100"),
        (b"[" * 100_000, None, "nested too deeply"),
        (b'{"prompt": "\xff"}', None, "not JSON"),
        (b'"hi"', None, "expected a JSON object"),
    ],
)
def test_bodies_that_are_not_json_objects_are_400s(url, body, param, needle):
    for path in BASE:
        error = assert_refused(*post(url, path, body), needle=needle)
        assert error["param"] == param, error
        assert_serving(url)


def test_a_content_length_that_is_no_number_of_bytes_is_refused(url):
    host, port = url.removeprefix("http://").split(":")
    for length in ("²", "-1", "1e3"):
        with socket.create_connection((host, int(port)), timeout=30) as s:
            s.sendall(
                f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n{{}}".encode("latin-1")
            )
            assert s.recv(4096).startswith(b"HTTP/1.1 411 "), length
    assert_serving(url)
