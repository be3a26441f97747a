"""Benchmark `gptkit serve` under concurrent clients: continuous batching against one client alone,
and against the same decoding done directly in one process (the sample library's Sampler).

    python bench/serve.py [--checkpoint DIR] [--clients 1 4 8] [--requests 8] [--max-tokens 64]
                          [--threads 1] [--max-batch 8] [--busy 0]

Without --checkpoint, a random model (d_model 128, 4 layers, vocabulary 2048 of a dummy tokenizer,
context 512; seeded). Every request is the same completion (a fixed prompt, temperature 0.8, top-p
0.9, --max-tokens) with its own seed. `direct`: --requests of them one after another through
Sampler.sample in this process. `serve N`: a `gptkit serve` child (same threads, CPU, --max-batch)
and N client threads of the official openai client, each sending --requests requests one after
another, whole (not streamed). Per token: a request's wall time (its wait in the queue included)
over its completion tokens; tokens/s: the completion tokens of all requests over the round's wall
time. Printed: p50/p99 per-token latency, tokens/s, the ratios of tokens/s and of p50 latency to
`serve 1`'s (one client alone on the same server) and tokens/s to direct's, and the 1-minute load
average at the end of each round. --busy N: N busy Python loops run beside everything.
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

from bench.common import busy_processes, cpu  # noqa: E402 (after the path is set)
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


def row(name, latencies, tokens, seconds, one=None, direct=None):
    """Print a round; returns (tokens/s, p50 per-token seconds) for the rows after it to compare with."""
    rate, p50 = tokens / seconds, statistics.median(latencies)
    ratios = [f"{rate / one[0]:.2f}" if one else "1.00", f"{p50 / one[1]:.2f}" if one else "1.00"]
    ratios.append(f"{rate / direct[0]:.2f}" if direct else "1.00")
    print(
        f"{name:<10} {len(latencies):>8} {p50 * 1000:>9.1f} {percentile(latencies, 0.99) * 1000:>9.1f} "
        f"{rate:>9.0f} {ratios[0]:>9} {ratios[1]:>9} {ratios[2]:>9} {os.getloadavg()[0]:>6.2f}",
        flush=True,
    )
    return rate, p50


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
        latencies.append((time.perf_counter() - t) / sum(samples.tokens))
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
                    latencies.append((time.perf_counter() - t) / out.usage.completion_tokens)
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
    parser.add_argument("--max-batch", type=int, default=8, help="gptkit serve --max-batch")
    parser.add_argument("--busy", type=int, default=0, help="busy processes beside everything")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, busy_processes(args.busy):
        checkpoint = args.checkpoint or build(Path(tmp) / "ckpt")
        print(
            f"machine: {cpu()}, {args.threads} torch thread(s), {args.busy} busy processes beside; checkpoint: "
            f"{args.checkpoint or 'random ' + str(MODEL)}; {args.max_tokens} new tokens a request; "
            f"--max-batch {args.max_batch}"
        )
        print(
            f"{'mode':<10} {'requests':>8} {'p50 ms/tok':>9} {'p99 ms/tok':>9} {'tokens/s':>9} {'tok/s /1':>9} "
            f"{'p50 /1':>9} {'/direct':>9} {'load':>6}"
        )
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
                "--max-batch",
                str(args.max_batch),
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
            one = None
            for clients in args.clients:
                result = row(f"serve {clients}", *served(url, clients, args), one=one, direct=base)
                one = one or result  # the first round, one client alone unless --clients says otherwise
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
