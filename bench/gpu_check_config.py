"""What bench/gpu_check.py runs and where, read once as the check (or a row's child process)
starts: GPU_CHECK_OUT and what the check writes there, the mode (a GPU's shapes, limits and
targets, or the dry run's: GPU_CHECK_DRY), the rows with their targets, and their schedule,
cut to the rows GPU_CHECK_ROWS names (an unknown one: one line, before anything runs)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

DRY = os.environ.get("GPU_CHECK_DRY", "") not in ("", "0")
# absolute for the rows, which run in ROOT; not resolved here: a path that cannot be followed is
# main's to refuse in one line (out_refused)
OUT = Path(os.path.abspath(os.environ.get("GPU_CHECK_OUT") or "out/gpu-check"))
WORK, ROWS, LOGS = OUT / "work", OUT / "rows", OUT / "logs"
# The file that marks GPU_CHECK_OUT as the check's own output, which a later check replaces, and
# what the check writes beside it; anything else there is a user's, which it never deletes.
MARKER, OUT_FORMAT = OUT / "gptkit-gpu-check.json", "gptkit-gpu-check-output"
OWN = {MARKER.name, "report.json", "report.json.tmp", WORK.name, ROWS.name, LOGS.name}
OWN_FILES = {LOGS: (".log",), ROWS: (".json", ".json.tmp")}  # what the check writes in these (work/ is the rows' own)
DATA = WORK / "data" / "shards"
TOKENIZER = WORK / "data" / "tokenizer.json"
CORPUS = WORK / "data" / "stories.txt"
DEVICE = "cpu" if DRY else "cuda"
H100_PEAK = 989e12
STARTED = time.monotonic()  # the budget counts from here

MODES = {
    "gpu": dict(
        budget_s=590,
        stories="10MB",
        vocab=2048,
        limits={
            "setup": 60,
            "gpu-tier": 240,
            "resume": 150,
            "fsdp": 170,
            "import-eval": 70,
            "train-step": 250,
            "recipe": 170,
            "sampling": 120,
            "serve": 100,
        },
        train_step=dict(shape="gpt2-small", warmup=5, steps=20, loader_rounds=3, loader_steps=10, profile_steps=3),
        mfu_min=0.50,
        ahead=1.05,  # ours' tok/s over each reference's, at least
        loader_max=0.02,
        run=dict(
            model={"context_length": 512, "d_model": 384, "n_layers": 6, "n_heads": 6, "d_ff": 1024},
            batch=32,
            context=512,
            steps=300,
            warmup=10,
            stop_after=30,
            sample_interval=100,
            sample_tokens=32,
            eval_tokens=8192,
        ),
        fsdp_tail=50,
        fsdp_tol=0.02,
        memory_max=1.0,
        recipe_budget="2m",
        recipe_s=120,
        on_time=0.05,
        hf=dict(
            hidden_size=384,
            intermediate_size=1024,
            num_hidden_layers=6,
            num_attention_heads=6,
            num_key_value_heads=2,
            max_position_embeddings=1024,
        ),
        text_bytes=50_000,
        eval_rel=0.01,
        sampling=dict(model="gpt2-small", prompt=16, new=128, batches=(1, 16)),
        sampling_min=2.0,
        serve=dict(model="gpt2-small", clients=(1, 8), requests=4, new=128, max_batch=8),
        serve_min=5.0,
    ),
    "dry": dict(
        budget_s=480,
        stories="1MB",
        vocab=512,
        limits={
            "setup": 60,
            "gpu-tier": 150,
            "resume": 120,
            "fsdp": 120,
            "import-eval": 90,
            "train-step": 120,
            "recipe": 90,
            "sampling": 90,
            "serve": 90,
        },
        train_step=dict(
            shape="tiny", batch=2, context=64, warmup=1, steps=2, loader_rounds=2, loader_steps=2, profile_steps=1
        ),
        mfu_min=None,
        ahead=None,
        loader_max=0.5,
        run=dict(
            model={"context_length": 64, "d_model": 32, "n_layers": 2, "n_heads": 2, "d_ff": 64},
            batch=4,
            context=64,
            steps=120,
            warmup=2,
            stop_after=10,
            sample_interval=40,
            sample_tokens=8,
            eval_tokens=512,
        ),
        fsdp_tail=20,
        fsdp_tol=0.02,
        memory_max=1.5,
        recipe_budget="8s",
        recipe_s=8,
        on_time=0.5,
        hf=dict(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
        ),
        text_bytes=10_000,
        eval_rel=0.01,
        sampling=dict(
            model={
                "vocab_size": 512,
                "context_length": 128,
                "d_model": 64,
                "n_layers": 2,
                "n_heads": 2,
                "d_ff": 176,
                "tie_embeddings": True,
            },
            prompt=8,
            new=16,
            batches=(1, 16),
        ),
        sampling_min=None,
        serve=dict(
            model={"vocab_size": 512, "context_length": 64, "d_model": 32, "n_layers": 2, "n_heads": 2, "d_ff": 64},
            clients=(1, 8),
            requests=1,
            new=8,
            max_batch=8,
        ),
        serve_min=None,
    ),
}
MODE = MODES["dry" if DRY else "gpu"]

# (name, title, the target as printed); the table's order. train-step's child also writes loader's row.
ROW_TABLE = [
    ("gpu-tier", "pytest -m gpu", "all pass, none skipped" + (" (dry: skips allowed)" if DRY else "")),
    (
        "train-step",
        "train step, GPT-2 small",
        "ours >= 50% MFU and >= 1.05x the tok/s of hf-llama and nanogpt"
        + (" (dry: code path only: tok/s > 0)" if DRY else ""),
    ),
    ("resume", "train --nproc-per-node 1 --deterministic: SIGTERM, --resume", "losses equal the uninterrupted run's"),
    (
        "fsdp",
        "the same, --parallel fsdp --activation-checkpointing",
        f"resume as row 3, samples, last {MODE['fsdp_tail']} "
        f"steps' mean loss within {MODE['fsdp_tol']} of DDP's, peak/rank < DDP's"
        + (" (dry: RSS <= 1.5x)" if DRY else ""),
    ),
    (
        "recipe",
        f"recipe, --max-time {MODE['recipe_budget']}",
        f"the recipe and the loop within {MODE['on_time']:.0%} of the budget" + (" (dry: looser)" if DRY else ""),
    ),
    (
        "import-eval",
        "model import-hf (bf16), eval text",
        f"{DEVICE if not DRY else 'device'} loss within {MODE['eval_rel']:.0%} of the CPU's",
    ),
    (
        "sampling",
        "sampling vs HF generate (static cache)",
        "ours >= 2x HF's tok/s at batch 1 and 16" + (" (dry: not judged)" if DRY else ""),
    ),
    (
        "loader",
        "loader's cost in a step",
        f"under {MODE['loader_max']:.0%}" + (" (dry: CPU loads synchronously)" if DRY else ""),
    ),
    (
        "serve",
        "gptkit serve, 1 and 8 clients",
        "8 clients >= 5x one client's tok/s" + (" (dry: not judged)" if DRY else ""),
    ),
]
TARGETS = {name: target for name, _, target in ROW_TABLE}
NUMBERS = {name: i for i, (name, _, _) in enumerate(ROW_TABLE, 1)}  # kept where GPU_CHECK_ROWS picks some
# Phases one after the other, each a list of lanes that run side by side, each lane's items in order.
# On a GPU: first the rows whose figures are verdicts and memory, which other processes on the device
# do not change, side by side; then the rows whose figures are speeds, alone. The dry run's figures
# are no speeds: its rows all run side by side, in four lanes.
# (fsdp compares itself with resume's DDP run at its end: it waits there for resume's result.)
PLAN = (
    [
        [
            ["gpu-tier", "train-step", "sampling", "serve"],
            ["setup", "resume"],
            ["wait-setup", "fsdp"],
            ["wait-setup", "import-eval", "recipe"],
        ]
    ]
    if DRY
    else [
        [["gpu-tier"], ["setup", "resume"], ["wait-setup", "fsdp"], ["wait-setup", "import-eval"]],
        [["train-step"]],
        [["recipe"]],
        [["sampling"]],
        [["serve"]],
    ]
)
NEEDS_DATA = {"resume", "fsdp", "import-eval", "recipe"}
# GPU_CHECK_ROWS="resume sampling": those rows alone (a rerun of what failed within a device's time),
# with the rows they come with: fsdp compares with resume's DDP run; train-step writes loader's row.
ONLY = set(os.environ.get("GPU_CHECK_ROWS", "").replace(",", " ").split())
COMES_WITH = {"fsdp": {"resume"}, "loader": {"train-step"}, "train-step": {"loader"}}
if ONLY:
    unknown = ONLY - {name for name, _, _ in ROW_TABLE}
    if unknown:
        sys.exit(
            f"Error: GPU_CHECK_ROWS: no row {', '.join(sorted(unknown))} "
            f"(rows: {', '.join(name for name, _, _ in ROW_TABLE)})"
        )
    ONLY |= set().union(*(COMES_WITH.get(name, set()) for name in ONLY))
    ROW_TABLE = [row for row in ROW_TABLE if row[0] in ONLY]
    keep = ONLY | ({"setup", "wait-setup"} if ONLY & NEEDS_DATA else set())
    PLAN = [[lane for lane in ([item for item in lane if item in keep] for lane in phase) if lane] for phase in PLAN]
MIN_START_S = 20  # a row left less than this is not started (SKIP)
