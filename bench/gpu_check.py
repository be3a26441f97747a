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

  1 gpu-tier     `pytest -m gpu` (tests/integration/test_gpu.py): all pass, none skipped.
  2 train-step   the training step at GPT-2 small (bf16 autocast, torch.compile, batch 32 x 1024)
                 with bench/train_gpu.py's own contenders in one process: ours (Trainer._train_step),
                 HF LlamaForCausalLM of the same size, a nanoGPT-style GPT-2; tokens/s and MFU =
                 tokens/s x FLOPs per token / 989e12 (H100 SXM, dense bf16). FLOPs per token: 6 per
                 matmul weight (6N, N without the embedding lookup; a tied head counted once) + 12 x
                 layers x d x context for attention (PaLM's count, gptkit.model.info.model_cost; the
                 nanoGPT model by the same rule). Target: ours >= 45% MFU and ahead of both in tok/s.
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
  7 sampling     tokens/s of `gptkit.model.generate` (KV cache, eager) against HF `generate`
                 with `cache_implementation="static"` (which transformers compiles on CUDA) on
                 the same random GPT-2-small-sized Llama (our checkpoint, exported with
                 export_hf; ours as `gptkit sample` runs it, float32 weights under bf16
                 autocast, HF with bf16 weights), batch 1 and 16, 16 prompt + 128 new tokens,
                 temperature 0.8, top-p 0.9, after a warm-up run each; tokens/s counts the
                 prefill's time. Target: ours >= HF at both.
  8 loader       in row 2's process, on its compiled trainer: timed blocks of steps drawing
                 batches from the loader (memmapped shards, pinned, a thread ahead) against
                 blocks on one cached device batch, alternating; medians. Target: under 2%.

Schedule (GPU): the data first (a few seconds), then rows 1, 3, 4 and 6 side by side (their
figures are verdicts and memory, which other processes on the GPU do not change; 4 waits at its
end for 3's DDP run to compare with), then 2 (+8), 5 and 7 one at a time, alone (their figures
are speeds). Time limits: 1: 240 s, 3: 150, 4: 170, 6: 70, 2+8: 190, 5: 170, 7: 120, and
the whole run at most GPU_CHECK_BUDGET seconds (575 by default): a row gets what is left at most,
and one left under 20 s is SKIP. These limits are estimates: see bench/README.md.

The dry run (GPU_CHECK_DRY=1) runs every row's code on the CPU (CUDA hidden, torch.compile never
called: compile off in the trainer, train_gpu and HF generate), with tiny shapes and a few steps,
and judges each row with the same code; its figures mean nothing, so all its rows run side by
side (four lanes). Looser there: the GPU tier's
tests may skip (no CUDA), no MFU target (a CPU has no bf16 peak) and no "ahead of" targets, the
sampling ratio is not judged, the recipe's 8 s budget is held to 50%, the loader's cost to 50%
(the CPU path loads synchronously), FSDP's memory (peak RSS, mostly torch itself) to 1.5x DDP's.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # the repository, not bench/: `from bench.train_gpu import ...`

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
        budget_s=575, stories="10MB", vocab=2048,
        limits={"setup": 60, "gpu-tier": 240, "resume": 150, "fsdp": 170, "import-eval": 70, "train-step": 190,
                "recipe": 170, "sampling": 120},
        train_step=dict(shape="gpt2-small", warmup=5, steps=20, loader_rounds=3, loader_steps=10),
        mfu_min=0.45, ahead=True, loader_max=0.02,
        run=dict(model={"context_length": 512, "d_model": 384, "n_layers": 6, "n_heads": 6, "d_ff": 1024}, batch=32,
                 context=512, steps=300, warmup=10, stop_after=30, sample_interval=100, sample_tokens=32, eval_tokens=8192),
        fsdp_tail=50, fsdp_tol=0.02, memory_max=1.0,
        recipe_budget="2m", recipe_s=120, on_time=0.05,
        hf=dict(hidden_size=384, intermediate_size=1024, num_hidden_layers=6, num_attention_heads=6, num_key_value_heads=2,
                max_position_embeddings=1024), text_bytes=50_000, eval_rel=0.01,
        sampling=dict(model="gpt2-small", prompt=16, new=128, batches=(1, 16)), sampling_min=1.0,
    ),
    "dry": dict(
        budget_s=480, stories="1MB", vocab=512,
        limits={"setup": 60, "gpu-tier": 150, "resume": 120, "fsdp": 120, "import-eval": 90, "train-step": 120,
                "recipe": 90, "sampling": 90},
        train_step=dict(shape="tiny", batch=2, context=64, warmup=1, steps=2, loader_rounds=2, loader_steps=2),
        mfu_min=None, ahead=False, loader_max=0.5,
        run=dict(model={"context_length": 64, "d_model": 32, "n_layers": 2, "n_heads": 2, "d_ff": 64}, batch=4,
                 context=64, steps=120, warmup=2, stop_after=10, sample_interval=40, sample_tokens=8, eval_tokens=512),
        fsdp_tail=20, fsdp_tol=0.02, memory_max=1.5,
        recipe_budget="8s", recipe_s=8, on_time=0.5,
        hf=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                max_position_embeddings=128), text_bytes=10_000, eval_rel=0.01,
        sampling=dict(model={"vocab_size": 512, "context_length": 128, "d_model": 64, "n_layers": 2, "n_heads": 2,
                             "d_ff": 176, "tie_embeddings": True}, prompt=8, new=16, batches=(1, 16)), sampling_min=None,
    ),
}
MODE = MODES["dry" if DRY else "gpu"]

# (name, title, the target as printed); the table's order. train-step's child also writes loader's row.
ROW_TABLE = [
    ("gpu-tier", "pytest -m gpu", "all pass, none skipped" + (" (dry: skips allowed)" if DRY else "")),
    ("train-step", "train step, GPT-2 small", "ours >= 45% MFU, ahead of hf-llama and nanogpt (tok/s)" +
     (" (dry: code path only: tok/s > 0)" if DRY else "")),
    ("resume", "train --nproc-per-node 1 --deterministic: SIGTERM, --resume", "losses equal the uninterrupted run's"),
    ("fsdp", "the same, --parallel fsdp --activation-checkpointing", f"resume as row 3, samples, last {MODE['fsdp_tail']} "
     f"steps' mean loss within {MODE['fsdp_tol']} of DDP's, peak/rank < DDP's" + (" (dry: RSS <= 1.5x)" if DRY else "")),
    ("recipe", f"recipe, --max-time {MODE['recipe_budget']}", f"loop within {MODE['on_time']:.0%} of the budget" +
     (" (dry: looser)" if DRY else "")),
    ("import-eval", "model import-hf (bf16), eval text", f"{DEVICE if not DRY else 'device'} loss within "
     f"{MODE['eval_rel']:.0%} of the CPU's"),
    ("sampling", "sampling vs HF generate (static cache)", "ours >= HF at batch 1 and 16" +
     (" (dry: not judged)" if DRY else "")),
    ("loader", "loader's cost in a step", f"under {MODE['loader_max']:.0%}" + (" (dry: CPU loads synchronously)" if DRY else "")),
]
TARGETS = {name: target for name, _, target in ROW_TABLE}
NUMBERS = {name: i for i, (name, _, _) in enumerate(ROW_TABLE, 1)}  # kept where GPU_CHECK_ROWS picks some
# Phases one after the other, each a list of lanes that run side by side, each lane's items in order.
# On a GPU: first the rows whose figures are verdicts and memory, which other processes on the device
# do not change, side by side; then the rows whose figures are speeds, alone. The dry run's figures
# are no speeds: its rows all run side by side, in four lanes.
# (fsdp compares itself with resume's DDP run at its end: it waits there for resume's result.)
PLAN = ([[["gpu-tier", "train-step", "sampling"], ["setup", "resume"], ["wait-setup", "fsdp"],
          ["wait-setup", "import-eval", "recipe"]]]
        if DRY else
        [[["gpu-tier"], ["setup", "resume"], ["wait-setup", "fsdp"], ["wait-setup", "import-eval"]], [["train-step"]],
         [["recipe"]], [["sampling"]]])
NEEDS_DATA = {"resume", "fsdp", "import-eval", "recipe"}
# GPU_CHECK_ROWS="resume sampling": those rows alone (a rerun of what failed within a device's time),
# with the rows they come with: fsdp compares with resume's DDP run; train-step writes loader's row.
ONLY = set(os.environ.get("GPU_CHECK_ROWS", "").replace(",", " ").split())
COMES_WITH = {"fsdp": {"resume"}, "loader": {"train-step"}, "train-step": {"loader"}}
if ONLY:
    unknown = ONLY - {name for name, _, _ in ROW_TABLE}
    if unknown:
        sys.exit(f"Error: GPU_CHECK_ROWS: no row {', '.join(sorted(unknown))} "
                 f"(rows: {', '.join(name for name, _, _ in ROW_TABLE)})")
    ONLY |= set().union(*(COMES_WITH.get(name, set()) for name in ONLY))
    ROW_TABLE = [row for row in ROW_TABLE if row[0] in ONLY]
    keep = ONLY | ({"setup", "wait-setup"} if ONLY & NEEDS_DATA else set())
    PLAN = [[lane for lane in ([item for item in lane if item in keep] for lane in phase) if lane] for phase in PLAN]
MIN_START_S = 20  # a row left less than this is not started (SKIP)


# -- the parent: the schedule, the table, the report ------------------------------------------------


def child_env():
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                                            "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID")}
    env.update(GPU_CHECK_OUT=str(OUT), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")
    if DRY:  # the CPU, one thread per process: runs compared bit for bit must not differ by a measured thread count
        env.update(GPU_CHECK_DRY="1", CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    return env


class Scheduler:
    def __init__(self, budget_s):
        self.started = STARTED
        self.deadline = STARTED + budget_s
        self.live, self.lock = set(), threading.Lock()
        self.results, self.interrupted = {}, False

    def left(self):
        return self.deadline - time.monotonic()

    def record(self, name, result):
        result.setdefault("target", TARGETS.get(name, ""))
        self.results[name] = result
        write_json(ROWS / f"{name}.json", result)

    def run_row(self, name, blocked=None):
        """Run row `name` in a child process within its limit and what is left of the budget."""
        produces = [name] + (["loader"] if name == "train-step" else [])
        limit = min(MODE["limits"][name], self.left() - 5)
        limited_by = "its limit" if limit == MODE["limits"][name] else "what was left of the budget"
        if self.interrupted:
            blocked = "interrupted before it started"
        if blocked or limit < MIN_START_S:
            for produced in produces:
                self.record(produced, {"verdict": "FAIL", "figures": "", "why": blocked, "seconds": 0} if blocked else
                            {"verdict": "SKIP", "figures": "", "seconds": 0,
                             "why": f"not started: {max(self.left(), 0):.0f} s left of the {MODE['budget_s']:.0f} s budget"})
            return
        started = time.perf_counter()
        with open(LOGS / f"{name}.log", "w") as log:
            proc = subprocess.Popen([sys.executable, __file__, "--row", name], cwd=ROOT, env=child_env(), stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            with self.lock:
                self.live.add(proc)
                if self.interrupted:
                    kill_group(proc)
            try:
                proc.wait(timeout=limit)
                timed_out = False
            except subprocess.TimeoutExpired:
                kill_group(proc)
                timed_out = True
            finally:
                with self.lock:
                    self.live.discard(proc)
        seconds = time.perf_counter() - started
        for produced in produces:
            path = ROWS / f"{produced}.json"
            if path.exists():
                result = json.loads(path.read_text())
                result["seconds"] = seconds if produced == name else result.get("seconds", 0)
            elif timed_out:
                result = {"verdict": "FAIL", "figures": "", "seconds": seconds,
                          "why": f"timed out after {limit:.0f} s ({limited_by}; log: {LOGS / (name + '.log')})"}
            else:
                result = {"verdict": "FAIL", "figures": "", "seconds": seconds,
                          "why": f"exited {proc.returncode} without a result: {last_line(LOGS / (name + '.log'))}"}
            if timed_out and path.exists() and produced == name:  # what it measured before it was killed
                result.update(verdict="FAIL", why=f"timed out after {limit:.0f} s ({limited_by}): {result.get('why') or 'at its end'}")
            self.record(produced, result)

    def lanes(self, lanes, step):
        """Run each lane's items in order (`step(item)`), the lanes side by side."""
        def go(lane):
            for item in lane:
                step(item)
        threads = [threading.Thread(target=go, args=(lane,), daemon=True) for lane in lanes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def kill_all(self):
        with self.lock:
            self.interrupted = True
            for proc in list(self.live):
                kill_group(proc)


def out_refused():
    """Why GPU_CHECK_OUT cannot be the check's output, in one line, or None: a path that cannot be
    followed, a file, or a directory holding what the check did not write there."""
    from gptkit.shared.errors import SettingError
    from gptkit.shared.files import looked_up

    try:
        looked_up(OUT, "GPU_CHECK_OUT")
    except SettingError as e:
        return f"Error: GPU_CHECK_OUT {e.problem}"
    if OUT.exists() and not OUT.is_dir():
        return f"Error: GPU_CHECK_OUT {OUT}: is a file; give a directory (new, or an earlier gpu-check's output)"
    others = not_ours() if OUT.is_dir() else []
    if others:
        more = ", ..." if others[1:] else ""
        return (f"Error: GPU_CHECK_OUT {OUT}: holds files gpu-check did not write ({others[0]}{more}); give a new "
                "directory, or an earlier gpu-check's output")
    return None


def not_ours():
    """What the directory GPU_CHECK_OUT holds that the check did not write: all of it, where it has
    no marker."""
    from gptkit.shared.jsonfile import read_json

    names = sorted(p.name for p in OUT.iterdir())
    try:
        marked = read_json(MARKER).get("format") == OUT_FORMAT
    except (OSError, ValueError, AttributeError):
        marked = False
    if not marked:
        return names
    inside = [f"{d.name}/{p.name}" for d, suffixes in OWN_FILES.items() if d.is_dir() for p in sorted(d.iterdir())
              if not p.name.endswith(suffixes)]
    return [name for name in names if name not in OWN] + inside


def write_json(path, data):
    """Whole or not at all: row 4 reads row 3's result while row 3 may be writing it."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def last_line(path):
    try:
        return telling_line(Path(path).read_text(errors="replace"))
    except OSError:
        return "no log"


def telling_line(text):
    """What an output says went wrong: its last `Error: ` line (gptkit's one-line errors), else the
    last exception line of a traceback, else its last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    pick = (next((line for line in reversed(lines) if line.startswith("Error: ")), None) or
            next((line for line in reversed(lines) if re.match(r"^[\w.]+(Error|Exception|Interrupt)\b.*:", line)), None) or
            (lines[-1] if lines else "no output"))
    return pick[-300:]


def gptkit(*args):
    return [sys.executable, "-m", "gptkit", *map(str, args)]


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
                done = subprocess.run(cmd, cwd=ROOT, env=child_env(), stdout=log, stderr=subprocess.STDOUT,
                                      timeout=max(deadline - time.monotonic(), 1))
            except subprocess.TimeoutExpired:
                return f"setup timed out at `{' '.join(cmd[2:4])}`"
            if done.returncode:
                return f"setup failed at `{' '.join(cmd[2:4])}`: {last_line(LOGS / 'setup.log')}"
    return None


def check_cuda():
    """The one line to print where there is no CUDA device, or None."""
    try:
        import torch
    except ImportError as e:
        return f"gpu-check: no CUDA: torch is not importable ({e}); GPU_CHECK_DRY=1 runs the dry run on the CPU"
    if not torch.cuda.is_available():
        return (f"gpu-check: no CUDA device here (torch {torch.__version__}); it runs on a CUDA machine, "
                "and GPU_CHECK_DRY=1 runs the dry run on the CPU")
    return None


def machine():
    import platform
    versions = ""
    try:
        from importlib.metadata import version
        versions = f"torch {version('torch')}, transformers {version('transformers')}"
    except Exception:
        pass
    if DRY:
        return f"DRY RUN on the CPU ({os.cpu_count()} cores; tiny shapes, code paths only: the figures mean nothing), {versions}"
    name = "a CUDA device"
    try:
        name = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True,
                              timeout=20).stdout.splitlines()[0].strip() or name
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
        lines.append(f"| {i} | {name}: {cell(title)} | {r['verdict']} | {cell(figures)} | {cell(r.get('target', ''))} | "
                     f"{r.get('seconds', 0):.0f} |")
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
            print(f"  setup (stories {MODE['stories']} -> tokenizer {MODE['vocab']} -> shards): "
                  f"{'ok' if error is None else error} in {time.perf_counter() - started:.0f} s", flush=True)
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
    report = {"format": "gptkit-gpu-check", "mode": "dry" if DRY else "gpu", "machine": header, "budget_s": budget,
              "seconds": total, "counts": counts,
              "rows": [{"row": NUMBERS[name], "name": name, "check": title, **results.get(name, {"verdict": "FAIL", "why": "no result"})}
                       for name, title, _ in ROW_TABLE]}
    write_json(OUT / "report.json", report)
    print()
    print(table(results))
    print(f"\ngpu-check: {counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['SKIP']} SKIP in {total:.0f} s; "
          f"report: {OUT / 'report.json'}")
    return 0 if counts["PASS"] == len(ROW_TABLE) else 1


# -- the children: one row each ---------------------------------------------------------------------


class RowResult:
    """A row's checks (text, passed) and figures; the verdict is PASS when every check passed."""

    def __init__(self, name):
        self.name, self.checks, self.values, self.figures = name, [], {}, ""

    def check(self, text, ok):
        self.checks.append({"check": text, "ok": bool(ok)})
        return bool(ok)

    def as_dict(self, seconds):
        failed = [c["check"] for c in self.checks if not c["ok"]]
        return {"verdict": "PASS" if self.checks and not failed else "FAIL", "figures": self.figures,
                "why": "; ".join(failed) if failed else "", "values": self.values, "checks": self.checks,
                "target": TARGETS.get(self.name, ""), "seconds": seconds}


def partial(r, started, missing):
    """What row `r` has measured so far, as a FAIL naming what is `missing`: the parent shows it
    if the row is killed at its time limit before it ends."""
    out = r.as_dict(time.perf_counter() - started)
    out.update(verdict="FAIL", why=f"incomplete: {missing}")
    write_json(ROWS / f"{r.name}.json", out)


class RowError(Exception):
    """A step of a row failed: the row is FAIL with this line."""


def child(name):
    ROWS.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    result = RowResult(name)
    try:
        ROW_FUNCTIONS[name](result)
        out = result.as_dict(time.perf_counter() - started)
    except BaseException as e:  # a row's failure is its verdict, not a crash of the check
        traceback.print_exc()
        why = (telling_line(str(e.code)) if isinstance(e, SystemExit) else  # bench/time_budget.py's sys.exit(message)
               str(e) if isinstance(e, RowError) else f"{type(e).__name__}: {e}")
        out = result.as_dict(time.perf_counter() - started)
        out.update(verdict="FAIL", why=why.strip()[-400:] or type(e).__name__)
    write_json(ROWS / f"{name}.json", out)
    print(json.dumps({k: out[k] for k in ("verdict", "figures", "why")}))


def run_logged(cmd, log, env=None, timeout=None):
    """Run `cmd`, its output appended to `log`; RowError with its last line if it fails."""
    with open(log, "a") as f:
        f.write(f"$ {' '.join(map(str, cmd))}\n")
        f.flush()
        done = subprocess.run(cmd, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=timeout)
    if done.returncode:
        raise RowError(f"`{' '.join(map(str, cmd[2:4]))}` exited {done.returncode}: {last_line(log)}")
    return Path(log).read_text(errors="replace")


def gib(n):
    return f"{n / 2**30:.2f} GiB" if n is not None else "n/a"


# -- 1: pytest -m gpu --------------------------------------------------------------------------------


def row_gpu_tier(r):
    import xml.etree.ElementTree as ET

    junit = WORK / "gpu-tier.xml"
    cmd = [sys.executable, "-m", "pytest", "-m", "gpu", "-p", "no:cacheprovider", f"--junitxml={junit}"]
    done = subprocess.run(cmd, cwd=ROOT, stdout=sys.stdout, stderr=subprocess.STDOUT)
    if not junit.exists():
        raise RowError(f"pytest exited {done.returncode} and wrote no report")
    suite = ET.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    n, failed, errors, skipped = (int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped"))
    # A module skipped whole where it is read (pytest.importorskip of a test extra this machine
    # lacks: wandb for test_trackers) is a "test" of junit's, skipped, whatever -m selects; all
    # the GPU tests sit in test_gpu.py, which is read everywhere, so these are none of them.
    unread = [case.get("name") for case in suite.iter("testcase")
              if any(s.get("message") == "collection skipped" for s in case.iter("skipped"))]
    n, skipped = n - len(unread), skipped - len(unread)
    passed = n - failed - errors - skipped
    r.values.update(tests=n, passed=passed, failed=failed, errors=errors, skipped=skipped, exit_status=done.returncode,
                    modules_not_read=unread)
    r.figures = f"{n} tests: {passed} passed, {failed + errors} failed, {skipped} skipped" + \
        (f" ({len(unread)} module(s) skipped where read: {', '.join(unread)})" if unread else "")
    r.check(f"pytest exit status 0 (got {done.returncode})", done.returncode == 0)
    r.check("tests collected", n > 0)
    r.check(f"none failed ({failed + errors} did)", failed + errors == 0)
    if not DRY:
        r.check(f"none skipped on a CUDA machine ({skipped} did)", skipped == 0)


# -- 2 and 8: the training step at GPT-2 small, and the loader's cost ------------------------------------


def row_train_step(r):
    import tempfile

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
    results = {}
    with tempfile.TemporaryDirectory(dir=WORK) as tmp:
        data = Path(tmp) / "data"
        build_data(data, load_config(shape).vocab_size, train_tokens=max(1 << 20, 4 * batch * (context + 1)))
        for name_, tok_s, flops, memory, trainer in train_gpu.race(shape, data, Path(tmp) / "run", device, compile_model,
                                                                  c["steps"], c["warmup"]):
            results[name_] = {"tokens_per_s": tok_s, "flops_per_token": flops, "mfu": flops * tok_s / peak if peak else None,
                              "peak_memory_bytes": memory}
            print(f"{name_}: {results[name_]}", flush=True)
            r.values.update(shape=shape, batch=batch, context=context, contenders=results)
            r.figures = train_step_figures(results, shape, batch, context, peak)
            partial(r, started, f"no figures yet for {', '.join(n for n in ('ours', 'hf-llama', 'nanogpt') if n not in results)}")
            if name_ == "ours":
                loader_row(trainer, device)
    ours = results["ours"]
    r.check("every contender ran", all(v["tokens_per_s"] > 0 and math.isfinite(v["tokens_per_s"]) for v in results.values()))
    if MODE["mfu_min"] is not None:
        r.check(f"ours at {MODE['mfu_min']:.0%} MFU or more ({100 * (ours['mfu'] or 0):.1f}%)", (ours["mfu"] or 0) >= MODE["mfu_min"])
    if MODE["ahead"]:
        for other in ("hf-llama", "nanogpt"):
            ratio = ours["tokens_per_s"] / results[other]["tokens_per_s"]
            r.check(f"ours ahead of {other} ({ratio:.2f}x its tok/s)", ratio > 1)


def train_step_figures(results, shape, batch, context, peak):
    mfu = lambda x: f", MFU {100 * x['mfu']:.1f}%" if x["mfu"] is not None else ""  # noqa: E731
    first = next(iter(results.values()))
    return "; ".join(f"{k} {v['tokens_per_s']:,.0f} tok/s{mfu(v)}" for k, v in results.items()) + \
        f" ({shape}, {batch} x {context}, FLOPs/token {first['flops_per_token'] / 1e6:.0f}M" + \
        (f", peak {peak / 1e12:.0f} TFLOP/s)" if peak else ", no MFU on a CPU)")


def device_peak(name):
    """gptkit's dense bf16 peak for the GPU `name`d (train/report.py's table), or None."""
    from gptkit.train.report import peak_bf16_flops

    return peak_bf16_flops(name)


def loader_row(trainer, device):
    """Row 8, on row 2's trainer: steps that draw from the loader against steps on one cached batch."""
    import itertools

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
                return trainer._train_step()
            finally:
                trainer.batches = loading

        times = {"loaded": [], "cached": []}
        for _ in range(c["loader_rounds"]):
            times["loaded"].append(train_gpu.measure(trainer._train_step, c["loader_steps"], 1, device))
            times["cached"].append(train_gpu.measure(cached_step, c["loader_steps"], 1, device))
        loaded, steady = (statistics.median(times[k]) / c["loader_steps"] for k in ("loaded", "cached"))
        cost = loaded / steady - 1
        r.values.update(ms_per_step_loaded=1000 * loaded, ms_per_step_cached=1000 * steady, cost=cost,
                        rounds=c["loader_rounds"], steps=c["loader_steps"], blocks=times)
        r.figures = (f"{1000 * loaded:.1f} ms a step loading, {1000 * steady:.1f} ms on a cached batch: "
                     f"{100 * cost:+.1f}% ({c['loader_rounds']} x {c['loader_steps']} steps each, medians)")
        r.check(f"the loader's cost under {MODE['loader_max']:.0%} ({100 * cost:.1f}%)", cost < MODE["loader_max"])
        out = r.as_dict(time.perf_counter() - started)
    except Exception as e:
        traceback.print_exc()
        out = r.as_dict(time.perf_counter() - started)
        out.update(verdict="FAIL", why=f"{type(e).__name__}: {e}")
    write_json(ROWS / "loader.json", out)
    torch.cuda.synchronize() if device.type == "cuda" else None


# -- 3 and 4: SIGTERM and --resume, DDP and FSDP --------------------------------------------------------

# Each training process of a measured run reports its peak memory at exit (the trainer records none).
MEMORY_HOOK = '''\
import atexit, json, os, sys

def _gpu_check_peak_memory():
    prefix = os.environ.get("GPU_CHECK_MEMORY")
    if not prefix or "RANK" not in os.environ or "gptkit.train.trainer" not in sys.modules:
        return  # not a training process (the launcher, a compile worker)
    import resource
    record = {"rank": int(os.environ["RANK"]), "pid": os.getpid(),
              "maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            device = torch.cuda.current_device()
            record.update(cuda_peak_bytes=torch.cuda.max_memory_allocated(device),
                          cuda_reserved_peak_bytes=torch.cuda.max_memory_reserved(device))
    except Exception as e:
        record["error"] = repr(e)
    with open(f"{prefix}.rank{record['rank']}.{os.getpid()}.json", "w") as f:
        json.dump(record, f)

atexit.register(_gpu_check_peak_memory)

# Whatever sitecustomize this one hides on the path still runs.
import importlib.machinery, importlib.util
_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.machinery.PathFinder.find_spec(
    "sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != _here])
if _spec is not None and _spec.loader is not None:
    _module = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
'''


def hooked_env(prefix):
    hook = WORK / "memory-hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(MEMORY_HOOK)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(hook), env.get("PYTHONPATH")]))
    env["GPU_CHECK_MEMORY"] = str(prefix)
    return env


def peak_memory(prefix):
    """The largest peak among the run's ranks: CUDA's allocator on a GPU, the RSS on a CPU."""
    records = [json.loads(p.read_text()) for p in prefix.parent.glob(f"{prefix.name}.rank*.json")]
    key = "maxrss_bytes" if DRY else "cuda_peak_bytes"
    values = [rec[key] for rec in records if rec.get(key) is not None]
    return max(values) if values else None


def losses(run):
    out = {}
    for line in (Path(run) / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if "loss" in rec:
            out[rec["step"]] = rec["loss"]
    return out


def samples(run):
    return sum("sample" in json.loads(line) for line in (Path(run) / "metrics.jsonl").read_text().splitlines())


def latest_step(run):
    try:
        return json.loads((Path(run) / "latest" / "trainer_state.json").read_text())["step"]
    except (OSError, ValueError, KeyError):
        return None


def stop_and_resume(r, tag, extra):
    """The run uninterrupted, and stopped by SIGTERM then resumed; the checks every such row makes.
    Returns the directory of the uninterrupted run."""
    c = MODE["run"]
    work = WORK / tag
    work.mkdir(parents=True)
    model = work / "model.json"
    model.write_text(json.dumps(c["model"]))
    common = ["train", "--nproc-per-node", 1, "--data", DATA, "--model", model, "--device", DEVICE,
              "--batch-size", c["batch"], "--context-length", c["context"], "--max-steps", c["steps"],
              "--warmup-steps", c["warmup"], "--log-interval", 1, "--eval-interval", 0, "--eval-tokens", c["eval_tokens"],
              "--checkpoint-interval", 0, "--sample-interval", c["sample_interval"], "--sample-tokens", c["sample_tokens"],
              "--deterministic", *extra]
    straight, stopped = work / "straight", work / "stopped"
    started = row_started = time.perf_counter()
    partial(r, row_started, "the uninterrupted run did not end")
    out = run_logged(gptkit(*common, "--out", straight), work / "straight.log", env=hooked_env(work / "memory-straight"))
    r.values["straight_s"] = time.perf_counter() - started
    r.figures = f"uninterrupted run: {r.values['straight_s']:.0f} s"
    partial(r, row_started, "the run to stop did not end")
    r.values["straight_peak_bytes"] = peak_memory(work / "memory-straight")
    r.values["compiled"] = ", compiled" in out
    r.values["parallel"] = next((line for line in out.splitlines() if line.startswith("training ")), "")

    log = work / "stopped.log"
    with open(log, "w") as f:
        proc = subprocess.Popen(gptkit(*common, "--out", stopped), cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)
        while not ((stopped / "metrics.jsonl").exists() and len(losses(stopped)) >= c["stop_after"]):
            if proc.poll() is not None:
                raise RowError(f"the run to stop exited {proc.returncode} first: {last_line(log)}")
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)  # the launcher passes it on to its worker
        rc = proc.wait()
    text = log.read_text(errors="replace")
    stop_step = latest_step(stopped)
    r.values.update(signal_after_records=c["stop_after"], stopped_at=stop_step, steps=c["steps"])
    if not r.check(f"SIGTERM stops the run at a checkpoint, exit 0 (exit {rc}, stopped at step {stop_step})",
                   rc == 0 and "stopped by SIGTERM" in text and stop_step is not None):
        raise RowError(f"the stopped run: exit {rc}, {last_line(log)}")
    r.check(f"stopped mid-run (step {stop_step} of {c['steps']})", stop_step < c["steps"])
    r.figures += f"; SIGTERM at step {stop_step}/{c['steps']}"
    partial(r, row_started, "the resumed run did not end")
    started = time.perf_counter()
    run_logged(gptkit("train", "--nproc-per-node", 1, "--out", stopped, "--resume"), work / "resumed.log")
    r.values["resume_s"] = time.perf_counter() - started

    a, b = losses(straight), losses(stopped)
    if not r.check(f"the same steps logged ({len(a)} uninterrupted, {len(b)} stopped + resumed)", sorted(a) == sorted(b)):
        return straight
    before = max((abs(a[s] - b[s]) for s in a if s <= stop_step), default=0.0)
    after = max((abs(a[s] - b[s]) for s in a if s > stop_step), default=0.0)
    r.values.update(max_diff_before_stop=before, max_diff_after_stop=after, exact=before == 0 == after)
    if before == 0 == after:
        verdict = "losses exact"
    elif before == 0:
        verdict = f"resumed steps differ by up to {after:.2e} while the first {stop_step} repeat bit for bit: the resume changed the run"
    else:
        verdict = f"--deterministic did not repeat the run: {before:.2e} apart before the stop already, {after:.2e} after it"
    r.check(verdict, before == 0 == after)
    r.figures = f"SIGTERM at step {stop_step}/{c['steps']}, --resume: {verdict}"
    return straight


def row_resume(r):
    stop_and_resume(r, "resume", [])
    peak = r.values["straight_peak_bytes"]
    r.figures += f"; peak/rank {gib(peak)}" + (" (RSS)" if DRY else "")


def row_fsdp(r):
    c = MODE["run"]
    straight = stop_and_resume(r, "fsdp", ["--parallel", "fsdp", "--activation-checkpointing"])
    r.check("FSDP2 in the run's first line", "FSDP2" in r.values["parallel"])
    expected = c["steps"] // c["sample_interval"]
    counts = (samples(straight), samples(WORK / "fsdp" / "stopped"))
    r.values["samples"] = counts
    r.check(f"{expected} samples recorded in each run ({counts[0]} and {counts[1]})", min(counts) >= expected)
    ddp = WORK / "resume" / "straight"
    ddp_result = ROWS / "resume.json"
    while not ddp_result.exists():  # row 3, beside this one, ends with it (the parent writes it if row 3 cannot)
        time.sleep(0.5)
    ddp_peak = json.loads(ddp_result.read_text()).get("values", {}).get("straight_peak_bytes")
    peak = r.values["straight_peak_bytes"]
    r.values.update(ddp_peak_bytes=ddp_peak, fsdp_peak_bytes=peak)
    gap = "no DDP run to compare with"
    if (ddp / "metrics.jsonl").exists():
        a, b = losses(ddp), losses(straight)
        steps = sorted(set(a) & set(b))
        tail = steps[-MODE["fsdp_tail"]:]
        end = statistics.fmean(b[s] - a[s] for s in tail) if tail else math.inf
        worst = max(steps, key=lambda s: abs(b[s] - a[s]), default=None)
        r.values.update(end_diff_vs_ddp=end, max_diff_vs_ddp=b[worst] - a[worst] if steps else None, max_diff_step=worst)
        if steps:
            gap = f"loss - DDP's {end:+.3f} over the last {len(tail)} steps, {b[worst] - a[worst]:+.3f} at most (step {worst})"
        r.check(f"the last {MODE['fsdp_tail']} steps' mean loss within {MODE['fsdp_tol']} of DDP's ({end:+.3f})",
                len(tail) == MODE["fsdp_tail"] and abs(end) <= MODE["fsdp_tol"])
    else:
        r.check("DDP's run (row 3) to compare with", False)
    memory = "peak/rank n/a"
    if peak and ddp_peak:
        ratio = peak / ddp_peak
        memory = f"peak/rank {gib(peak)} vs DDP {gib(ddp_peak)} ({ratio:.2f}x)" + (" (RSS)" if DRY else "")
        r.check(f"peak/rank under {MODE['memory_max']}x DDP's ({ratio:.2f}x)",
                ratio < MODE["memory_max"] if not DRY else ratio <= MODE["memory_max"])
    else:
        r.check(f"peak memory of both runs (FSDP {gib(peak)}, DDP {gib(ddp_peak)})", False)
    r.figures += f"; {memory}; samples {counts[0]}; {gap}"


# -- 5: the recipe on a time budget -------------------------------------------------------------------


def row_recipe(r):
    from bench.time_budget import run as budget_run

    got = budget_run(DATA, WORK / "recipe", MODE["recipe_budget"])
    budget = MODE["recipe_s"]
    late = got["loop_s"] / budget - 1
    r.values.update(got, budget_s=budget, late=late)
    r.figures = (f"{got['shape']}, {got['steps']:,} steps, held-out {got['bpb']:.4f} bpb; loop {got['loop_s']:.1f} s of "
                 f"{budget} s ({100 * late:+.1f}%), command {got['wall_s']:.0f} s")
    r.check(f"the loop within {MODE['on_time']:.0%} of the {budget} s budget ({got['loop_s']:.1f} s)", abs(late) <= MODE["on_time"])
    r.check("a finite held-out bpb", math.isfinite(got["bpb"]))


# -- 6: import-hf of a bf16 checkpoint, eval text on the device against the CPU -----------------------------


def row_import_eval(r):
    import torch
    import transformers

    from gptkit.model.hf import hf_tokenizer_json
    from gptkit.tokenizer import Tokenizer

    tok = Tokenizer.from_file(TOKENIZER)
    eot = tok.special_tokens["<|endoftext|>"]
    config = transformers.LlamaConfig(vocab_size=tok.vocab_size, rms_norm_eps=1e-5, rope_theta=10000.0, initializer_range=0.05,
                                      bos_token_id=None, eos_token_id=eot, tie_word_embeddings=False, **MODE["hf"])
    torch.manual_seed(0)
    hf_dir, ckpt = WORK / "hf-bf16", WORK / "imported"
    transformers.LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(hf_dir)
    (hf_dir / "tokenizer.json").write_text(json.dumps(hf_tokenizer_json(tok, None), ensure_ascii=False), encoding="utf-8")
    (hf_dir / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast"}))
    log = WORK / "import-eval.log"
    out = run_logged(gptkit("model", "import-hf", "--from", hf_dir, "--out", ckpt), log)
    r.check("import-hf kept bfloat16", "(bfloat16)" in out)
    text = WORK / "eval.txt"
    text.write_text(CORPUS.read_bytes()[: MODE["text_bytes"]].decode("utf-8", errors="ignore"), encoding="utf-8")
    scores = {}
    for role, device in (("cpu", "cpu"), ("device", DEVICE)):
        result = WORK / f"eval-{role}.json"
        run_logged(gptkit("eval", "text", "--checkpoint", ckpt, "--input", text, "--device", device, "--out", result, "-q"), log)
        scores[role] = json.loads(result.read_text())
    cpu, dev = scores["cpu"]["loss"], scores["device"]["loss"]
    rel = abs(dev - cpu) / cpu
    r.values.update(cpu=scores["cpu"], device=scores["device"], relative_difference=rel)
    r.figures = (f"loss {DEVICE} {dev:.5f} vs cpu {cpu:.5f} nats/token ({100 * rel:.3f}% apart), bpb {scores['device']['bpb']:.4f}"
                 f" vs {scores['cpu']['bpb']:.4f}; {scores['cpu']['tokens']:,} tokens")
    r.check(f"losses within {MODE['eval_rel']:.0%} of each other ({100 * rel:.3f}%)", rel <= MODE["eval_rel"])
    adapted = WORK / "eval-adapt.json"
    run_logged(gptkit("eval", "text", "--checkpoint", ckpt, "--input", text, "--device", DEVICE, "--adapt", "--out", adapted,
                      "-q"), log)
    adapt = json.loads(adapted.read_text())
    r.values.update(adapt=adapt)
    r.figures += f"; --adapt on {DEVICE}: bpb {adapt['bpb']:.4f}"
    # the mixture holds the model as trained: at most log 4 nats over the whole text worse than it
    bound = adapt["model_bpb"] + math.log(4) / math.log(2) / adapt["bytes"]
    r.check(f"--adapt on {DEVICE} at most the model alone's bits plus the mixture's log 4", adapt["bpb"] <= bound + 1e-6)


# -- 7: sampling against HF generate with a static cache ------------------------------------------------


def row_sampling(r):
    import torch
    from transformers import LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    from bench.sample import dummy_tokenizer
    from gptkit.model.checkpoint import load_model, save_model
    from gptkit.model.config import ModelConfig, load_config
    from gptkit.model.generate import generate
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
    ours = load_model(ckpt)[0].to(device).eval()  # float32 weights: generate runs them under bf16 autocast on CUDA
    hf = LlamaForCausalLM.from_pretrained(hf_dir, dtype=dtype).to(device).eval()
    hf.generation_config.eos_token_id = hf.generation_config.bos_token_id = None  # exactly the new tokens asked for
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, config.vocab_size - 1, (c["prompt"],), generator=g).tolist()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def run_ours(batch, n):
        started = time.perf_counter()
        made = sum(1 for _ in generate(ours, prompt, max_new_tokens=n, num_samples=batch, temperature=0.8, top_p=0.9, seed=0))
        sync()
        assert made == n, made
        return time.perf_counter() - started

    def run_hf(batch, n):
        ids = torch.tensor([prompt] * batch, device=device)
        torch.manual_seed(0)
        sync()
        started = time.perf_counter()
        with torch.inference_mode():
            out = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n, do_sample=True,
                              temperature=0.8, top_p=0.9, top_k=0, cache_implementation="static",
                              disable_compile=device.type != "cuda", eos_token_id=None, pad_token_id=0)
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
            r.check(f"batch {batch}: ours at {MODE['sampling_min']}x HF's tok/s or more ({ratio:.2f}x)", ratio >= MODE["sampling_min"])
    precision = "float32" if DRY else "bf16: ours float32 weights under its autocast, HF bf16 weights"
    r.values.update(model=config.to_dict(), precision=precision, prompt=c["prompt"], new=c["new"])
    r.figures = "; ".join(figures) + f" ({config.d_model} x {config.n_layers} layers, vocab {config.vocab_size}, " \
        f"{precision}, {c['prompt']} + {c['new']} tokens)"


ROW_FUNCTIONS = {"gpu-tier": row_gpu_tier, "train-step": row_train_step, "resume": row_resume, "fsdp": row_fsdp,
                 "recipe": row_recipe, "import-eval": row_import_eval, "sampling": row_sampling}


if __name__ == "__main__":
    if sys.argv[1:2] == ["--row"]:
        child(sys.argv[2])
    else:
        sys.exit(main())
