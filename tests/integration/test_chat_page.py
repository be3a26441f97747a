"""The chat page at / in a real browser: headless Chromium from Debian's packages, driven with
selenium. Without a browser the test skips on a developer's machine and fails in CI (CI=true)."""
import os
import shutil
import tempfile
import time

import openai
import pytest

from gptkit.sample.sampling import Sampler
from tests.serving import running, tiny_checkpoint

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--window-size=900,700")
SEED = 4


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
    """A Sampler whose pieces come 20 ms apart: the reply visibly grows on the page."""

    def __init__(self, sampler):
        self._sampler = sampler

    def __getattr__(self, name):
        return getattr(self._sampler, name)

    def sample(self, prompt, settings):
        return _SlowSamples(self._sampler.sample(prompt, settings))


class _SlowSamples:
    def __init__(self, samples):
        self._samples = samples

    def __getattr__(self, name):
        return getattr(self._samples, name)

    def __iter__(self):
        for item in self._samples:
            time.sleep(0.02)
            yield item


@pytest.fixture(scope="module")
def url(small_tokenizer, tmp_path_factory):
    checkpoint = tiny_checkpoint(small_tokenizer[0], tmp_path_factory.mktemp("page") / "ckpt")
    with running(Slow(Sampler(checkpoint, device="cpu"))) as url:
        yield url


def wait(condition, timeout=60):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, "the page did not get there"
        time.sleep(0.05)
    return value


def test_a_message_gets_a_streamed_reply(browser, url):
    from selenium.webdriver.common.by import By

    browser.get(url + "/")
    wait(lambda: browser.find_element(By.ID, "model").text == "tiny")
    for field, value in (("temperature", "0.8"), ("top_p", "0.9"), ("max_tokens", "60"), ("seed", str(SEED))):
        browser.find_element(By.ID, field).clear()
        browser.find_element(By.ID, field).send_keys(value)
    # Every text the reply shows, recorded as it changes: a streamed reply shows several.
    browser.execute_script("""
        window.seen = [];
        new MutationObserver(() => {
          const reply = document.querySelector('.msg.assistant .text');
          if (reply && reply.textContent !== window.seen[window.seen.length - 1]) window.seen.push(reply.textContent);
        }).observe(document.getElementById('log'), {subtree: true, childList: true, characterData: true});
    """)
    browser.find_element(By.ID, "input").send_keys("hello there\n")
    wait(lambda: browser.find_elements(By.CSS_SELECTOR, ".msg.done"))
    assert [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".msg.user .text")] == ["hello there"]
    shown = browser.find_element(By.CSS_SELECTOR, ".msg.assistant .text").get_attribute("textContent")
    with openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0) as client:
        expected = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hello there"}],
                                                  temperature=0.8, top_p=0.9, max_tokens=60, seed=SEED)
    assert shown == expected.choices[0].message.content and len(shown) > 10
    seen = browser.execute_script("return window.seen")
    assert len(seen) > 3 and all(shown.startswith(text) for text in seen) and seen[-1] == shown

    browser.find_element(By.ID, "new").click()  # a new chat: nothing shown, nothing sent of the old one
    assert browser.find_elements(By.CSS_SELECTOR, ".msg") == []
    browser.find_element(By.ID, "input").send_keys("hello there\n")
    wait(lambda: browser.find_elements(By.CSS_SELECTOR, ".msg.done"))
    assert browser.find_element(By.CSS_SELECTOR, ".msg.assistant .text").get_attribute("textContent") == shown
