"""Benchmark the training step on a GPU: ours against Hugging Face's LlamaForCausalLM and against
GPT-2 as nanoGPT defines it, at the shapes of our presets, in one process.

    python bench/train_gpu.py [--shapes tinystories-17m gpt2-small] [--steps 30] [--warmup 8] [--deterministic]

Shapes (the model preset, with the batch of the training preset of that name):
  tinystories-17m   d 512, 4 layers, 16 heads, vocab 10000, batch 64 x 256
  gpt2-small        d 768, 12 layers, 12 heads, vocab 50257, batch 32 x 1024

Contenders, each with bf16 autocast, torch.compile of the model, TF32 matmuls, gradient
clipping at 1.0 and one optimizer step per batch:
  ours       `Trainer(...).train_step()` itself: the batch from memmapped random-token shards
             through the pinned loader, forward, backward, clip, our AdamW (fused on CUDA).
  hf-llama   `LlamaForCausalLM` of the same configuration (our export's `hf_config`), SDPA
             attention, the loss from `labels` (shift_labels: the same predictions as ours),
             `torch.optim.AdamW(fused=True)`; the same batches as device tensors.
  ours-det   (--deterministic) ours again under torch's deterministic algorithms, as `gptkit train
             --deterministic` trains: what exactness costs.
  nanogpt    GPT-2 as nanoGPT's model.py defines it (written here: learned positions, LayerNorm
             with biases, one fused QKV projection, GELU MLP of 4 x d, tied head), the same
             d_model, layers, heads, vocabulary and context, `torch.optim.AdamW(fused=True)`.

Each contender: --warmup steps (compilation happens there), then --steps timed steps between two
`torch.cuda.synchronize()`; none of them reads a value back to the host inside the timed loop.
tok/s = steps * batch * context / time; MFU = tok/s * training FLOPs per token (PaLM's count as
`model.info.model_cost`: 6 per matmul weight + 12 * layers * d * context; each model its own) /
the GPU's dense bf16 peak (989 TFLOP/s for an H100); peak memory = torch.cuda.max_memory_allocated.

On a machine without CUDA it runs the same code on the CPU in float32 without compile (a check
that the script works; its figures mean nothing): `--device cpu --shapes tiny --steps 2`.
"""

import argparse
import gc
import math
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # the repository, not bench/: `from bench.common import ...`

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from bench.train import build_data  # noqa: E402
from gptkit.model.config import load_config  # noqa: E402
from gptkit.model.info import model_cost  # noqa: E402
from gptkit.runtime.device import deterministic as exactly  # noqa: E402
from gptkit.train.config import TrainConfig  # noqa: E402
from gptkit.train.processes import Dist  # noqa: E402
from gptkit.train.report import peak_bf16_flops  # noqa: E402
from gptkit.train.settle import settle  # noqa: E402
from gptkit.train.trainer import Trainer  # noqa: E402

SHAPES = {"tiny": (16, 256), "tinystories-17m": (64, 256), "gpt2-small": (32, 1024)}  # batch, context


# -- nanoGPT's GPT-2 -------------------------------------------------------------------------------


class GPT2Block(nn.Module):
    def __init__(self, d, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn, self.attn_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + self.attn_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, vocab_size, context, d, n_layers, n_heads):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab_size, d), nn.Embedding(context, d)
        self.blocks = nn.ModuleList(GPT2Block(d, n_heads) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * n_layers) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))

    def flops_per_token(self, context):
        d, layers = self.wte.weight.shape[1], len(self.blocks)
        matmul = sum(p.numel() for n, p in self.named_parameters() if p.dim() == 2 and not n.startswith("wpe"))
        return 6 * matmul + 12 * layers * d * context


# -- one step of each ------------------------------------------------------------------------------


def reference_step(model, loss_of, batches, device, compile_model):
    """A step as nanoGPT's train.py takes it, with torch's fused AdamW (weight decay 0.1 on matrices)."""
    decayed = [p for p in model.parameters() if p.dim() >= 2]
    plain = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decayed, "weight_decay": 0.1}, {"params": plain, "weight_decay": 0.0}],
        lr=6e-4,
        betas=(0.9, 0.95),
        eps=1e-8,
        fused=device.type == "cuda",
    )
    forward = torch.compile(model) if compile_model else model
    autocast = torch.autocast(device.type, torch.bfloat16, enabled=device.type == "cuda")

    def step():
        inputs, targets = next(batches)
        with autocast:
            loss = loss_of(forward, inputs, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def contenders(shape, data, run_dir, device, compile_model, deterministic=False):
    """(name, make a step function, FLOPs per token), ours first; each built only when its turn comes.
    `deterministic`: ours a second time, as --deterministic trains (`ours-det`), after ours."""
    batch, context = SHAPES[shape]
    config = load_config(shape)
    config.context_length = context

    def ours():
        here = Dist(device=device)
        return Trainer(
            settle(
                TrainConfig.of(
                    data=str(data),
                    out=str(run_dir),
                    model=shape,
                    device=device.type,
                    batch_size=batch,
                    context_length=context,
                    compile=compile_model,
                    warmup_steps=10,
                    max_steps=10**6,
                    eval_tokens=context,
                ),
                dist=here,
            ),
            here,
        )

    def hf_llama():
        from transformers import AutoConfig, AutoModelForCausalLM

        from gptkit.model.hf import hf_config

        settings = hf_config(config, config.vocab_size - 1, config.vocab_size - 1)  # bos and eot ids
        hf = AutoConfig.for_model(settings.pop("model_type"), **settings)
        with device:
            model = AutoModelForCausalLM.from_config(hf, attn_implementation="sdpa", dtype=torch.float32)

        def loss_of(forward, inputs, targets):
            targets = targets.contiguous()  # a view of the (B, T + 1) rows; HF's loss views it flat
            return forward(input_ids=inputs, labels=targets, shift_labels=targets, use_cache=False).loss

        return model.train(), loss_of

    def nanogpt():
        with device:
            model = GPT2(config.vocab_size, context, config.d_model, config.n_layers, config.n_heads)
        return model.train(), lambda forward, inputs, targets: forward(inputs, targets)

    return [
        ("ours", ours, model_cost(config).flops_per_token),
        *([("ours-det", ours, model_cost(config).flops_per_token)] if deterministic else []),
        ("hf-llama", hf_llama, model_cost(config).flops_per_token),
        ("nanogpt", nanogpt, None),
    ]


def measure(step, steps, warmup, device):
    for _ in range(warmup):
        step()
    synchronize = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    synchronize()
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="+", default=["tinystories-17m", "gpt2-small"], choices=list(SHAPES))
    parser.add_argument("--steps", type=int, default=30, help="timed steps per contender")
    parser.add_argument("--warmup", type=int, default=8, help="untimed steps first (torch.compile compiles here)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cuda", "cpu"])
    parser.add_argument("--deterministic", action="store_true", help="also ours as --deterministic trains (ours-det)")
    a = parser.parse_args()
    device = torch.device(a.device, 0) if a.device == "cuda" else torch.device("cpu")
    compile_model = device.type == "cuda"
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        name = torch.cuda.get_device_name(device)
        peak = peak_bf16_flops(name)
    else:
        name, peak = "CPU (float32, no compile: a check of the script, not a measurement)", None
    print(
        f"device: {name}; torch {torch.__version__}; bf16 peak {peak / 1e12:.0f} TFLOP/s" if peak else f"device: {name}"
    )
    print(f"{'shape':<16} {'contender':<10} {'tok/s':>12} {'MFU':>7} {'peak GiB':>9} {'ours / this':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        for shape in a.shapes:
            batch, context = SHAPES[shape]
            data = Path(tmp) / shape
            vocab = load_config(shape).vocab_size
            build_data(data, vocab, train_tokens=max(1 << 20, 4 * batch * (context + 1)))
            results = {}
            for name_, tokens_per_s, flops, memory, _ in race(
                shape, data, Path(tmp) / f"run-{shape}", device, compile_model, a.steps, a.warmup, a.deterministic
            ):
                results[name_] = tokens_per_s
                mfu = f"{100 * flops * tokens_per_s / peak:.1f}%" if peak else "n/a"
                gib = memory / 2**30 if memory is not None else float("nan")
                print(
                    f"{shape:<16} {name_:<10} {tokens_per_s:>12,.0f} {mfu:>7} {gib:>9.2f} "
                    f"{results['ours'] / tokens_per_s:>12.2f}",
                    flush=True,
                )


# What a kernel's name says it does (the first that matches), for profile()'s table by kind.
KINDS = (
    ("attention", re.compile(r"flash|fmha|attention|sdpa|mha", re.I)),
    ("matmul", re.compile(r"gemm|cutlass|xmma|nvjet|matmul|wgmma", re.I)),
    ("optimizer", re.compile(r"adam|multi_tensor|foreach", re.I)),
    ("loss", re.compile(r"cross_entropy|log_softmax|nll", re.I)),
    ("fused (triton)", re.compile(r"triton", re.I)),
    ("copy", re.compile(r"memcpy|memset|copy", re.I)),
)


def profile(step, steps, device):
    """Where `steps` steps' time goes: torch.profiler's device time per kernel (each kernel's ms a
    step, the 15 longest), per kind (KINDS), and the time the device had no kernel to run (the
    step's wall time less the kernels' sum: launch gaps and host syncs), as a dict."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiler

    cuda = device.type == "cuda"
    synchronize = torch.cuda.synchronize if cuda else (lambda: None)
    step()
    synchronize()
    with profiler(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            step()
        synchronize()
        wall = (time.perf_counter() - start) / steps
    events = [e for e in prof.key_averages() if (e.self_device_time_total if cuda else e.self_cpu_time_total) > 0]
    ms = {e.key: (e.self_device_time_total if cuda else e.self_cpu_time_total) / 1e3 / steps for e in events}
    kinds = {}
    for name, t in ms.items():
        kind = next((k for k, pattern in KINDS if pattern.search(name)), "other")
        kinds[kind] = kinds.get(kind, 0.0) + t
    busy = sum(ms.values())
    top = sorted(ms.items(), key=lambda kv: -kv[1])[:15]
    return {
        "step_ms": 1000 * wall,
        "busy_ms": busy,
        "idle_ms": max(1000 * wall - busy, 0.0) if cuda else None,
        "kinds_ms": dict(sorted(kinds.items(), key=lambda kv: -kv[1])),
        "kernels_ms": dict(top),
    }


def race(shape, data, run_dir, device, compile_model, steps, warmup, deterministic=False):
    """Each contender's training step at `shape`, one after the other on `device`: yields (name,
    tokens/s, FLOPs per token, peak memory in bytes (None off CUDA), ours' trainer), while the
    contender is still built (the trainer's batches feed the references)."""
    batch, context = SHAPES[shape]
    trainer = None
    for name, build, flops in contenders(shape, data, run_dir, device, compile_model, deterministic):
        if trainer is not None:  # the references read the trainer's batches; its model and optimizer go first
            trainer.model = trainer.parallel = trainer.optimizers = trainer.checkpoints = None
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
        if name == "ours-det":  # compiled again, under deterministic algorithms (as train.run trains it)
            torch._dynamo.reset()
        with exactly(name == "ours-det"):
            if name.startswith("ours"):
                trainer = build()
                step = trainer.train_step
            else:
                model, loss_of = build()
                flops = flops or model.flops_per_token(context)
                step = reference_step(model, loss_of, trainer.batches, device, compile_model)
            seconds = measure(step, steps, warmup, device)
        memory = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
        yield name, steps * batch * context / seconds, flops, memory, trainer
        step = model = None


if __name__ == "__main__":
    main()
