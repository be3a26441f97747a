"""Benchmark `gptkit serve` under concurrent clients: continuous batching against one client alone,
and against the same decoding done directly in one process (the sample library's Sampler).

    python bench/serve.py [--checkpoint DIR] [--clients 1 4 8] [--requests 8] [--max-tokens 64]
                          [--threads 1] [--max-batch 8] [--rounds 3] [--busy 0] [-- SERVE_FLAG ...]

Without --checkpoint, a random model (d_model 128, 4 layers, vocabulary 2048 of a dummy tokenizer,
context 512; seeded). Every request is the same completion (a fixed prompt, temperature 0.8, top-p
0.9, --max-tokens) with its own seed. `direct`: --requests of them through Sampler.sample in this
process. `serve N`: a `gptkit serve` child (same threads, CPU, --max-batch, and the flags after
--, such as --batch-invariant) and N client threads of the official openai client, each sending
--requests requests one after another, whole (not streamed). `direct` and `serve 1` take their
requests in turn, one of each, so that a machine whose speed drifts slows both alike. Per token: a
request's wall time (its wait in the queue included) over its completion tokens; tokens/s: the
completion tokens of all requests over the round's wall time (direct's and serve 1's: over their
requests' own). The rows are measured --rounds times. Printed for each row, the medians over the
rounds: p50/p99 per-token latency, tokens/s, the ratios of tokens/s and of p50 latency to
`serve 1`'s (one client alone on the same server) and of tokens/s to direct's, each taken within a
round, and the 1-minute load average at the row's end. --busy N: N busy Python loops run beside
everything.
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


def measured(latencies, tokens, seconds):
    """A row's figures in one round: tokens/s, p50 and p99 seconds per token, the load after it."""
    return tokens / seconds, statistics.median(latencies), percentile(latencies, 0.99), os.getloadavg()[0]


def row(name, requests, rounds, one, direct):
    """Print a row: the medians over `rounds` (measured() of each round), its ratios to the rounds
    of `one` (serve 1) and `direct` taken round by round."""
    rate, p50, p99, load = (statistics.median(r[k] for r in rounds) for k in range(4))
    per_one = statistics.median(r[0] / o[0] for r, o in zip(rounds, one))
    p50_one = statistics.median(r[1] / o[1] for r, o in zip(rounds, one))
    per_direct = statistics.median(r[0] / d[0] for r, d in zip(rounds, direct))
    print(
        f"{name:<10} {requests:>8} {p50 * 1000:>9.2f} {p99 * 1000:>9.2f} {rate:>9.0f} {per_one:>9.2f} "
        f"{p50_one:>9.2f} {per_direct:>9.2f} {load:>6.2f}",
        flush=True,
    )


def asked_directly(sampler, seed, args):
    """One request through the Sampler in this process: (seconds, completion tokens)."""
    from gptkit.sample.sampling import Settings

    t = time.perf_counter()
    samples = sampler.sample(PROMPT, Settings(max_new_tokens=args.max_tokens, seed=seed, **SAMPLING))
    samples.texts()
    return time.perf_counter() - t, sum(samples.tokens)


def asked(client, seed, args):
    """One request to the server, whole: (seconds, completion tokens)."""
    t = time.perf_counter()
    out = client.completions.create(model="bench", prompt=PROMPT, max_tokens=args.max_tokens, seed=seed, **SAMPLING)
    return time.perf_counter() - t, out.usage.completion_tokens


def alternating(sampler, url, args):
    """`direct` and one client alone, a request of each in turn, so that the machine's drift
    between them cancels: (latencies, tokens, seconds) of each, its seconds its requests' own."""
    import openai

    rows = [([], 0, 0.0), ([], 0, 0.0)]
    with openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=600) as client:
        for seed in range(args.requests):
            for k, (seconds, tokens) in enumerate((asked_directly(sampler, seed, args), asked(client, seed, args))):
                latencies, total, elapsed = rows[k]
                rows[k] = ([*latencies, seconds / tokens], total + tokens, elapsed + seconds)
    return rows


def served(url, clients, args):
    """`clients` threads, each sending --requests requests one after another: (latencies, tokens,
    the round's seconds)."""
    import openai

    latencies, tokens, lock = [], [0], threading.Lock()

    def client(k):
        with openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=600) as c:
            for r in range(args.requests):
                seconds, made = asked(c, r, args)
                with lock:
                    latencies.append(seconds / made)
                    tokens[0] += made

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
    parser.add_argument("--rounds", type=int, default=3, help="each row measured this many times, medians printed")
    parser.add_argument("--busy", type=int, default=0, help="busy processes beside everything")
    parser.add_argument("serve_flags", nargs="*", metavar="SERVE_FLAG", help="after --: more gptkit serve flags")
    args = parser.parse_args()
    from gptkit.sample.sampling import Sampler, Settings

    with tempfile.TemporaryDirectory() as tmp, busy_processes(args.busy):
        checkpoint = args.checkpoint or build(Path(tmp) / "ckpt")
        print(
            f"machine: {cpu()}, {args.threads} torch thread(s), {args.busy} busy processes beside; checkpoint: "
            f"{args.checkpoint or 'random ' + str(MODEL)}; {args.max_tokens} new tokens a request; "
            f"gptkit serve --max-batch {args.max_batch} {' '.join(args.serve_flags)}; {args.rounds} rounds"
        )
        print(
            f"{'mode':<10} {'requests':>8} {'p50 ms/tok':>9} {'p99 ms/tok':>9} {'tokens/s':>9} {'tok/s /1':>9} "
            f"{'p50 /1':>9} {'/direct':>9} {'load':>6}"
        )
        sampler = Sampler(checkpoint, device="cpu", threads=args.threads)
        sampler.sample(PROMPT, Settings(max_new_tokens=args.max_tokens, seed=0, **SAMPLING)).texts()  # warm-up
        command = [sys.executable, "-m", "gptkit.serve", "--checkpoint", str(checkpoint), "--port", "0"]
        command += ["--device", "cpu", "--threads", str(args.threads), "--max-batch", str(args.max_batch)]
        server = subprocess.Popen([*command, "--name", "bench", *args.serve_flags], stderr=subprocess.PIPE, text=True)
        try:
            line = server.stderr.readline()
            if not line.startswith("serving "):
                sys.exit(f"error: gptkit serve did not start: {line}{server.stderr.read()}")
            url = line.split(" at ")[1].split("/ ")[0]
            served(url, 1, argparse.Namespace(requests=1, max_tokens=args.max_tokens))  # warm-up
            rounds = {"direct": []} | {clients: [] for clients in args.clients}
            for _ in range(args.rounds):
                alone, one = alternating(sampler, url, args)
                rounds["direct"].append(measured(*alone))
                for clients in args.clients:
                    rounds[clients].append(measured(*(one if clients == 1 else served(url, clients, args))))
        finally:
            server.terminate()
            server.wait()
        one = rounds[args.clients[0]]  # one client alone unless --clients says otherwise
        row("direct", args.requests, rounds["direct"], one, rounds["direct"])
        for clients in args.clients:
            row(f"serve {clients}", clients * args.requests, rounds[clients], one, rounds["direct"])


if __name__ == "__main__":
    main()
