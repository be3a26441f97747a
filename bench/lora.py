"""LoRA against full fine-tuning, each run as a user runs it (`gptkit train --init-from`, with and
without `--lora-rank`):

1. memory: the peak resident memory of a few training steps of an imported model, transformers'
   Qwen2 at a small config (random weights, GPT-2's tokenizer), beside what `training_memory`
   estimates for each;
2. quality: the validation loss each reaches on the chat fine-tune of docs/chat.md at equal time
   (--max-time), idle and beside two busy processes.

    python bench/lora.py [--shared ../shared/data] [--work /tmp/lora-bench] [--time 60s] [--rank 8]

Prints one table per part, the ratios LoRA / full, and the load.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from common import busy_processes, cpu, load_average

GPTKIT = str(Path(sys.executable).parent / "gptkit")
# transformers' Qwen2 at a small size: 8 layers of 512, grouped-query attention, tied embeddings
QWEN2 = dict(
    hidden_size=512,
    intermediate_size=1536,
    num_hidden_layers=8,
    num_attention_heads=8,
    num_key_value_heads=2,
    max_position_embeddings=512,
    tie_word_embeddings=True,
)
STEP = ["--device", "cpu", "--eval-interval", "0", "--eval-tokens", "4096", "--checkpoint-interval", "0"]


def gptkit(*args):
    """Run `gptkit ARGS`; its output."""
    result = subprocess.run([GPTKIT, *map(str, args)], capture_output=True, text=True)
    if result.returncode:
        sys.exit(f"error: gptkit {' '.join(map(str, args))}:\n{result.stderr}")
    return result.stdout + result.stderr


def proc_mb(field):
    """This process's VmRSS or VmHWM (its peak) in MB."""
    status = Path("/proc/self/status").read_text()
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith(field + ":")) / 1024


def child_train(args):
    """`gptkit train ARGS` in this process, printing as JSON the resident memory when the loop starts
    (the model, its frozen weights or not, and AdamW's state are allocated by then) and the peak of the
    steps (read when the first checkpoint starts to be written, which copies the tensors it writes)."""
    from gptkit.train.checkpointing import Checkpoints
    from gptkit.train.cli import cli
    from gptkit.train.trainer import Trainer

    seen = {}
    fit, save = Trainer.fit, Checkpoints.save

    def fit_measured(self):
        seen["loop_start"] = proc_mb("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM from here on: the steps' peak
        return fit(self)

    def save_measured(self):
        seen.setdefault("steps_peak", proc_mb("VmHWM"))
        return save(self)

    Trainer.fit, Checkpoints.save = fit_measured, save_measured
    cli(args, prog_name="gptkit train", standalone_mode=False)
    print(json.dumps(seen))


def measured_train(*args):
    """(when the loop starts, the steps' peak) in MB of `gptkit train ARGS`, run in a child, and its output."""
    cmd = [sys.executable, __file__, "_train", *map(str, args)]
    # glibc's malloc raises its mmap threshold as large blocks are freed, then keeps freed blocks in the heap:
    # a fixed threshold returns every block of 128 KiB or more when it is freed, so the resident set follows
    # what is allocated
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if result.returncode:
        sys.exit(f"error: {' '.join(cmd)}:\n{result.stderr}")
    seen = json.loads(result.stdout.splitlines()[-1])
    return seen["loop_start"], seen["steps_peak"], result.stdout + result.stderr


def imported_qwen2(shared, work):
    """A checkpoint of transformers' Qwen2 at QWEN2's size, through `gptkit model import-hf`."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from gptkit.tokenizer import Tokenizer

    hf = work / "qwen2-hf"
    if not hf.exists():
        tokenizer = Tokenizer.from_gpt2_files(shared / "gpt2_vocab.json", shared / "gpt2_merges.txt")
        eot = tokenizer.special_tokens["<|endoftext|>"]
        torch.manual_seed(0)
        config = Qwen2Config(vocab_size=tokenizer.vocab_size, bos_token_id=eot, eos_token_id=eot, **QWEN2)
        Qwen2ForCausalLM(config).save_pretrained(hf)
        tokenizer.save(hf / "tokenizer.json")
    checkpoint = work / "qwen2"
    gptkit("model", "import-hf", "--from", hf, "--out", checkpoint, "--overwrite")
    return checkpoint


def memory(shared, work, rank):
    from gptkit.model.checkpoint import CheckpointReader
    from gptkit.model.config import ModelConfig
    from gptkit.model.info import training_memory
    from gptkit.model.lora import LoraConfig

    checkpoint = imported_qwen2(shared, work)
    data = work / "shakespeare-gpt2"
    if not data.exists():
        gptkit(
            "pretokenize",
            "--tokenizer",
            checkpoint / "tokenizer.json",
            "--input",
            shared / "tinyshakespeare.txt",
            "--out",
            data,
        )
    model = ModelConfig.from_dict(CheckpointReader(checkpoint).config["model"])
    print(
        f"\n## 1. Memory: 4 steps on imported Qwen2 ({model.d_model} x {model.n_layers}, vocab "
        f"{model.vocab_size:,}), float32 on the CPU (the resident set of the process)"
    )
    print("| batch | run | when the loop starts (MB) | the steps' peak (MB) | estimate (MB) | what trains |")
    print("|---|---|---:|---:|---:|---|")
    for batch, context in ((4, 256), (1, 64)):
        rows = []
        for name, extra in (("full", []), (f"LoRA r{rank}", ["--lora-rank", rank])):
            out = work / "memory" / name.replace(" ", "-")
            shutil.rmtree(out, ignore_errors=True)
            start, peak, output = measured_train(
                "--init-from",
                checkpoint,
                "--data",
                data,
                "--out",
                out,
                "--max-steps",
                4,
                "--batch-size",
                batch,
                "--context-length",
                context,
                *STEP,
                *extra,
            )
            adapters = LoraConfig.of(model, rank, None, None).params(model) if extra else None
            estimate = sum(training_memory(model, batch, 4, context, adapters=adapters).values()) / 2**20
            trained = next(line for line in output.splitlines() if line.startswith("training ")).split(" on cpu")[0]
            print(f"| {batch} x {context} | {name} | {start:,.0f} | {peak:,.0f} | {estimate:,.0f} | {trained} |")
            rows.append((start, peak, estimate))
        (start_full, peak_full, est_full), (start_lora, peak_lora, est_lora) = rows
        print(
            f"| {batch} x {context} | LoRA / full | {start_lora / start_full:.3f} | {peak_lora / peak_full:.3f} "
            f"({peak_full - peak_lora:,.0f} MB less) | {est_lora / est_full:.3f} | |",
            flush=True,
        )


def chat_base(work):
    """docs/chat.md's data, tokenizer and base model (2 minutes of stories)."""
    if (work / "chat" / "base" / "latest").exists():
        return work / "chat"
    root = work / "chat"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    gptkit("stories", "--out", root / "stories.txt", "--size", "2MB", "--seed", 0)
    gptkit("stories", "--chat", "--out", root / "chats.jsonl", "--size", "1MB", "--seed", 1)
    gptkit(
        "tokenizer",
        "train",
        "--input",
        root / "stories.txt",
        "--vocab-size",
        1024,
        "--chat",
        "--out",
        root / "tok.json",
    )
    gptkit("pretokenize", "--tokenizer", root / "tok.json", "--input", root / "stories.txt", "--out", root / "stories")
    gptkit(
        "pretokenize",
        "--chat",
        "--tokenizer",
        root / "tok.json",
        "--input",
        root / "chats.jsonl",
        "--out",
        root / "chats",
    )
    small = {
        "vocab_size": 1024,
        "context_length": 128,
        "d_model": 64,
        "n_layers": 2,
        "n_heads": 4,
        "d_ff": 192,
        "tie_embeddings": True,
    }
    (root / "small.json").write_text(json.dumps(small))
    gptkit(
        "train",
        "--data",
        root / "stories",
        "--out",
        root / "base",
        "--model",
        root / "small.json",
        "--max-time",
        "2m",
        "--device",
        "cpu",
    )
    return root


def quality(work, seconds, rank):
    root = chat_base(work)
    print(f"\n## 2. Chat fine-tune at equal time ({seconds} each), docs/chat.md's data and base model")
    print("| load | run | steps | final val loss (nats/token) | load average |")
    print("|---|---|---:|---:|---:|")
    for busy in (0, 2):
        losses = {}
        with busy_processes(busy):
            for name, extra in (("full", []), (f"LoRA r{rank}", ["--lora-rank", rank])):
                out = root / f"sft-{busy}-{name.replace(' ', '-')}"
                shutil.rmtree(out, ignore_errors=True)
                gptkit(
                    "train",
                    "--init-from",
                    root / "base" / "latest",
                    "--data",
                    root / "chats",
                    "--out",
                    out,
                    "--max-time",
                    seconds,
                    "--batch-size",
                    16,
                    "--device",
                    "cpu",
                    *extra,
                )
                records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
                last = [r for r in records if "val_loss" in r][-1]
                losses[name] = last["val_loss"]
                load = "idle" if not busy else f"{busy} busy processes"
                print(
                    f"| {load} | {name} | {last['step']:,} | {last['val_loss']:.4f} | {load_average():.2f} |",
                    flush=True,
                )
        full, lora = losses.values()
        print(f"LoRA / full ({'idle' if not busy else f'{busy} busy'}): val loss {lora / full:.3f}")


def main():
    if sys.argv[1:2] == ["_train"]:
        return child_train(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--work", type=Path, default=Path("/tmp/lora-bench"))
    parser.add_argument("--time", default="60s", help="each fine-tune's --max-time")
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--part", choices=("memory", "quality", "both"), default="both")
    a = parser.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    print(f"machine: {cpu()}; load average at the start {load_average():.2f}")
    if a.part in ("memory", "both"):
        memory(a.shared, a.work, a.rank)
    if a.part in ("quality", "both"):
        quality(a.work, a.time, a.rank)


if __name__ == "__main__":
    main()
