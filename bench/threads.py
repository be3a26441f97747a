"""torch's thread count under load: the default (measured, runtime/threads.py) against fixed
counts, --deterministic's among them, on an idle machine and beside two busy processes that run
from the start or arrive during the run.

    python bench/threads.py [--seconds 20] [--repeat 3] [--shape recipe tiny]
                            [--loads idle python torch python-later torch-later] [--modes default 1 deterministic]
    python bench/threads.py --kernels [--shape recipe tiny]

Each run is a fresh child process that trains for --seconds: real training steps of a Llama-style
model of our own (forward, backward, clipping, our AdamW) on random tokens, every step timed into
the thread choice as the trainer does; tokens per second over the whole run, so the default pays
for its own measuring. The shapes: `recipe`, the recipe's shape for 2 minutes on Tiny Shakespeare
(d 96, 3 layers, batch 16 x 128, vocabulary 1024), and `tiny`, the tiny preset (d 256, 4 layers,
batch 16 x 256, vocabulary 2048). The modes: `default`, the measured count; a number N, `--threads
N`; `deterministic`, what `gptkit train --deterministic` runs on the CPU: the count fixed at one per
physical core (runtime/threads.py, torch_threads) under torch's deterministic settings
(runtime/device.py). The loads: `idle`; `python`, two processes each running a Python busy loop;
`torch`, two processes each multiplying matrices with torch on its default threads (their OpenMP
threads spin too, as a second training run's or a test suite's do); `python-later` and
`torch-later`, the same two processes started a third of the way into each run, as load that
arrives while a run goes on. The children run without OMP_NUM_THREADS, which would fix every count.

The modes take turns --repeat times per load. Each row gives the medians, each mode's throughput
over the default's (what fixing the count costs or gains), the default's over the best fixed
count's, the default's counts at the end, and the load: the busy cores of the whole machine (from
/proc/stat) over the 2 seconds before the row's runs, the busy processes of `python` and `torch`
included, and the load average (1 minute) after them.

--kernels measures no speed: it says which computations of a training step give other bits on
one thread than on two (runtime/threads.py says why that matters): a whole step of each shape in
Llama's and in GPT-2's architecture (its LayerNorm) from the same start (forward, backward,
clipping, AdamW: the loss, every gradient, the weights after), and single kernels: the matrix
products of a linear layer's forward and backward passes, LayerNorm's backward pass, a sum into
one value. The answer depends on the CPU and on MKL's code path for it (MKL_CBWR chooses one).
"""

import argparse
import contextlib
import json
import os
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
LOADS = ("idle", "python", "torch", "python-later", "torch-later")
BUSY = 2  # busy processes beside a loaded run
ARRIVAL = 1 / 3  # of a run, where a `-later` load's processes start


def one(shape, mode, seconds, later):
    """Train `shape` for `seconds` with the threads of `mode`; where `later` names a kind of busy
    process (bench/common.py, BUSY), BUSY of them start ARRIVAL into the run. Print tokens per second."""
    import torch

    from gptkit.model.config import ModelConfig
    from gptkit.model.model import TransformerLM
    from gptkit.runtime.device import deterministic
    from gptkit.runtime.threads import torch_threads
    from gptkit.train.optim import AdamW

    settings = dict(SHAPES[shape])
    batch = settings.pop("batch")
    threads = torch_threads(
        None if mode in ("default", "deterministic") else int(mode),
        torch.device("cpu"),
        deterministic=mode == "deterministic",
    )
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(**settings))
    optimizer = AdamW([(list(model.named_parameters()), 0.1)], lr=1e-3)
    data = torch.randint(settings["vocab_size"], (batch, settings["context_length"] + 1))
    steps, counts, arrived = 0, [], not later
    with deterministic(mode == "deterministic"), contextlib.ExitStack() as load:
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            if not arrived and time.perf_counter() - start >= ARRIVAL * seconds:
                arrived = load.enter_context(busy_processes(BUSY, later))
            started = time.perf_counter()
            _, loss = model(data[:, :-1], data[:, 1:])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            model.zero_grad(set_to_none=True)
            threads.record(time.perf_counter() - started)
            steps, counts = steps + 1, counts + [threads.count]
        elapsed = time.perf_counter() - start
    print(
        json.dumps(
            {
                "tok_s": steps * batch * settings["context_length"] / elapsed,
                "steps": steps,
                "final_threads": counts[-1],
                "mean_threads": sum(counts) / len(counts),
            }
        )
    )


def kernels(shapes):
    """Print which computations give other bits on one thread than on two."""
    import torch

    from gptkit.model.config import ModelConfig
    from gptkit.model.model import TransformerLM
    from gptkit.train.optim import AdamW

    def on(threads, compute):
        torch.set_num_threads(threads)
        torch.manual_seed(0)
        return compute()

    def training_step(shape, architecture):
        settings = dict(SHAPES[shape])
        batch = settings.pop("batch")
        model = TransformerLM(ModelConfig(**settings, architecture=architecture))
        optimizer = AdamW([(list(model.named_parameters()), 0.1)], lr=1e-3)
        data = torch.randint(settings["vocab_size"], (batch, settings["context_length"] + 1))
        _, loss = model(data[:, :-1], data[:, 1:])
        loss.backward()
        grads = [p.grad.clone() for p in model.parameters()]
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return [loss.detach()] + grads + [p.detach().clone() for p in model.parameters()]

    def layer_norm_backward(rows, d):
        x, dy = torch.randn(rows, d, requires_grad=True), torch.randn(rows, d)
        norm = torch.nn.LayerNorm(d)
        norm(x).backward(dy)
        return [x.grad, norm.weight.grad, norm.bias.grad]

    rows = []
    for shape in shapes:
        settings = SHAPES[shape]
        tokens, d, d_ff = settings["batch"] * settings["context_length"], settings["d_model"], settings["d_ff"]
        x, w, dy = torch.randn(tokens, d), torch.randn(d_ff, d), torch.randn(tokens, d_ff)
        rows += [
            (f"{shape}: a training step, llama", lambda shape=shape: training_step(shape, "llama")),
            (f"{shape}: a training step, gpt2 (LayerNorm)", lambda shape=shape: training_step(shape, "gpt2")),
            (f"{shape}: x @ W.T ({tokens} x {d} by {d} x {d_ff})", lambda x=x, w=w: [x @ w.T]),
            (f"{shape}: its input gradient dy @ W", lambda dy=dy, w=w: [dy @ w]),
            (f"{shape}: its weight gradient dy.T @ x (inner {tokens})", lambda dy=dy, x=x: [dy.T @ x]),
            (
                f"{shape}: LayerNorm backward ({tokens} x {d})",
                lambda tokens=tokens, d=d: layer_norm_backward(tokens, d),
            ),
        ]
    big = torch.randn(1 << 16)
    rows.append(("a sum of 65,536 values into one", lambda: [big.sum()]))
    branch = f", MKL_CBWR={os.environ['MKL_CBWR']}" if os.environ.get("MKL_CBWR") else ""
    print(f"machine: {cpu()}; torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}{branch}\n")
    print("| computation | equal bit for bit on 1 and 2 threads |\n|---|---|")
    for name, compute in rows:
        one_thread, two = on(1, compute), on(2, compute)
        same = all(torch.equal(a, b) for a, b in zip(one_thread, two))
        print(
            f"| {name} | {'yes' if same else f'no ({sum(not torch.equal(a, b) for a, b in zip(one_thread, two))} of {len(two)} tensors differ)'} |"
        )


def busy_cores(seconds=2.0):
    """The cores of the whole machine that were busy, on average, over the next `seconds`."""
    from gptkit.runtime.threads import cpu_seconds

    before = cpu_seconds()
    time.sleep(seconds)
    after = cpu_seconds()
    if before is None or after is None or after[1] <= before[1]:
        return float("nan")
    return (os.cpu_count() or 1) * (1 - (after[0] - before[0]) / (after[1] - before[1]))


def label(mode, top):
    if mode == "default":
        return "default (measured)"
    if mode == "deterministic":
        return f"--deterministic ({top} thread{'s' if top > 1 else ''})"
    return f"--threads {mode}"


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "_one":
        return one(sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else "")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--loads", nargs="+", default=["idle", "python", "torch", "python-later"], choices=LOADS)
    parser.add_argument("--shape", nargs="+", default=["recipe", "tiny"], choices=list(SHAPES))
    parser.add_argument(
        "--modes",
        nargs="+",
        default=["default", "1", "deterministic"],
        help="default, deterministic, or a thread count N (--threads N)",
    )
    parser.add_argument(
        "--kernels", action="store_true", help="which computations differ on 1 and 2 threads, no timing"
    )
    args = parser.parse_args()
    if args.kernels:
        return kernels(args.shape)
    if "default" not in args.modes or any(
        m not in ("default", "deterministic") and not m.isdigit() for m in args.modes
    ):
        parser.error("--modes: default and any of deterministic and thread counts")
    from gptkit.shared.workers import cores_per_process

    os.environ.pop("OMP_NUM_THREADS", None)  # the children's counts are the modes' own
    top, others = cores_per_process(), [m for m in args.modes if m != "default"]
    print(
        f"machine: {cpu()}; {args.seconds:g} s a run, medians of {args.repeat}; --deterministic fixes {top} "
        f"thread{'s' if top > 1 else ''} (one per physical core); {BUSY} busy processes beside a loaded run, "
        f"a `-later` load's from {ARRIVAL:.2f} of each run"
    )
    header = [
        "shape",
        "load",
        *(label(m, top) + (" tok/s" if m == "default" else "") for m in args.modes),
        *(f"{label(m, top)} / default" for m in others),
        "default / best fixed",
        "default's count at the end",
        "busy cores before",
        "load avg",
    ]
    print("\n| " + " | ".join(header) + " |")
    print("|" + "---|" * 2 + "---:|" * (len(args.modes) + len(others) + 1) + "---|---:|---:|")
    worst, costs = float("inf"), {m: [] for m in others}
    for shape in args.shape:
        for load in args.loads:
            kind, later = load.removesuffix("-later"), load.endswith("-later")
            results = {mode: [] for mode in args.modes}
            with busy_processes(0 if load == "idle" or later else BUSY, "python" if load == "idle" else kind):
                time.sleep(0 if load == "idle" or later else 2)  # the busy processes get going
                busy = busy_cores()
                for _ in range(args.repeat):
                    for mode in args.modes:
                        results[mode].append(run_child(__file__, [shape, mode, args.seconds, kind if later else ""]))
                load_avg = load_average()
            tok_s = {mode: statistics.median(r["tok_s"] for r in runs) for mode, runs in results.items()}
            ratios = {m: tok_s[m] / tok_s["default"] for m in others}
            best = max(tok_s[m] for m in others) if others else tok_s["default"]
            worst = min(worst, tok_s["default"] / best)
            for m in others:
                costs[m].append((load, ratios[m]))
            ends = "/".join(str(r["final_threads"]) for r in results["default"])
            print(
                f"| {shape} | {load} | "
                + " | ".join(f"{tok_s[m]:,.0f}" for m in args.modes)
                + " | "
                + " | ".join(f"{ratios[m]:.2f}" for m in others)
                + f" | {tok_s['default'] / best:.2f} | {ends} | "
                f"{busy:.1f} of {os.cpu_count()} | {load_avg:.2f} |",
                flush=True,
            )
    print(f"\nworst default / best fixed: {worst:.2f}")
    for m, rows in costs.items():
        print(f"{label(m, top)} / default: " + ", ".join(f"{load} {ratio:.2f}" for load, ratio in rows))


if __name__ == "__main__":
    main()
