"""Continuous batching (serve/batching.py): a request alone gets `gptkit sample`'s tokens, requests
decode together in steps of the rows they use, with --batch-invariant each gets the tokens it gets
alone, the batch is bounded, a burst beyond it is told so, and a stop ends it."""

import http.client
import json
import threading
import time
from collections import Counter

import pytest
import torch
from click.testing import CliRunner

from gptkit.sample.cli import cli as sample_cli
from gptkit.sample.sampling import Sampler, Settings
from gptkit.serve.batching import WAITING_PER_ROW, Batcher, Busy, Stopped
from tests.serving import running, tiny_checkpoint

openai = pytest.importorskip("openai")  # the reference client, a test extra


@pytest.fixture(scope="module")
def sampler(small_tokenizer, tmp_path_factory):
    return Sampler(tiny_checkpoint(small_tokenizer[0], tmp_path_factory.mktemp("batching") / "ckpt"), device="cpu")


def ids_of(request):
    return torch.stack(list(request)).T.tolist()  # (samples, steps)


# Prompts of different lengths, greedy and sampled, one and several samples, short and long.
REQUESTS = [
    ([5, 6, 7], Settings(max_new_tokens=40, temperature=0), 0),
    ([9] * 30, Settings(max_new_tokens=25, temperature=0.9, top_p=0.8), 1),
    ([3, 1, 4, 1, 5], Settings(max_new_tokens=60, temperature=1.0, top_k=20, num_samples=2), 2),
    ([2], Settings(max_new_tokens=10, temperature=0), 3),
    ([8, 8], Settings(max_new_tokens=90, temperature=0.7), 4),
    (list(range(40, 100)), Settings(max_new_tokens=50, temperature=0), 5),
    ([1, 2], Settings(max_new_tokens=33, temperature=1.2, num_samples=3), 6),
]


def test_batch_invariant_a_request_gets_the_same_tokens_alone_and_in_company(sampler):
    batcher = Batcher(sampler.model, rows=6, invariant=True)
    alone = [ids_of(batcher.submit(*r)) for r in REQUESTS]
    # All at once: more samples (10) than rows (6), so some wait and join as others leave.
    together = [batcher.submit(*r) for r in REQUESTS]
    assert [ids_of(request) for request in together] == alone
    assert [len(ids[0]) for ids in alone] == [r[1].max_new_tokens for r in REQUESTS]
    assert len({tuple(ids[0]) for ids in alone}) == len(alone)  # different tokens: a mix-up would show
    assert set(batcher.widths) == {6}  # every step of all rows, alone too


def test_steps_compute_the_rows_in_use_and_several_requests_together(sampler):
    batcher = Batcher(sampler.model, rows=6)
    ids_of(batcher.submit(*REQUESTS[0]))
    assert batcher.widths == {1: REQUESTS[0][1].max_new_tokens - 1}  # alone: one row (the prefill drew the first)
    batcher.widths.clear()
    # Submitted before any is read: the first read admits those that fit (6 of the 10 samples), and the
    # rest join as rows free up; the steps shrink as requests leave, and grow as others join.
    together = [batcher.submit(*r) for r in REQUESTS]
    assert [len(ids[0]) for ids in map(ids_of, together)] == [r[1].max_new_tokens for r in REQUESTS]
    assert max(batcher.widths) == 6 and min(batcher.widths) < 6
    assert sum(width * steps for width, steps in batcher.widths.items()) == sum(
        r[1].num_samples * (r[1].max_new_tokens - 1) for r in REQUESTS
    )  # each sample's row in one step per token after its first, no idle rows


def test_a_request_closed_early_frees_its_rows(sampler):
    batcher = Batcher(sampler.model, rows=2)
    first = batcher.submit([5, 6], Settings(max_new_tokens=100, num_samples=2), 0)
    next(first)
    first.close()  # its reader is gone: without its rows back, the next request would wait for ever
    assert len(ids_of(batcher.submit([7], Settings(max_new_tokens=5, num_samples=2), 1))[0]) == 5


def test_the_queue_is_bounded(sampler, monkeypatch):
    monkeypatch.setattr("gptkit.serve.batching.WAITING_PER_ROW", 2)
    batcher = Batcher(sampler.model, rows=1)
    with batcher.changed:  # the batcher cannot admit while this holds its lock
        queued = [batcher.submit([5], Settings(max_new_tokens=3), seed) for seed in range(2)]
        with pytest.raises(Busy, match="1 samples are decoding and 2 waiting"):
            batcher.submit([5], Settings(max_new_tokens=3), 2)
    assert [len(ids_of(request)[0]) for request in queued] == [3, 3]


def test_the_server_refuses_what_cannot_fit_with_400_and_a_full_queue_with_429(sampler, monkeypatch):
    monkeypatch.setattr("gptkit.serve.batching.WAITING_PER_ROW", 0)  # every request finds the queue full
    with running(sampler) as url, openai.OpenAI(base_url=url + "/v1", api_key="-", max_retries=0) as client:
        with pytest.raises(openai.RateLimitError) as caught:
            client.completions.create(model="tiny", prompt="the cat", max_tokens=5)
        assert "the server is busy" in caught.value.body["message"]
        with pytest.raises(openai.BadRequestError) as caught:
            client.completions.create(model="tiny", prompt="the cat", max_tokens=5, n=9)
        assert caught.value.body["param"] == "n" and "at once (8)" in caught.value.body["message"]


@pytest.mark.parametrize("settings", [["--temperature", "0"], ["--temperature", "0.9", "--seed", "7"]])
def test_a_request_alone_gets_the_text_of_gptkit_sample(sampler, settings):
    """By default (steps of the rows in use), a request alone, greedy or seeded, gets the text that
    `gptkit sample` prints for its prompt and settings."""
    prompt, temperature = "the cat", float(settings[1])
    seed = int(settings[3]) if len(settings) > 2 else None
    printed = CliRunner().invoke(
        sample_cli,
        ["--checkpoint", str(sampler.checkpoint), "--prompt", prompt, "--max-new-tokens", "40", "--top-p", "0.9"]
        + settings
        + ["--device", "cpu"],
    )
    assert printed.exit_code == 0, printed.output
    with running(sampler) as url, openai.OpenAI(base_url=url + "/v1", api_key="-", max_retries=0) as client:
        out = client.completions.create(
            model="tiny", prompt=prompt, max_tokens=40, temperature=temperature, top_p=0.9, seed=seed
        )
    assert out.usage.completion_tokens > 5
    assert printed.stdout == prompt + out.choices[0].text + "\n"


def test_concurrent_clients_of_the_server_decode_together(sampler, monkeypatch):
    """Eight clients at once, admitted once all eight wait (so that the timing of their arrival does
    not matter): they decode in steps of eight rows, and each gets its reply."""
    batchers = []

    class Held(Batcher):
        def __init__(self, *args):
            super().__init__(*args)
            batchers.append(self)

        def _admitted(self):
            while len(self.waiting) < 8 and not self.running and not self.widths:  # before all eight: wait
                time.sleep(0.01)
            return super()._admitted()

    monkeypatch.setattr("gptkit.serve.server.Batcher", Held)
    with running(sampler) as url, openai.OpenAI(base_url=url + "/v1", api_key="-", max_retries=0) as client:
        replies = [None] * 8

        def ask(k):
            replies[k] = client.completions.create(model="tiny", prompt="the cat", max_tokens=20, seed=k)

        threads = [threading.Thread(target=ask, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert all(reply.usage.completion_tokens > 0 for reply in replies)
    assert max(batchers[0].widths) == 8


def test_batch_invariant_concurrent_greedy_clients_of_the_server_get_their_alone_text(sampler):
    prompts = ["the cat", "a dog ran", "once", "the sun is", "hi", "we", "it was a", "no"]
    with (
        running(sampler, batch_invariant=True) as url,
        openai.OpenAI(base_url=url + "/v1", api_key="-", max_retries=0) as client,
    ):

        def ask(prompt):
            return client.completions.create(model="tiny", prompt=prompt, max_tokens=30, temperature=0).choices[0].text

        alone = [ask(p) for p in prompts]
        together = [None] * len(prompts)

        def run(k):
            together[k] = ask(prompts[k])

        threads = [threading.Thread(target=run, args=(k,)) for k in range(len(prompts))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert together == alone


@pytest.mark.parametrize("clients", [40, 200])
def test_a_burst_of_clients_beyond_the_queue_gets_429s_never_a_reset(sampler, monkeypatch, clients):
    """All at once on --max-batch 2 with the model held: the 8 samples that may wait wait, and every
    other client gets its HTTP answer, a 429 (socketserver's listen backlog of 5 reset most of them)."""
    hold = threading.Event()
    admitted = Batcher._admitted
    monkeypatch.setattr(Batcher, "_admitted", lambda self: hold.wait() and admitted(self))  # nothing decodes yet
    answers, answered = [], threading.Condition()
    body = json.dumps({"prompt": "the cat", "max_tokens": 2}).encode()
    with running(sampler, max_batch=2) as url:
        port = int(url.rsplit(":", 1)[1])
        start = threading.Barrier(clients)

        def ask():
            start.wait()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            try:
                connection.request("POST", "/v1/completions", body)
                response = connection.getresponse()
                answer = response.status, json.loads(response.read())
            except OSError as e:  # a reset: no HTTP answer
                answer = type(e).__name__, None
            with answered:
                answers.append(answer)
                answered.notify()

        threads = [threading.Thread(target=ask) for _ in range(clients)]
        for thread in threads:
            thread.start()
        waiting = 2 * WAITING_PER_ROW
        with answered:  # the refused are answered while the model is held
            assert answered.wait_for(lambda: len(answers) == clients - waiting, timeout=120), answers
        hold.set()
        for thread in threads:
            thread.join()
    assert Counter(status for status, _ in answers) == {200: waiting, 429: clients - waiting}
    refused = [body["error"] for status, body in answers if status == 429]
    assert all(e["code"] == "rate_limit_exceeded" and "the server is busy" in e["message"] for e in refused)


def test_stop_ends_the_requests_decoding_and_waiting_and_refuses_more(sampler, monkeypatch):
    hold, stepping = threading.Event(), threading.Event()
    step = Batcher._step
    monkeypatch.setattr(Batcher, "_step", lambda self, requests: stepping.set() or hold.wait() and step(self, requests))
    batcher = Batcher(sampler.model, rows=1)
    decoding = batcher.submit([5, 6], Settings(max_new_tokens=50), 0)
    next(decoding)  # its prefill's token: it has the row
    waiting = batcher.submit([7], Settings(max_new_tokens=50), 1)
    read = []
    reader = threading.Thread(target=lambda: read.append(list(decoding)))
    reader.start()  # its reader's turn at the model: a step, held
    assert stepping.wait(timeout=60)
    stopping = threading.Thread(target=batcher.stop)
    stopping.start()
    with batcher.changed:
        assert batcher.changed.wait_for(lambda: batcher.stopped, timeout=60)
    stopping.join(timeout=0.2)
    assert stopping.is_alive()  # it returns only once the step has left the model
    hold.set()  # the held step ends; its tokens are not read
    stopping.join()
    reader.join()
    assert read == [[]] and list(waiting) == []
    with pytest.raises(Stopped):
        batcher.submit([5], Settings(max_new_tokens=3), 2)


def test_samples_whose_steps_end_early_finish_with_abort(sampler):
    """A request ended by stop() (its steps run out before max_new_tokens, without its end of text):
    finish_reason "abort", what a server's last chunk says; the text it had is kept."""

    def three(ids, settings, seed):
        return (torch.tensor([9]) for _ in range(3))

    cut = sampler.sample_ids([5], Settings(max_new_tokens=50), three)
    assert cut.texts()[0] and cut.tokens == [3] and cut.finish_reasons == ["abort"]
    whole = sampler.sample_ids([5], Settings(max_new_tokens=3), three)
    assert whole.texts() == cut.texts() and whole.finish_reasons == ["length"]
