"""Continuous batching (serve/batching.py): requests that decode together get the tokens each gets
alone, and the batch is bounded."""

import threading

import pytest
import torch

from gptkit.sample.sampling import Sampler, Settings
from gptkit.serve.batching import Batcher, Busy
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


def test_a_request_gets_the_same_tokens_alone_and_in_company(sampler):
    batcher = Batcher(sampler.model, rows=6)
    alone = [ids_of(batcher.submit(*r)) for r in REQUESTS]
    # All at once: more samples (11) than rows (6), so some wait and join as others leave.
    together = [batcher.submit(*r) for r in REQUESTS]
    assert [ids_of(request) for request in together] == alone
    assert [len(ids[0]) for ids in alone] == [r[1].max_new_tokens for r in REQUESTS]
    assert len({tuple(ids[0]) for ids in alone}) == len(alone)  # different tokens: a mix-up would show


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


def test_concurrent_greedy_clients_of_the_server_get_their_alone_text(sampler):
    prompts = ["the cat", "a dog ran", "once", "the sun is", "hi", "we", "it was a", "no"]
    with running(sampler) as url, openai.OpenAI(base_url=url + "/v1", api_key="-", max_retries=0) as client:

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
