"""torch's thread count under load: the default (measured, runtime/threads.py) against --threads 1
and --threads 2, on an idle machine and beside two busy processes.

    python bench/threads.py [--seconds 20] [--repeat 3] [--loads idle python torch] [--shape recipe tiny]

Each run is a fresh child process that trains for --seconds: real training steps of a Llama-style
model of our own (forward, backward, clipping, our AdamW) on random tokens, every step timed into
the thread choice as the trainer does; tokens per second over the whole run, so the default pays
for its own measuring. The shapes: `recipe`, the recipe's shape for 2 minutes on Tiny Shakespeare
(d 96, 3 layers, batch 16 x 128, vocabulary 1024), and `tiny`, the tiny preset (d 256, 4 layers,
batch 16 x 256, vocabulary 2048). The loads: `idle`; `python`, two processes each running a
Python busy loop; `torch`, two processes each multiplying matrices with torch on its default
threads (their OpenMP threads spin too, as a second training run's or a test suite's do). The
modes take turns --repeat times per load; the table gives medians, the ratio of the default to
the best fixed count, and the load average (1 minute) read after each load's runs.
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # the repository, not bench/: `from bench.common import ...`

from bench.common import busy_processes, cpu, load_average, run_child  # noqa: E402 (after the path is set)

SHAPES = {
    "recipe": dict(vocab_size=1024, context_length=128, d_model=96, n_layers=3, n_heads=3, d_ff=256, batch=16),
    "tiny": dict(vocab_size=2048, context_length=256, d_model=256, n_layers=4, n_heads=4, d_ff=688, batch=16),
}
MODES = ("default", "1", "2")


def one(shape, mode, seconds):
    """Train `shape` for `seconds` with the threads of `mode`; print tokens per second."""
    import torch

    from gptkit.model.config import ModelConfig
    from gptkit.model.model import TransformerLM
    from gptkit.runtime.threads import torch_threads
    from gptkit.train.optim import AdamW

    settings = dict(SHAPES[shape])
    batch = settings.pop("batch")
    threads = torch_threads(None if mode == "default" else int(mode))
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(**settings))
    optimizer = AdamW([(list(model.named_parameters()), 0.1)], lr=1e-3)
    data = torch.randint(settings["vocab_size"], (batch, settings["context_length"] + 1))
    steps, counts, start = 0, [], time.perf_counter()
    while time.perf_counter() - start < seconds:
        started = time.perf_counter()
        _, loss = model(data[:, :-1], data[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        model.zero_grad(set_to_none=True)
        threads.record(time.perf_counter() - started)
        steps, counts = steps + 1, counts + [threads.count]
    elapsed = time.perf_counter() - start
    print(json.dumps({"tok_s": steps * batch * settings["context_length"] / elapsed, "steps": steps,
                      "final_threads": counts[-1], "mean_threads": sum(counts) / len(counts)}))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "_one":
        return one(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--loads", nargs="+", default=["idle", "python", "torch"], choices=["idle", "python", "torch"])
    parser.add_argument("--shape", nargs="+", default=["recipe", "tiny"], choices=list(SHAPES))
    args = parser.parse_args()
    print(f"machine: {cpu()}; {args.seconds:g} s a run, medians of {args.repeat}; child processes without OMP_NUM_THREADS")
    print("\n| shape | load | default tok/s | --threads 1 | --threads 2 | default / best | default's threads at the end | load avg |")
    print("|---|---|---:|---:|---:|---:|---|---:|")
    worst = 1.0
    for shape in args.shape:
        for load in args.loads:
            results = {mode: [] for mode in MODES}
            with busy_processes(0 if load == "idle" else 2, "python" if load == "idle" else load):
                time.sleep(0 if load == "idle" else 2)  # the busy processes get going
                for _ in range(args.repeat):
                    for mode in MODES:
                        results[mode].append(run_child(__file__, [shape, mode, args.seconds]))
                load_avg = load_average()
            tok_s = {mode: statistics.median(r["tok_s"] for r in runs) for mode, runs in results.items()}
            ratio = tok_s["default"] / max(tok_s["1"], tok_s["2"])
            worst = min(worst, ratio)
            ends = "/".join(str(r["final_threads"]) for r in results["default"])
            print(f"| {shape} | {load} | {tok_s['default']:,.0f} | {tok_s['1']:,.0f} | {tok_s['2']:,.0f} | "
                  f"{ratio:.2f} | {ends} | {load_avg:.2f} |", flush=True)
    print(f"\nworst default / best: {worst:.2f}")


if __name__ == "__main__":
    main()
