"""bench/gpu_check.py's rows whose figures are speeds, each run alone on the GPU: 2 train-step
(the training step at GPT-2 small against HF Llama and nanoGPT) with 8 loader (the loader's cost,
on row 2's trainer), 5 recipe (the recipe on a time budget), 7 sampling (against HF generate with
a static cache), 9 serve (gptkit serve, one client and eight). bench/gpu_check.py's docstring
tells what each checks.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
import subprocess
import tempfile
import threading
import time
import traceback
import urllib.request
from pathlib import Path

from bench.gpu_check_config import DATA, DEVICE, DRY, H100_PEAK, MODE, ROOT, ROWS, WORK
from bench.gpu_rows_common import RowError, RowResult, gptkit, partial, write_json

# Each row imports what it runs inside itself: bench/gpu_check.py's driver imports this module too
# and runs no model (torch and transformers take seconds to import), and a row whose imports fail
# is that row's FAIL, not the whole check's.


# -- 2 and 8: the training step at GPT-2 small, and the loader's cost ------------------------------------


def row_train_step(r):
    import torch

    from bench import train_gpu
    from bench.train import build_data
    from gptkit.model.config import load_config

    c = MODE["train_step"]
    started = time.perf_counter()
    shape = c["shape"]
    if DRY:  # tiny shapes on the CPU: train_gpu's own "tiny" entry is 16 x 256
        train_gpu.SHAPES[shape] = (c["batch"], c["context"])
    batch, context = train_gpu.SHAPES[shape]
    device = torch.device("cuda", 0) if not DRY else torch.device("cpu")
    compile_model = not DRY
    peak = None
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        name = torch.cuda.get_device_name(device)
        peak = device_peak(name)
        r.values.update(device=name, peak_flops=peak, peak_assumed=peak is None)
        peak = peak or H100_PEAK  # an unlisted GPU: MFU against the H100 SXM's peak, said in the values
    results, profiled = {}, ""
    with tempfile.TemporaryDirectory(dir=WORK) as tmp:
        data = Path(tmp) / "data"
        build_data(data, load_config(shape).vocab_size, train_tokens=max(1 << 20, 4 * batch * (context + 1)))
        for name_, tok_s, flops, memory, trainer in train_gpu.race(
            shape, data, Path(tmp) / "run", device, compile_model, c["steps"], c["warmup"], deterministic=True
        ):
            results[name_] = {
                "tokens_per_s": tok_s,
                "flops_per_token": flops,
                "mfu": flops * tok_s / peak if peak else None,
                "peak_memory_bytes": memory,
            }
            print(f"{name_}: {results[name_]}", flush=True)
            r.values.update(shape=shape, batch=batch, context=context, contenders=results)
            r.figures = train_step_figures(results, shape, batch, context, peak) + profiled
            partial(
                r,
                started,
                f"no figures yet for {', '.join(n for n in ('ours', 'ours-det', 'hf-llama', 'nanogpt') if n not in results)}",
            )
            if name_ == "ours":
                loader_row(trainer, device)
                # where ours' step time goes, for the next change: kernels, kinds, the device's idle time
                prof = r.values["profile"] = train_gpu.profile(trainer.train_step, c["profile_steps"], device)
                print(f"ours' profile: {prof}", flush=True)
                where = ", ".join(f"{k} {v:.1f}" for k, v in list(prof["kinds_ms"].items())[:5])
                idle = f", idle {prof['idle_ms']:.1f}" if prof["idle_ms"] is not None else ""
                profiled = f"; ours' step {prof['step_ms']:.1f} ms: {where}{idle} ms"
    ours = results["ours"]
    r.check(
        "every contender ran", all(v["tokens_per_s"] > 0 and math.isfinite(v["tokens_per_s"]) for v in results.values())
    )
    if MODE["mfu_min"] is not None:
        r.check(
            f"ours at {MODE['mfu_min']:.0%} MFU or more ({100 * (ours['mfu'] or 0):.1f}%)",
            (ours["mfu"] or 0) >= MODE["mfu_min"],
        )
    if MODE["ahead"] is not None:
        for other in ("hf-llama", "nanogpt"):
            ratio = ours["tokens_per_s"] / results[other]["tokens_per_s"]
            r.check(f"ours at {MODE['ahead']}x {other}'s tok/s or more ({ratio:.2f}x)", ratio >= MODE["ahead"])


def train_step_figures(results, shape, batch, context, peak):
    mfu = lambda x: f", MFU {100 * x['mfu']:.1f}%" if x["mfu"] is not None else ""  # noqa: E731
    first = next(iter(results.values()))
    exact = results.get("ours-det", {}).get("tokens_per_s")
    return (
        "; ".join(f"{k} {v['tokens_per_s']:,.0f} tok/s{mfu(v)}" for k, v in results.items())
        + f" ({shape}, {batch} x {context}, FLOPs/token {first['flops_per_token'] / 1e6:.0f}M"
        + (f", peak {peak / 1e12:.0f} TFLOP/s)" if peak else ", no MFU on a CPU)")
        + (f"; --deterministic at {exact / first['tokens_per_s']:.2f}x ours' tok/s" if exact else "")
    )


def device_peak(name):
    """gptkit's dense bf16 peak for the GPU `name`d (train/report.py's table), or None."""
    from gptkit.train.report import peak_bf16_flops

    return peak_bf16_flops(name)


def loader_row(trainer, device):
    """Row 8, on row 2's trainer: steps that draw from the loader against steps on one cached batch."""
    import torch

    from bench import train_gpu

    c = MODE["train_step"]
    started = time.perf_counter()
    r = RowResult("loader")
    try:
        loading = trainer.batches
        cached = next(loading)
        cached = tuple(t.clone() for t in cached)

        def cached_step():
            trainer.batches = itertools.repeat(cached)
            try:
                return trainer.train_step()
            finally:
                trainer.batches = loading

        times = {"loaded": [], "cached": []}
        for _ in range(c["loader_rounds"]):
            times["loaded"].append(train_gpu.measure(trainer.train_step, c["loader_steps"], 1, device))
            times["cached"].append(train_gpu.measure(cached_step, c["loader_steps"], 1, device))
        loaded, steady = (statistics.median(times[k]) / c["loader_steps"] for k in ("loaded", "cached"))
        cost = loaded / steady - 1
        r.values.update(
            ms_per_step_loaded=1000 * loaded,
            ms_per_step_cached=1000 * steady,
            cost=cost,
            rounds=c["loader_rounds"],
            steps=c["loader_steps"],
            blocks=times,
        )
        r.figures = (
            f"{1000 * loaded:.1f} ms a step loading, {1000 * steady:.1f} ms on a cached batch: "
            f"{100 * cost:+.1f}% ({c['loader_rounds']} x {c['loader_steps']} steps each, medians)"
        )
        r.check(f"the loader's cost under {MODE['loader_max']:.0%} ({100 * cost:.1f}%)", cost < MODE["loader_max"])
        out = r.as_dict(time.perf_counter() - started)
    except Exception as e:
        traceback.print_exc()
        out = r.as_dict(time.perf_counter() - started)
        out.update(verdict="FAIL", why=f"{type(e).__name__}: {e}")
    write_json(ROWS / "loader.json", out)
    torch.cuda.synchronize() if device.type == "cuda" else None


# -- 5: the recipe on a time budget -------------------------------------------------------------------


def row_recipe(r):
    from bench.time_budget import run as budget_run

    got = budget_run(DATA, WORK / "recipe", MODE["recipe_budget"])
    budget = MODE["recipe_s"]
    spent = got["recipe_s"] + got["loop_s"]  # the recipe's timing and trials are inside the budget
    late = spent / budget - 1
    r.values.update(got, budget_s=budget, late=late)
    r.figures = (
        f"{got['shape']}, {got['steps']:,} steps, held-out {got['bpb']:.4f} bpb; the recipe {got['recipe_s']:.1f} s "
        f"and the loop {got['loop_s']:.1f} s of {budget} s ({100 * late:+.1f}%), command {got['wall_s']:.0f} s"
    )
    r.check(
        f"the recipe and the loop within {MODE['on_time']:.0%} of the {budget} s budget ({spent:.1f} s)",
        abs(late) <= MODE["on_time"],
    )
    r.check("a finite held-out bpb", math.isfinite(got["bpb"]))


# -- 7: sampling against HF generate with a static cache ------------------------------------------------


def row_sampling(r):
    import torch
    from transformers import LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    from bench.sample import dummy_tokenizer
    from gptkit.model.checkpoint import load_model, save_model
    from gptkit.model.config import ModelConfig, load_config
    from gptkit.model.generate import Decoder, decoding_weights
    from gptkit.model.hf import export_hf
    from gptkit.model.model import TransformerLM

    hf_logging.disable_progress_bar()
    started = time.perf_counter()
    c = MODE["sampling"]
    config = load_config(c["model"]) if isinstance(c["model"], str) else ModelConfig(**c["model"])
    device = torch.device(DEVICE)
    dtype = torch.float32 if DRY else torch.bfloat16
    ckpt, hf_dir = WORK / "sampling-ckpt", WORK / "sampling-hf"
    torch.manual_seed(0)
    save_model(TransformerLM(config), dummy_tokenizer(config.vocab_size), ckpt)
    export_hf(ckpt, hf_dir)
    ours = load_model(ckpt)[0].to(device).eval()
    if device.type == "cuda":  # as a Sampler (gptkit sample) decodes: bf16 linear weights under autocast
        decoding_weights(ours)
    decoder = Decoder(ours)  # keeps its CUDA graph from the warm-up run for the timed one, as a Sampler does
    hf = LlamaForCausalLM.from_pretrained(hf_dir, dtype=dtype).to(device).eval()
    hf.generation_config.eos_token_id = hf.generation_config.bos_token_id = None  # exactly the new tokens asked for
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, config.vocab_size - 1, (c["prompt"],), generator=g).tolist()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def run_ours(batch, n):
        started = time.perf_counter()
        made = sum(
            1 for _ in decoder.generate(prompt, max_new_tokens=n, num_samples=batch, temperature=0.8, top_p=0.9, seed=0)
        )
        sync()
        assert made == n, made
        return time.perf_counter() - started

    def run_hf(batch, n):
        ids = torch.tensor([prompt] * batch, device=device)
        torch.manual_seed(0)
        sync()
        started = time.perf_counter()
        with torch.inference_mode():
            out = hf.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=n,
                min_new_tokens=n,
                do_sample=True,
                temperature=0.8,
                top_p=0.9,
                top_k=0,
                cache_implementation="static",
                disable_compile=device.type != "cuda",
                eos_token_id=None,
                pad_token_id=0,
            )
        sync()
        assert out.shape == (batch, len(prompt) + n), out.shape
        return time.perf_counter() - started

    figures = []
    for batch in c["batches"]:
        speeds = {}
        for who, fn in (("ours", run_ours), ("hf", run_hf)):
            fn(batch, c["new"])  # warm-up (HF compiles its forward here on CUDA)
            speeds[who] = batch * c["new"] / fn(batch, c["new"])
        ratio = speeds["ours"] / speeds["hf"]
        r.values[f"batch_{batch}"] = {**speeds, "ratio": ratio}
        figures.append(f"batch {batch}: ours {speeds['ours']:,.0f} tok/s, HF static {speeds['hf']:,.0f} ({ratio:.2f}x)")
        r.figures = "; ".join(figures)
        partial(r, started, "the larger batch")
        r.check(f"batch {batch} sampled", speeds["ours"] > 0 and speeds["hf"] > 0)
        if MODE["sampling_min"] is not None:
            r.check(
                f"batch {batch}: ours at {MODE['sampling_min']}x HF's tok/s or more ({ratio:.2f}x)",
                ratio >= MODE["sampling_min"],
            )
    precision = "float32" if DRY else "bf16: ours bf16 linear weights under its autocast, HF bf16 weights"
    r.values.update(model=config.to_dict(), precision=precision, prompt=c["prompt"], new=c["new"])
    r.figures = (
        "; ".join(figures) + f" ({config.d_model} x {config.n_layers} layers, vocab {config.vocab_size}, "
        f"{precision}, {c['prompt']} + {c['new']} tokens)"
    )


# -- 9: gptkit serve on the device, one client and eight ---------------------------------------------


def row_serve(r):
    import torch

    from bench.sample import dummy_tokenizer
    from gptkit.model.checkpoint import save_model
    from gptkit.model.config import ModelConfig, load_config
    from gptkit.model.model import TransformerLM

    c = MODE["serve"]
    config = load_config(c["model"]) if isinstance(c["model"], str) else ModelConfig(**c["model"])
    ckpt = WORK / "serve-ckpt"
    torch.manual_seed(0)
    save_model(TransformerLM(config), dummy_tokenizer(config.vocab_size), ckpt)
    command = gptkit("serve", "--checkpoint", ckpt, "--port", 0, "--device", DEVICE, "--max-batch", c["max_batch"])
    server = subprocess.Popen(command + ["--name", "bench"], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stderr.readline()
        if not line.startswith("serving "):
            raise RowError(f"gptkit serve did not start: {line.strip()} {server.stderr.read()[-300:]}")
        url = line.split(" at ")[1].split("/ ")[0]
        completions(url, 1, 1, c["new"])  # warm-up: the first step's graph and kernels
        rounds = {}
        for clients in c["clients"]:
            latencies, tokens, seconds = completions(url, clients, c["requests"], c["new"])
            rounds[clients] = {"tokens_per_s": tokens / seconds, "p50_s_per_token": statistics.median(latencies)}
        r.values.update(rounds=rounds, model=config.to_dict(), max_batch=c["max_batch"], requests=c["requests"])
    finally:
        server.terminate()
        server.wait(timeout=60)
    one, many = rounds[c["clients"][0]], rounds[c["clients"][-1]]
    ratio = many["tokens_per_s"] / one["tokens_per_s"]
    r.figures = (
        "; ".join(
            f"{n} client{'s' if n > 1 else ''}: {v['tokens_per_s']:,.0f} tok/s, p50 {1000 * v['p50_s_per_token']:.2f} ms/token"
            for n, v in rounds.items()
        )
        + f" ({ratio:.2f}x; {config.d_model} x {config.n_layers} layers, --max-batch {c['max_batch']}, {c['new']} tokens a request)"
    )
    r.check("every round answered", all(v["tokens_per_s"] > 0 for v in rounds.values()))
    if MODE["serve_min"] is not None:
        r.check(
            f"{c['clients'][-1]} clients at {MODE['serve_min']}x one client's tok/s or more ({ratio:.2f}x)",
            ratio >= MODE["serve_min"],
        )


def completions(url, clients, requests, new):
    """`clients` threads each sending `requests` completions one after another, whole, over plain
    HTTP (a GPU machine may have no openai client): each request's seconds per token, the tokens,
    the round's seconds."""
    latencies, tokens, lock = [], [0], threading.Lock()

    def client():
        for seed in range(requests):
            body = {
                "model": "bench",
                "prompt": "Once upon a time",
                "max_tokens": new,
                "temperature": 0.8,
                "top_p": 0.9,
                "seed": seed,
            }
            request = urllib.request.Request(
                f"{url}/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
            )
            started = time.perf_counter()
            with urllib.request.urlopen(request, timeout=300) as response:
                made = json.load(response)["usage"]["completion_tokens"]
            with lock:
                latencies.append((time.perf_counter() - started) / made)
                tokens[0] += made

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, tokens[0], time.perf_counter() - started
