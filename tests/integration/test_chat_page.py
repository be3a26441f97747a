"""The chat page at / in a real browser: headless Chromium from Debian's packages, driven with
selenium. Without a browser the test skips on a developer's machine and fails in CI (CI=true).

What the page sends is read where the server reads it (tests/serving.py, running's `bodies`)."""

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from gptkit.sample.sampling import Sampler
from tests.serving import running, tiny_checkpoint

openai = pytest.importorskip("openai")  # the reference client, a test extra

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=900,700",
)
SEED = 4
KEY = "sesame"


def needs(what):
    """Skip without `what` on a developer's machine; fail in CI, which installs it (.ci/run)."""
    reason = f"{what} is missing (apt-get install -y chromium chromium-driver; pip install selenium)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        needs("selenium")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not (chromium and driver):
        needs("chromium or chromedriver")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    with tempfile.TemporaryDirectory() as profile:
        for flag in (*FLAGS, f"--user-data-dir={profile}"):
            options.add_argument(flag)
        chrome = webdriver.Chrome(options=options, service=Service(executable_path=driver))
        try:
            yield chrome
        finally:
            chrome.quit()


class Slow:
    """A Sampler whose pieces come 20 ms apart, the first once `gate` is set: the reply visibly
    grows on the page, and the page can be seen waiting for it."""

    def __init__(self, sampler, gate=None):
        self._sampler, self._gate = sampler, gate

    def __getattr__(self, name):
        return getattr(self._sampler, name)

    def sample_ids(self, ids, settings, steps=None):
        return _SlowSamples(self._sampler.sample_ids(ids, settings, steps), self._gate)


class _SlowSamples:
    def __init__(self, samples, gate):
        self._samples, self._gate = samples, gate

    def __getattr__(self, name):
        return getattr(self._samples, name)

    def __iter__(self):
        if self._gate is not None:
            self._gate.wait(timeout=60)
        for item in self._samples:
            time.sleep(0.02)
            yield item


@pytest.fixture(scope="module")
def checkpoint(small_tokenizer, tmp_path_factory):
    return tiny_checkpoint(small_tokenizer[0], tmp_path_factory.mktemp("page") / "ckpt")


@pytest.fixture(scope="module")
def sampler(checkpoint):
    return Sampler(checkpoint, device="cpu")


@pytest.fixture(scope="module")
def server(sampler):
    """(url, the request bodies it read) of a server of slow pieces."""
    bodies = []
    with running(Slow(sampler), bodies=bodies) as url:
        yield url, bodies


@pytest.fixture
def page(browser, server):
    """The page, freshly loaded, and the bodies the server reads from now on."""
    from selenium.webdriver.common.by import By

    url, bodies = server
    browser.get(url + "/")
    wait(lambda: browser.find_element(By.ID, "model").text == "tiny")
    bodies.clear()
    return browser, url, bodies


def wait(condition, timeout=60):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, "the page did not get there"
        time.sleep(0.05)
    return value


def fill(browser, **fields):
    """Set the page's fields: a value, or "" to clear one."""
    from selenium.webdriver.common.by import By

    for field, value in fields.items():
        browser.find_element(By.ID, field).clear()
        browser.find_element(By.ID, field).send_keys(str(value))


def say(browser, text):
    """Send `text` and wait for the turn to end (its reply or an error)."""
    from selenium.webdriver.common.by import By

    ended = len(browser.find_elements(By.CSS_SELECTOR, ".msg.done"))
    browser.find_element(By.ID, "input").send_keys(text + "\n")
    wait(
        lambda: (
            len(browser.find_elements(By.CSS_SELECTOR, ".msg.done")) > ended
            and browser.find_element(By.ID, "send").is_enabled()
        )
    )


def texts(browser, selector):
    from selenium.webdriver.common.by import By

    return [e.get_attribute("textContent") for e in browser.find_elements(By.CSS_SELECTOR, selector)]


def reply(url, messages, **settings):
    """The server's reply to `messages`, whole: what the page must show."""
    with openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0) as client:
        return client.chat.completions.create(model="tiny", messages=messages, **settings).choices[0]


def test_a_message_gets_a_streamed_reply(page):
    from selenium.webdriver.common.by import By

    browser, url, bodies = page
    fill(browser, temperature=0.8, top_p=0.9, max_tokens=60, seed=SEED)
    # Every text the reply shows, recorded as it changes: a streamed reply shows several.
    browser.execute_script("""
        window.seen = [];
        new MutationObserver(() => {
          const reply = document.querySelector('.msg.assistant .text');
          if (reply && reply.textContent !== window.seen[window.seen.length - 1]) window.seen.push(reply.textContent);
        }).observe(document.getElementById('log'), {subtree: true, childList: true, characterData: true});
    """)
    say(browser, "hello there")
    assert bodies == [
        (
            "/v1/chat/completions",
            {
                "messages": [{"role": "user", "content": "hello there"}],
                "stream": True,
                "temperature": 0.8,
                "top_p": 0.9,
                "max_tokens": 60,
                "seed": SEED,
            },
        )
    ]
    assert texts(browser, ".msg.user .text") == ["hello there"]
    [shown] = texts(browser, ".msg.assistant .text")
    expected = reply(
        url, [{"role": "user", "content": "hello there"}], temperature=0.8, top_p=0.9, max_tokens=60, seed=SEED
    )
    assert shown == expected.message.content and len(shown) > 10
    seen = browser.execute_script("return window.seen")
    assert len(seen) > 3 and all(shown.startswith(text) for text in seen) and seen[-1] == shown

    browser.find_element(By.ID, "new").click()  # a new chat: nothing shown, nothing sent of the old one
    assert browser.find_elements(By.CSS_SELECTOR, ".msg") == []
    say(browser, "hello there")
    assert texts(browser, ".msg.assistant .text") == [shown]


def test_a_field_left_empty_is_not_sent_so_the_server_default_applies(page):
    browser, _, bodies = page
    fill(browser, temperature="", top_p="", max_tokens="", seed="")
    say(browser, "hi")
    assert bodies == [("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "stream": True})]


def test_a_reply_cut_by_max_tokens_says_so_and_continues(page):
    from selenium.webdriver.common.by import By

    browser, url, bodies = page
    fill(browser, max_tokens=5, seed=SEED)
    say(browser, "hello there")
    [cut] = browser.find_elements(By.CSS_SELECTOR, ".msg.assistant.cut")
    assert "cut at max tokens" in cut.find_element(By.CSS_SELECTOR, ".cut-mark").text
    settings = dict(temperature=0.8, top_p=0.9, max_tokens=5, seed=SEED)
    first = reply(url, [{"role": "user", "content": "hello there"}], **settings)
    assert first.finish_reason == "length" and texts(browser, ".msg.assistant .text") == [first.message.content]

    bodies.clear()
    cut.find_element(By.CSS_SELECTOR, "button.continue").click()
    wait(lambda: bodies and browser.find_element(By.ID, "send").is_enabled())
    sent = [{"role": "user", "content": "hello there"}, {"role": "assistant", "content": first.message.content}]
    assert bodies == [
        ("/v1/chat/completions", {"messages": sent, "continue_final_message": True, "stream": True, **settings})
    ]
    more = reply(url, sent, extra_body={"continue_final_message": True}, **settings)
    whole = first.message.content + more.message.content
    assert texts(browser, ".msg.assistant .text") == [whole]  # the same bubble, grown
    assert bool(browser.find_elements(By.CSS_SELECTOR, ".msg.assistant.cut")) == (more.finish_reason == "length")

    bodies.clear()
    say(browser, "and then?")  # the conversation goes on with the whole reply, which can no longer be continued
    assert bodies[0][1]["messages"][:2] == [sent[0], {"role": "assistant", "content": whole}]
    assert not browser.find_elements(By.CSS_SELECTOR, ".msg.assistant")[0].find_elements(By.CSS_SELECTOR, ".cut-mark")


def test_a_long_chat_leaves_out_its_oldest_turns_and_says_so(page):
    """The context is 128 tokens: a few turns of long messages fill it. The page leaves out the
    oldest turns, keeps the system message, and sends again; the chat goes on."""
    from selenium.webdriver.common.by import By

    browser, _, bodies = page
    fill(browser, system="Be brief.", max_tokens=20, seed=SEED)
    turns = [f"turn {k}: " + " ".join(["the little cat sat on the big red ball"] * 3) for k in range(5)]
    for text in turns:
        say(browser, text)
    assert browser.find_elements(By.CSS_SELECTOR, ".msg.error") == [] and len(texts(browser, ".msg.assistant")) == 5
    assert browser.find_element(By.ID, "note").text == (
        "Earlier turns are left out: the model's context is 128 tokens and has no room for them."
    )
    system = {"role": "system", "content": "Be brief."}
    sent = [body["messages"] for _, body in bodies]
    retries = [(refused, answered) for refused, answered in zip(sent, sent[1:]) if refused[-1] == answered[-1]]
    assert retries  # the server refused a conversation too long for its context
    for refused, answered in retries:  # then it got the same less its oldest turn, a user's message and its reply
        assert refused[0] == answered[0] == system and answered[1:] == refused[3:]
    assert (
        sent[-1][-1] == {"role": "user", "content": turns[-1]} and {"role": "user", "content": turns[0]} not in sent[-1]
    )
    left_out = texts(browser, ".msg.left-out .text")
    assert left_out[0] == turns[0] and len(left_out) == 2 * len(retries)


def test_the_page_shows_it_is_waiting_for_the_first_piece(browser, sampler):
    from selenium.webdriver.common.by import By

    gate = threading.Event()
    with running(Slow(sampler, gate)) as url:
        try:
            browser.get(url + "/")
            browser.find_element(By.ID, "input").send_keys("hi\n")
            typing = wait(lambda: browser.find_elements(By.CSS_SELECTOR, ".msg.assistant .typing"))
            assert typing[0].is_displayed() and texts(browser, ".msg.assistant .text") == [""]
        finally:
            gate.set()  # the first piece goes out
        wait(lambda: browser.find_elements(By.CSS_SELECTOR, ".msg.done"))
        assert browser.find_elements(By.CSS_SELECTOR, ".typing") == [] and texts(browser, ".msg.assistant .text")[0]


def test_with_a_key_the_page_names_the_model_and_a_stopped_server_is_an_error_not_a_reply(browser, checkpoint):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    process = subprocess.Popen(
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
            "--name",
            "keyed",
        ],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "GPTKIT_API_KEY": KEY},
    )
    try:
        url = process.stderr.readline().split(" at ")[1].split("/ ")[0]
        browser.get(url + "/")
        key = wait(lambda: [e for e in browser.find_elements(By.ID, "key") if e.is_displayed()])[0]
        assert browser.find_element(By.ID, "model").text == "gptkit"  # /v1/models answered 401
        key.send_keys(KEY + Keys.TAB)
        wait(lambda: browser.find_element(By.ID, "model").text == "keyed")
    finally:
        process.terminate()
        process.wait(timeout=30)
        process.stderr.close()
    say(browser, "anyone there?")
    [error] = browser.find_elements(By.CSS_SELECTOR, ".msg.error")
    assert error.find_element(By.CSS_SELECTOR, ".who").text == "error"
    assert error.find_element(By.CSS_SELECTOR, ".text").text == (
        f"cannot reach the server at {url}: is gptkit serve running?"
    )
    assert browser.find_elements(By.CSS_SELECTOR, ".msg.assistant") == []


def test_a_page_of_another_origin_calls_the_api_where_cors_allows_it(browser, sampler, server):
    page_url, _ = server  # the page's origin: another port is another origin
    fetch = """
        const [url, done] = [arguments[0], arguments[arguments.length - 1]];
        fetch(url + "/v1/models", {headers: {Authorization: "Bearer sesame"}})
          .then((r) => r.json()).then((data) => done(data.data[0].id), (e) => done("refused: " + e.name));
    """
    with running(sampler, api_key=KEY, cors_origins=[page_url]) as allowed, running(sampler, api_key=KEY) as closed:
        assert browser.get(page_url + "/") is None
        assert browser.execute_async_script(fetch, allowed) == "tiny"
        assert browser.execute_async_script(fetch, closed) == "refused: TypeError"
