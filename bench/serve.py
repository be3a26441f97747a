"""Benchmark `gptkit serve` under concurrent clients against the same decoding done directly in one
process (the sample library's Sampler).

    python bench/serve.py [--checkpoint DIR] [--clients 1 4 8] [--requests 8] [--max-tokens 64] [--threads 1]

Without --checkpoint, a random model (d_model 128, 4 layers, vocabulary 2048 of a dummy tokenizer,
context 512; seeded). Every request is the same completion (a fixed prompt, temperature 0.8, top-p
0.9, --max-tokens) with its own seed. `direct`: --requests of them one after another through
Sampler.sample in this process. `serve N`: a `gptkit serve` child (same threads, CPU) and N client
threads of the official openai client, each sending --requests requests one after another, whole
(not streamed). Latency: a request's wall time (for serve, the queue it waits in included: one
decoding at a time); tokens/s: the completion tokens of all requests over the round's wall time.
Printed: p50/p99 latency, tokens/s, its ratio to direct's, and the 1-minute load average at the end
of each round (other work on the machine slows every row alike).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # the repository, not bench/: `from bench.common import ...`

from bench.common import cpu  # noqa: E402 (after the path is set)
from bench.sample import dummy_tokenizer  # noqa: E402

MODEL = dict(vocab_size=2048, context_length=512, d_model=128, n_layers=4, n_heads=4, d_ff=344)
PROMPT = "Once upon a time"
SAMPLING = dict(temperature=0.8, top_p=0.9)


def build(path):
    import torch

    from gptkit.model.checkpoint import save_model
    from gptkit.model.config import ModelConfig
    from gptkit.model.model import TransformerLM

    torch.manual_seed(0)
    save_model(TransformerLM(ModelConfig(**MODEL)).eval(), dummy_tokenizer(MODEL["vocab_size"]), path)
    return path


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def row(name, latencies, tokens, seconds, base=None):
    rate = tokens / seconds
    ratio = f"{rate / base:5.2f}" if base else "  1.00"
    print(
        f"{name:<10} {len(latencies):>8} {statistics.median(latencies) * 1000:>9.0f} {percentile(latencies, 0.99) * 1000:>9.0f} "
        f"{rate:>9.0f} {ratio:>6} {os.getloadavg()[0]:>6.2f}",
        flush=True,
    )
    return rate


def direct(checkpoint, args):
    from gptkit.sample.sampling import Sampler, Settings

    sampler = Sampler(checkpoint, device="cpu", threads=args.threads)
    sampler.sample(PROMPT, Settings(max_new_tokens=args.max_tokens, seed=0, **SAMPLING)).texts()  # warm-up
    latencies, tokens = [], 0
    started = time.perf_counter()
    for seed in range(args.requests):
        t = time.perf_counter()
        samples = sampler.sample(PROMPT, Settings(max_new_tokens=args.max_tokens, seed=seed, **SAMPLING))
        samples.texts()
        latencies.append(time.perf_counter() - t)
        tokens += sum(samples.tokens)
    return latencies, tokens, time.perf_counter() - started


def served(url, clients, args):
    import openai

    latencies, tokens, lock = [], [0], threading.Lock()

    def client(k):
        with openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=600) as c:
            for r in range(args.requests):
                t = time.perf_counter()
                out = c.completions.create(model="bench", prompt=PROMPT, max_tokens=args.max_tokens, seed=r, **SAMPLING)
                with lock:
                    latencies.append(time.perf_counter() - t)
                    tokens[0] += out.usage.completion_tokens

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, tokens[0], time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--requests", type=int, default=8, help="per client (direct: this many)")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = args.checkpoint or build(Path(tmp) / "ckpt")
        print(
            f"machine: {cpu()}, {args.threads} torch thread(s); checkpoint: "
            f"{args.checkpoint or 'random ' + str(MODEL)}; {args.max_tokens} new tokens a request"
        )
        print(f"{'mode':<10} {'requests':>8} {'p50 ms':>9} {'p99 ms':>9} {'tokens/s':>9} {'ratio':>6} {'load':>6}")
        base = row("direct", *direct(checkpoint, args))
        server = subprocess.Popen(
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
                "--threads",
                str(args.threads),
                "--name",
                "bench",
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            line = server.stderr.readline()
            if not line.startswith("serving "):
                sys.exit(f"error: gptkit serve did not start: {line}{server.stderr.read()}")
            url = line.split(" at ")[1].split("/ ")[0]
            served(url, 1, argparse.Namespace(requests=1, max_tokens=args.max_tokens))  # warm-up
            for clients in args.clients:
                row(f"serve {clients}", *served(url, clients, args), base=base)
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
