"""`gptkit serve --cors-origin`: an origin as a browser sends it in its Origin header, or refused in
one line naming the flag (serve/cli.py, origin_of)."""

import pytest
from click.testing import CliRunner

from gptkit.serve.cli import cli, origin_of
from gptkit.shared.errors import InputError
from tests.conftest import assert_input_error


@pytest.mark.parametrize(
    ("given", "sent"),
    [
        ("*", "*"),
        ("https://app.example", "https://app.example"),
        ("HTTPS://App.Example:8080/", "https://app.example:8080"),  # lower case, no trailing /
        ("https://app.example:443", "https://app.example"),  # a scheme's default port is left out
        ("http://app.example:80", "http://app.example"),
        ("http://app.example:443", "http://app.example:443"),  # https's port, not http's
        ("http://localhost:08080", "http://localhost:8080"),
        ("http://127.0.0.1:3000", "http://127.0.0.1:3000"),
        ("http://[0:0::1]:3000", "http://[::1]:3000"),  # an IPv6 address as browsers write it
        ("https://xn--bcher-kva.example", "https://xn--bcher-kva.example"),
        ("https://my_app.example:65535", "https://my_app.example:65535"),
    ],
)
def test_an_origin_is_taken_as_browsers_send_it(given, sent):
    assert origin_of(given) == sent


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ("https://app.example:99999", "port 99999, expected 1 to 65535"),
        ("https://app.example:0", "port 0, expected 1 to 65535"),
        ("https://app.example:" + "9" * 5000, "expected 1 to 65535"),  # past the digits int() reads
        ("https://*.example.com", "a * in the host matches no page"),
        ("https://app*.example.com:8080", "a * in the host matches no page"),
        ("http://*", "a * in the host matches no page"),
        ("https://app.example/chat", "expected * or an origin, http(s)://host[:port] (no path)"),
        ("https://app.example?x=1", "(no path)"),
        ("https://app.example#top", "(no path)"),
        ("https://app.example:", "(no path)"),
        ("ftp://app.example", "(no path)"),
        ("app.example", "(no path)"),
        ("http://[::1", "(no path)"),
        ("https://user@app.example", "user@app.example is no host name or IP address"),
        ("https://a..b", "a..b is no host name or IP address"),
        ("https://999.1.1.1", "999.1.1.1 is no host name or IP address"),
        ("https://bücher.example", "its xn-- form"),
    ],
)
def test_an_origin_no_browser_sends_is_refused_naming_the_flag(given, problem):
    with pytest.raises(InputError) as caught:
        origin_of(given)
    assert str(caught.value).startswith(f"--cors-origin {given}: ") and problem in str(caught.value)


def test_the_command_refuses_it_in_one_line_with_status_2():
    for given, problem in [("https://app.example:99999", "port 99999"), ("https://*.example.com", "a * in the host")]:
        res = CliRunner().invoke(
            cli, ["--checkpoint", "x", "--cors-origin", "https://ok.example", "--cors-origin", given]
        )
        assert_input_error(res, f"--cors-origin {given}", problem)
