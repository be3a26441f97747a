"""Benchmark sampling (`gptkit.model.generate`) against Hugging Face `transformers` on the same weights.

    python bench/sample.py [--threads 2] [--new-tokens 256] [--prompt-tokens 16] [--repeat 5]

A random Llama-style model (hidden 256, 4 layers, 4 heads, d_ff 688, vocabulary 10000, context
512, untied embeddings; seeded) is saved as our checkpoint (`save_model`, with a dummy
10000-token tokenizer: the 256 bytes, 9743 two-byte merges and <|endoftext|>) and exported with
`export_hf`; `transformers.LlamaForCausalLM.from_pretrained` loads the export (float32, CPU).

Four modes, each in a fresh child process (this script, hidden sub-command `_one`), batch 1,
one fixed random prompt, temperature 0.8, top-p 0.9, no top-k, exactly --new-tokens new tokens
(end-of-text never stops a run):

  ours            `gptkit.model.generate.generate`: prefill, then one token per step with the KV cache
  hf              `LlamaForCausalLM.generate(do_sample=True, use_cache=True)`
  ours_nocache    the naive loop: every step runs our model's full forward over the whole
                  sequence so far and samples from the last logits with `gptkit.model.generate.next_tokens`
  hf_nocache      `LlamaForCausalLM.generate(do_sample=True, use_cache=False)`

A run is timed from the prompt to the last new token (prefill included); tokens/s is new tokens
over that time. Each timed run is in a fresh process, after one warm-up run there; the modes take
turns, --repeat rounds of all four, so that slow spells of the machine hit all alike; medians
(and the range) over the rounds. Another child checks that
greedy decoding (32 new tokens) gives the same ids with ours (with and without cache) and HF;
the exit status is 1 if not.
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # the repository, not bench/: `from bench.common import ...`

from bench.common import EOT, run_child, torch_machine  # noqa: E402 (after the path is set)

MODEL = dict(vocab_size=10000, context_length=512, d_model=256, n_layers=4, n_heads=4, d_ff=688, tie_embeddings=False)
MODES = ("ours", "hf", "ours_nocache", "hf_nocache")
TEMPERATURE, TOP_P, TOP_K = 0.8, 0.9, None
GREEDY_TOKENS = 32


# -- the checkpoint ------------------------------------------------------------------------------


def dummy_tokenizer(vocab_size):
    """A valid byte-level BPE tokenizer of `vocab_size` tokens: the 256 bytes, then the first
    two-byte pairs (0,0), (0,1), ... as merges, then <|endoftext|>. Its content does not matter here."""
    from gptkit.tokenizer import Tokenizer

    pairs = [(a, b) for a in range(256) for b in range(256)][: vocab_size - 257]
    vocab = [bytes([i]) for i in range(256)] + [bytes(p) for p in pairs] + [EOT.encode()]
    return Tokenizer(vocab, pairs, {EOT: vocab_size - 1})


def build(tmp, seed):
    """Our checkpoint in tmp/ckpt and its HF export in tmp/hf."""
    import torch

    from gptkit.model.checkpoint import save_model
    from gptkit.model.config import ModelConfig
    from gptkit.model.hf import export_hf
    from gptkit.model.model import TransformerLM

    torch.manual_seed(seed)
    model = TransformerLM(ModelConfig(**MODEL))
    save_model(model, dummy_tokenizer(MODEL["vocab_size"]), tmp / "ckpt")
    export_hf(tmp / "ckpt", tmp / "hf")


# -- child: one mode -----------------------------------------------------------------------------


def load(tmp, who):
    import torch

    if who == "ours":
        from gptkit.model.checkpoint import load_model

        return load_model(tmp / "ckpt")[0].eval()
    from transformers import LlamaForCausalLM
    from transformers.utils import logging

    logging.disable_progress_bar()
    model = LlamaForCausalLM.from_pretrained(tmp / "hf", dtype=torch.float32).eval()
    model.generation_config.eos_token_id = None  # never stop early: exactly max_new_tokens, no EOS masking
    model.generation_config.bos_token_id = None
    return model


def prompt_ids(n, seed):
    import torch

    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, MODEL["vocab_size"] - 1, (n,), generator=g).tolist()  # no end-of-text


def ours_cache(model, prompt, n, temperature, seed):
    from gptkit.model.generate import generate

    return [
        int(t)
        for t in generate(
            model, prompt, max_new_tokens=n, num_samples=1, temperature=temperature, top_p=TOP_P, top_k=TOP_K, seed=seed
        )
    ]


def ours_nocache(model, prompt, n, temperature, seed):
    import torch

    from gptkit.model.generate import next_tokens

    generator = torch.Generator().manual_seed(seed)
    with torch.inference_mode():
        ids = torch.tensor([prompt])
        for _ in range(n):
            logits = model(ids)[0][:, -1]
            ids = torch.cat([ids, next_tokens(logits, temperature, TOP_P, TOP_K, generator)[:, None]], dim=1)
    return ids[0, len(prompt) :].tolist()


def hf(model, prompt, n, temperature, seed, use_cache):
    import torch

    torch.manual_seed(seed)
    sampling = (
        dict(do_sample=True, temperature=temperature, top_p=TOP_P, top_k=0)
        if temperature
        else dict(do_sample=False, temperature=None, top_p=None, top_k=None)
    )
    with torch.inference_mode():
        input_ids = torch.tensor([prompt])
        out = model.generate(
            input_ids,
            attention_mask=torch.ones_like(input_ids),
            max_new_tokens=n,
            min_new_tokens=n,
            use_cache=use_cache,
            eos_token_id=None,
            pad_token_id=0,
            **sampling,
        )
    return out[0, len(prompt) :].tolist()


def run_mode(mode, model, prompt, n, temperature, seed):
    if mode == "ours":
        return ours_cache(model, prompt, n, temperature, seed)
    if mode == "ours_nocache":
        return ours_nocache(model, prompt, n, temperature, seed)
    return hf(model, prompt, n, temperature, seed, use_cache=mode == "hf")


def child_main(argv):
    import torch

    parser = argparse.ArgumentParser(prog="bench/sample.py _one")
    parser.add_argument("mode", choices=[*MODES, "greedy"])
    parser.add_argument("tmp", type=Path)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--new-tokens", type=int)
    parser.add_argument("--prompt-tokens", type=int)
    parser.add_argument("--repeat", type=int)
    parser.add_argument("--seed", type=int)
    a = parser.parse_args(argv)
    torch.set_num_threads(a.threads)
    prompt = prompt_ids(a.prompt_tokens, a.seed)
    if a.mode == "greedy":
        ours, ref = load(a.tmp, "ours"), load(a.tmp, "hf")
        ids = {
            mode: run_mode(mode, ours if mode.startswith("ours") else ref, prompt, GREEDY_TOKENS, 0, a.seed)
            for mode in ("ours", "ours_nocache", "hf")
        }
        print(json.dumps(ids))
        return
    model = load(a.tmp, a.mode.split("_")[0])
    seconds = []
    for r in range(1 + a.repeat):  # the first is the warm-up
        start = time.perf_counter()
        ids = run_mode(a.mode, model, prompt, a.new_tokens, TEMPERATURE, a.seed + r)
        elapsed = time.perf_counter() - start
        if len(ids) != a.new_tokens:
            sys.exit(f"error: {a.mode} made {len(ids)} tokens, not {a.new_tokens}")
        if r:
            seconds.append(elapsed)
    print(json.dumps({"seconds": seconds}))


# -- parent --------------------------------------------------------------------------------------


def main():
    if sys.argv[1:2] == ["_one"]:
        return child_main(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="torch threads (torch.set_num_threads), both models")
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--prompt-tokens", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=5, help="rounds: timed runs per mode; medians are reported")
    parser.add_argument("--seed", type=int, default=0)
    a = parser.parse_args()
    if a.prompt_tokens + a.new_tokens > MODEL["context_length"]:
        parser.error(f"--prompt-tokens + --new-tokens must fit the context ({MODEL['context_length']})")
    print(torch_machine(a.threads))
    print(
        f"model: random Llama-style, hidden {MODEL['d_model']}, {MODEL['n_layers']} layers, {MODEL['n_heads']} heads, "
        f"d_ff {MODEL['d_ff']}, vocab {MODEL['vocab_size']}, context {MODEL['context_length']}, untied, float32, CPU"
    )
    print(
        f"batch 1, prompt {a.prompt_tokens} tokens, {a.new_tokens} new tokens, temperature {TEMPERATURE}, "
        f"top-p {TOP_P}, top-k none; {a.repeat} rounds of the 4 modes, each run in a fresh process after a warm-up run (medians)"
    )
    common = [
        "--threads",
        a.threads,
        "--new-tokens",
        a.new_tokens,
        "--prompt-tokens",
        a.prompt_tokens,
        "--repeat",
        1,
        "--seed",
        a.seed,
    ]
    with tempfile.TemporaryDirectory(prefix="bench-sample-") as tmp:
        build(Path(tmp), a.seed)
        greedy = run_child(__file__, ["greedy", tmp, *common])
        runs = {mode: [] for mode in MODES}
        for r in range(a.repeat):
            for mode in MODES:
                runs[mode] += run_child(__file__, [mode, tmp, *common])["seconds"]
                print(f"  round {r + 1}/{a.repeat}: {mode} {runs[mode][-1]:.3f} s", file=sys.stderr)
    seconds = {mode: statistics.median(s) for mode, s in runs.items()}
    same = greedy["ours"] == greedy["hf"] == greedy["ours_nocache"]
    print("\n| mode | ms/token | range, ms/token | tokens/s | speed vs ours (cache) |\n|---|---:|---:|---:|---:|")
    for mode in MODES:
        s, lo, hi = (1000 * x / a.new_tokens for x in (seconds[mode], min(runs[mode]), max(runs[mode])))
        print(
            f"| {mode} | {s:.2f} | {lo:.2f}-{hi:.2f} | {a.new_tokens / seconds[mode]:.1f} | {seconds['ours'] / seconds[mode]:.2f} |"
        )
    print(f"\nours (cache) / HF (cache), tokens/s: {seconds['hf'] / seconds['ours']:.2f} (target >= 2.0)")
    print(f"ours (cache) / ours (no cache), tokens/s: {seconds['ours_nocache'] / seconds['ours']:.2f} (target >= 5)")
    print(f"HF (cache) / HF (no cache), tokens/s: {seconds['hf_nocache'] / seconds['hf']:.2f}")
    print(
        f"greedy ids identical: {'yes' if same else 'no'} (ours with cache, ours without, HF with cache; "
        f"{GREEDY_TOKENS} new tokens)"
    )
    if not same:
        for mode, ids in greedy.items():
            print(f"  {mode}: {ids}")
        sys.exit(1)


if __name__ == "__main__":
    main()
