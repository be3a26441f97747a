"""`make gpu-check` (issue 31): every GPU promise of gptkit in one call that gives a verdict the
first time it runs, in at most 10 minutes on one H100, startup included.

    GPU_CHECK_OUT=out/gpu-check python bench/gpu_check.py      # on a CUDA machine
    GPU_CHECK_DRY=1 python bench/gpu_check.py                  # the dry run: CPU, tiny shapes (CI)
    GPU_CHECK_ROWS="sampling fsdp" python bench/gpu_check.py   # those rows alone (a rerun)

It prints one table, a row per check (verdict PASS / FAIL / SKIP, the figures, the target, the
seconds), and writes it as JSON to GPU_CHECK_OUT/report.json, with each row's log in
GPU_CHECK_OUT/logs/ and its files in GPU_CHECK_OUT/work/. GPU_CHECK_OUT is the check's own, as
`gptkit model export-hf`'s --out is: marked by the file gptkit-gpu-check.json, it is replaced at
the start (report.json, work/, rows/, logs/), and only where it is new, empty or an earlier
check's holding nothing else (logs/ only its .log files, rows/ only its .json files); a directory
of other files, or a file, is refused in one line, exit status 2, and left as it is. Exit status:
0 when every row passes, 1 otherwise, 2 without CUDA (one line; GPU_CHECK_DRY=1 runs the dry run
instead) or for such a GPU_CHECK_OUT. No network: the data is
`gptkit stories` -> `gptkit tokenizer train` -> `gptkit pretokenize` (10 MB, 2,048 tokens, as
`make demo`), the models are random, built from configs.

The rows (each a child process of its own, in its own process group, killed at its time limit;
a row that fails or runs out of time leaves the others to run):

  1 gpu-tier     `pytest -m gpu tests/gpu`: all pass, none skipped.
  2 train-step   the training step at GPT-2 small (bf16 autocast, torch.compile, batch 32 x 1024)
                 with bench/train_gpu.py's own contenders in one process: ours (Trainer.train_step),
                 ours again under deterministic algorithms (ours-det: what --deterministic costs),
                 HF LlamaForCausalLM of the same size, a nanoGPT-style GPT-2; tokens/s and MFU =
                 tokens/s x FLOPs per token / 989e12 (H100 SXM, dense bf16). FLOPs per token: 6 per
                 matmul weight (6N, N without the embedding lookup; a tied head counted once) + 12 x
                 layers x d x context for attention (PaLM's count, gptkit.model.info.model_cost; the
                 nanoGPT model by the same rule). Then torch.profiler over 3 of ours' steps: the
                 device's ms a step by kind of kernel and the longest kernels, and its idle time
                 (figures and values: where the next gain is). Target: ours >= 50% MFU and >= 1.05x
                 the tok/s of both references.
  3 resume       `gptkit train --nproc-per-node 1 --deterministic` on the stories shards (a
                 6-layer d 384 model, 32 x 512 tokens, 300 steps, a loss logged every step): the run
                 uninterrupted; the same run stopped by SIGTERM mid-run and `--resume`d. Target: its
                 losses equal the uninterrupted run's, bit for bit. Without --deterministic compiled
                 CUDA training does not repeat itself (Inductor's embedding backward adds with
                 atomics, and its kernels are chosen by timing them): two runs of this row differed
                 by up to 0.19 at a step before the stop on an H200.
  4 fsdp         the same with `--parallel fsdp --activation-checkpointing` (both rows sample
                 every 100 steps: `--sample-interval`): resume as in 3, the samples recorded, the
                 peak memory per rank below DDP's, and the run ending where row 3's DDP run ends:
                 the mean loss of the last 50 steps within 0.02 of DDP's. FSDP computes in bf16
                 from bf16 copies of the weights, root and residual stream included, where DDP's
                 autocast keeps float32 outside the matrix products: a different arithmetic, whose
                 early losses were 0.03-0.07 above DDP's (means over steps 11-100, up to 0.13 at a
                 step) in three runs on an H200, with and without activation checkpointing, and
                 0.002-0.003 over the last 50 steps; the largest gap is reported, not judged.
                 The trainer records no memory figure (metrics.jsonl and the log have none), so
                 each training process reports torch.cuda.max_memory_allocated() of its device at
                 exit through a sitecustomize.py this script puts on PYTHONPATH for these runs
                 (the dry run: the process's peak RSS).
  5 recipe       `gptkit train --data D --out R --max-time 2m` (the recipe), run and read by
                 bench/time_budget.py: its shape, steps and held-out bits per byte, and whether
                 the training loop ended within 5% of the budget.
  6 import-eval  a random bf16 LlamaForCausalLM (d 384, 6 layers, GQA 6/2 heads, the stories
                 tokenizer as tokenizer.json) saved with save_pretrained, `gptkit model import-hf`,
                 then `gptkit eval text` of 50 kB of stories on the CPU (float32) and on the GPU
                 (bf16 autocast): losses within 1% of each other; and with --adapt on the GPU
                 (copies of the model stepped with SGD under autocast): at most the model
                 alone's bits plus the mixture's log 4 nats.
  7 sampling     tokens/s of a gptkit.model.generate.Decoder as `gptkit sample` runs it (bf16
                 linear weights under bf16 autocast, each step a CUDA graph kept from the warm-up
                 run) against HF `generate` with `cache_implementation="static"` (which
                 transformers compiles on CUDA) on the same random GPT-2-small-sized Llama (our
                 checkpoint, exported with export_hf; HF with bf16 weights), batch 1 and 16, 16
                 prompt + 128 new tokens, temperature 0.8, top-p 0.9, after a warm-up run each;
                 tokens/s counts the prefill's time. Target: ours >= 2x HF at both.
  8 loader       in row 2's process, on its compiled trainer: timed blocks of steps drawing
                 batches from the loader (memmapped shards, pinned, a thread ahead) against
                 blocks on one cached device batch, alternating; medians. Target: under 2%.
  9 serve        `gptkit serve --max-batch 8` on the device with a random GPT-2-small-sized Llama:
                 1 client, then 8, each sending 4 completions of 128 tokens one after another,
                 whole, over plain HTTP (a GPU machine may lack the openai client); tokens/s of the
                 round and p50 seconds per token. Target: 8 clients >= 5x one client's tokens/s.

Schedule (GPU): the data first (a few seconds), then rows 1, 3, 4 and 6 side by side (their
figures are verdicts and memory, which other processes on the GPU do not change; 4 waits at its
end for 3's DDP run to compare with), then 2 (+8), 5, 7 and 9 one at a time, alone (their figures
are speeds). Time limits: 1: 240 s, 3: 150, 4: 170, 6: 70, 2+8: 250, 5: 170, 7: 120, 9: 100, and
the whole run at most GPU_CHECK_BUDGET seconds (590 by default): a row gets what is left at most,
and one left under 20 s is SKIP. These limits are estimates: see bench/README.md.

Nothing is installed (bench/gpu_check_needs.py): `make gpu-check` runs this checkout with the
first Python whose torch sees a CUDA device, and a package that Python lacks is named in one line.

The dry run (GPU_CHECK_DRY=1) runs every row's code on the CPU (CUDA hidden, torch.compile never
called: compile off in the trainer, train_gpu and HF generate), with tiny shapes and a few steps,
and judges each row with the same code; its figures mean nothing, so all its rows run side by
side (four lanes). Looser there: the GPU tier's
tests may skip (no CUDA), no MFU target (a CPU has no bf16 peak) and no "ahead of" targets, the
sampling and serving ratios are not judged, the recipe's 8 s budget is held to 50%, the loader's cost to 50%
(the CPU path loads synchronously), FSDP's memory (peak RSS, mostly torch itself) to 1.5x DDP's.

This file is the driver: the data, the phases of the plan, the table and the report, and the
entry of each row's child process. The settings are in bench/gpu_check_config.py, how the rows
are run in bench/gpu_check_schedule.py, the rows in bench/gpu_rows_verdicts.py (1, 3, 4, 6) and
bench/gpu_rows_speeds.py (2, 5, 7, 8, 9), what they share in bench/gpu_rows_common.py.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time
import traceback
from importlib.metadata import version
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # the repository, not bench/: `from bench... import ...`

from bench.gpu_check_needs import unmet  # noqa: E402 (after the path is set)

if __name__ == "__main__" and (why := unmet()):  # before anything imports gptkit or torch
    print(why, file=sys.stderr)
    sys.exit(2)

from bench.gpu_check_config import (  # noqa: E402
    CORPUS,
    DATA,
    DRY,
    LOGS,
    MARKER,
    MODE,
    NEEDS_DATA,
    NUMBERS,
    OUT,
    OUT_FORMAT,
    OWN,
    OWN_FILES,
    PLAN,
    ROOT,
    ROW_TABLE,
    ROWS,
    TOKENIZER,
    WORK,
)
from bench.gpu_check_schedule import Scheduler, child_env  # noqa: E402
from bench.gpu_rows_common import RowError, RowResult, gptkit, last_line, telling_line, write_json  # noqa: E402
from bench.gpu_rows_speeds import row_recipe, row_sampling, row_serve, row_train_step  # noqa: E402
from bench.gpu_rows_verdicts import row_fsdp, row_gpu_tier, row_import_eval, row_resume  # noqa: E402
from gptkit.shared.errors import SettingError  # noqa: E402
from gptkit.shared.files import looked_up  # noqa: E402
from gptkit.shared.jsonfile import read_json  # noqa: E402

# -- the parent: the schedule, the table, the report ------------------------------------------------


def out_refused():
    """Why GPU_CHECK_OUT cannot be the check's output, in one line, or None: a path that cannot be
    followed, a file, or a directory holding what the check did not write there."""
    try:
        looked_up(OUT, "GPU_CHECK_OUT")
    except SettingError as e:
        return f"Error: GPU_CHECK_OUT {e.problem}"
    if OUT.exists() and not OUT.is_dir():
        return f"Error: GPU_CHECK_OUT {OUT}: is a file; give a directory (new, or an earlier gpu-check's output)"
    others = not_ours() if OUT.is_dir() else []
    if others:
        more = ", ..." if others[1:] else ""
        return (
            f"Error: GPU_CHECK_OUT {OUT}: holds files gpu-check did not write ({others[0]}{more}); give a new "
            "directory, or an earlier gpu-check's output"
        )
    return None


def not_ours():
    """What the directory GPU_CHECK_OUT holds that the check did not write: all of it, where it has
    no marker."""
    names = sorted(p.name for p in OUT.iterdir())
    try:
        marked = read_json(MARKER).get("format") == OUT_FORMAT
    except (OSError, ValueError, AttributeError):
        marked = False
    if not marked:
        return names
    inside = [
        f"{d.name}/{p.name}"
        for d, suffixes in OWN_FILES.items()
        if d.is_dir()
        for p in sorted(d.iterdir())
        if not p.name.endswith(suffixes)
    ]
    return [name for name in names if name not in OWN] + inside


def setup():
    """The data every training row reads, made as a user makes it (make demo's steps). Returns
    None, or why it failed."""
    steps = [
        gptkit("stories", "--out", CORPUS, "--size", MODE["stories"], "--seed", 0),
        gptkit("tokenizer", "train", "--input", CORPUS, "--vocab-size", MODE["vocab"], "--out", TOKENIZER, "-q"),
        gptkit("pretokenize", "--tokenizer", TOKENIZER, "--input", CORPUS, "--out", DATA, "-q"),
    ]
    deadline = time.monotonic() + MODE["limits"]["setup"]
    with open(LOGS / "setup.log", "w") as log:
        for cmd in steps:
            try:
                done = subprocess.run(
                    cmd,
                    cwd=ROOT,
                    env=child_env(),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    timeout=max(deadline - time.monotonic(), 1),
                )
            except subprocess.TimeoutExpired:
                return f"setup timed out at `{' '.join(cmd[2:4])}`"
            if done.returncode:
                return f"setup failed at `{' '.join(cmd[2:4])}`: {last_line(LOGS / 'setup.log')}"
    return None


def check_cuda():
    """The one line to print where there is no CUDA device, or None."""
    try:
        import torch  # here: the dry run does without it, and it takes seconds to import
    except ImportError as e:
        return f"gpu-check: no CUDA: torch is not importable ({e}); GPU_CHECK_DRY=1 runs the dry run on the CPU"
    if not torch.cuda.is_available():
        return (
            f"gpu-check: no CUDA device here (torch {torch.__version__}); it runs on a CUDA machine, "
            "and GPU_CHECK_DRY=1 runs the dry run on the CPU"
        )
    return None


def machine():
    versions = ""
    try:
        versions = f"torch {version('torch')}, transformers {version('transformers')}"
    except Exception:
        pass
    if DRY:
        return f"DRY RUN on the CPU ({os.cpu_count()} cores; tiny shapes, code paths only: the figures mean nothing), {versions}"
    name = "a CUDA device"
    try:
        name = (
            subprocess.run(
                ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
            )
            .stdout.splitlines()[0]
            .strip()
            or name
        )
    except (OSError, IndexError, subprocess.TimeoutExpired):
        pass
    return f"{name}, Python {platform.python_version()}, {versions}"


def table(results):
    lines = ["| # | check | verdict | figures | target | s |", "|---|---|---|---|---|---:|"]
    for name, title, _ in ROW_TABLE:
        i = NUMBERS[name]
        r = results.get(name, {"verdict": "FAIL", "figures": "", "why": "no result", "seconds": 0})
        figures = r.get("figures", "")
        if r["verdict"] != "PASS" and r.get("why"):
            figures = f"{figures}; {r['why']}" if figures else r["why"]
        cell = lambda s: str(s).replace("|", "/").replace("\n", " ")  # noqa: E731
        lines.append(
            f"| {i} | {name}: {cell(title)} | {r['verdict']} | {cell(figures)} | {cell(r.get('target', ''))} | "
            f"{r.get('seconds', 0):.0f} |"
        )
    return "\n".join(lines)


def main():
    refused = out_refused() or (None if DRY else check_cuda())
    if refused:
        print(refused, file=sys.stderr)
        return 2
    budget = float(os.environ.get("GPU_CHECK_BUDGET") or MODE["budget_s"])
    MODE["budget_s"] = budget
    try:
        OUT.mkdir(parents=True, exist_ok=True)
        write_json(MARKER, {"format": OUT_FORMAT})  # first: what a killed check leaves is marked its own too
    except OSError as e:
        print(f"Error: GPU_CHECK_OUT {OUT}: cannot write there ({e.strerror}); give another directory", file=sys.stderr)
        return 2
    for path in (WORK, ROWS, LOGS):
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
    (OUT / "report.json").unlink(missing_ok=True)
    header = machine()
    print(f"gpu-check: {header}; budget {budget:.0f} s; logs in {LOGS}", flush=True)
    sched = Scheduler(budget)
    setup_error = []

    def step(item):
        if item == "setup":
            started = time.perf_counter()
            try:
                error = setup()
            except Exception as e:  # the rows that wait for the data must learn of it
                error = f"setup failed: {type(e).__name__}: {e}"
            setup_error.append(error)
            print(
                f"  setup (stories {MODE['stories']} -> tokenizer {MODE['vocab']} -> shards): "
                f"{'ok' if error is None else error} in {time.perf_counter() - started:.0f} s",
                flush=True,
            )
        elif item == "wait-setup":
            while not setup_error:
                time.sleep(0.2)
        else:
            blocked = item in NEEDS_DATA and setup_error[0] and f"no data: {setup_error[0]}"
            sched.run_row(item, blocked=blocked)
            r = sched.results[item]
            print(f"  {item}: {r['verdict']} in {r.get('seconds', 0):.0f} s", flush=True)

    try:
        for phase in PLAN:
            sched.lanes(phase, step)
    except KeyboardInterrupt:
        sched.kill_all()
        raise
    results = sched.results
    total = time.monotonic() - sched.started
    counts = {v: sum(r["verdict"] == v for r in results.values()) for v in ("PASS", "FAIL", "SKIP")}
    report = {
        "format": "gptkit-gpu-check",
        "mode": "dry" if DRY else "gpu",
        "machine": header,
        "budget_s": budget,
        "seconds": total,
        "counts": counts,
        "rows": [
            {
                "row": NUMBERS[name],
                "name": name,
                "check": title,
                **results.get(name, {"verdict": "FAIL", "why": "no result"}),
            }
            for name, title, _ in ROW_TABLE
        ],
    }
    write_json(OUT / "report.json", report)
    print()
    print(table(results))
    print(
        f"\ngpu-check: {counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['SKIP']} SKIP in {total:.0f} s; "
        f"report: {OUT / 'report.json'}"
    )
    return 0 if counts["PASS"] == len(ROW_TABLE) else 1


# -- the children: one row each ---------------------------------------------------------------------


def child(name):
    ROWS.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    result = RowResult(name)
    try:
        ROW_FUNCTIONS[name](result)
        out = result.as_dict(time.perf_counter() - started)
    except BaseException as e:  # a row's failure is its verdict, not a crash of the check
        traceback.print_exc()
        why = (
            telling_line(str(e.code))
            if isinstance(e, SystemExit)
            # bench/time_budget.py's sys.exit(message)
            else str(e)
            if isinstance(e, RowError)
            else f"{type(e).__name__}: {e}"
        )
        out = result.as_dict(time.perf_counter() - started)
        out.update(verdict="FAIL", why=why.strip()[-400:] or type(e).__name__)
    write_json(ROWS / f"{name}.json", out)
    print(json.dumps({k: out[k] for k in ("verdict", "figures", "why")}))


ROW_FUNCTIONS = {
    "gpu-tier": row_gpu_tier,
    "train-step": row_train_step,
    "resume": row_resume,
    "fsdp": row_fsdp,
    "recipe": row_recipe,
    "import-eval": row_import_eval,
    "sampling": row_sampling,
    "serve": row_serve,
}


if __name__ == "__main__":
    if sys.argv[1:2] == ["--row"]:
        child(sys.argv[2])
    else:
        sys.exit(main())
