"""bench/gpu_check.py's rows whose figures are verdicts and memory, which other processes on the
GPU do not change, so that they run side by side: 1 gpu-tier (`pytest -m gpu`), 3 resume and
4 fsdp (SIGTERM and --resume, DDP and FSDP), 6 import-eval (import-hf of a bf16 model, eval text
on the device against the CPU). bench/gpu_check.py's docstring tells what each checks.
"""

from __future__ import annotations

import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from bench.gpu_check_config import CORPUS, DATA, DEVICE, DRY, MODE, ROOT, ROWS, TOKENIZER, WORK
from bench.gpu_rows_common import RowError, gib, gptkit, last_line, partial, run_logged

# Each row imports what it runs inside itself: bench/gpu_check.py's driver imports this module too
# and runs no model (torch and transformers take seconds to import), and a row whose imports fail
# is that row's FAIL, not the whole check's.


# -- 1: pytest -m gpu --------------------------------------------------------------------------------


def row_gpu_tier(r):
    junit = WORK / "gpu-tier.xml"
    # tests/gpu alone: the rest of the suite imports test clients (openai, selenium, ...) that a GPU
    # machine may lack and cannot install; tests/unit/test_suite.py keeps every gpu test there.
    cmd = [sys.executable, "-m", "pytest", "-m", "gpu", "tests/gpu", "-p", "no:cacheprovider", f"--junitxml={junit}"]
    done = subprocess.run(cmd, cwd=ROOT, stdout=sys.stdout, stderr=subprocess.STDOUT)
    if not junit.exists():
        raise RowError(f"pytest exited {done.returncode} and wrote no report")
    suite = ET.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    n, failed, errors, skipped = (int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped"))
    # A module skipped whole where it is read (pytest.importorskip of a test extra this machine
    # lacks) is a "test" of junit's, skipped, whatever -m selects: not a GPU test that skipped.
    unread = [
        case.get("name")
        for case in suite.iter("testcase")
        if any(s.get("message") == "collection skipped" for s in case.iter("skipped"))
    ]
    n, skipped = n - len(unread), skipped - len(unread)
    passed = n - failed - errors - skipped
    r.values.update(
        tests=n,
        passed=passed,
        failed=failed,
        errors=errors,
        skipped=skipped,
        exit_status=done.returncode,
        modules_not_read=unread,
    )
    r.figures = f"{n} tests: {passed} passed, {failed + errors} failed, {skipped} skipped" + (
        f" ({len(unread)} module(s) skipped where read: {', '.join(unread)})" if unread else ""
    )
    r.check(f"pytest exit status 0 (got {done.returncode})", done.returncode == 0)
    r.check("tests collected", n > 0)
    r.check(f"none failed ({failed + errors} did)", failed + errors == 0)
    if not DRY:
        r.check(f"none skipped on a CUDA machine ({skipped} did)", skipped == 0)


# -- 3 and 4: SIGTERM and --resume, DDP and FSDP --------------------------------------------------------

# Each training process of a measured run reports its peak memory at exit (the trainer records none).
MEMORY_HOOK = """\
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
"""


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
    common = [
        "train",
        "--nproc-per-node",
        1,
        "--data",
        DATA,
        "--model",
        model,
        "--device",
        DEVICE,
        "--batch-size",
        c["batch"],
        "--context-length",
        c["context"],
        "--max-steps",
        c["steps"],
        "--warmup-steps",
        c["warmup"],
        "--log-interval",
        1,
        "--eval-interval",
        0,
        "--eval-tokens",
        c["eval_tokens"],
        "--checkpoint-interval",
        0,
        "--sample-interval",
        c["sample_interval"],
        "--sample-tokens",
        c["sample_tokens"],
        "--deterministic",
        *extra,
    ]
    straight, stopped = work / "straight", work / "stopped"
    started = row_started = time.perf_counter()
    partial(r, row_started, "the uninterrupted run did not end")
    out = run_logged(
        gptkit(*common, "--out", straight), work / "straight.log", env=hooked_env(work / "memory-straight")
    )
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
    if not r.check(
        f"SIGTERM stops the run at a checkpoint, exit 0 (exit {rc}, stopped at step {stop_step})",
        rc == 0 and "stopped by SIGTERM" in text and stop_step is not None,
    ):
        raise RowError(f"the stopped run: exit {rc}, {last_line(log)}")
    r.check(f"stopped mid-run (step {stop_step} of {c['steps']})", stop_step < c["steps"])
    r.figures += f"; SIGTERM at step {stop_step}/{c['steps']}"
    partial(r, row_started, "the resumed run did not end")
    started = time.perf_counter()
    run_logged(gptkit("train", "--nproc-per-node", 1, "--out", stopped, "--resume"), work / "resumed.log")
    r.values["resume_s"] = time.perf_counter() - started

    a, b = losses(straight), losses(stopped)
    if not r.check(
        f"the same steps logged ({len(a)} uninterrupted, {len(b)} stopped + resumed)", sorted(a) == sorted(b)
    ):
        return straight
    before = max((abs(a[s] - b[s]) for s in a if s <= stop_step), default=0.0)
    after = max((abs(a[s] - b[s]) for s in a if s > stop_step), default=0.0)
    r.values.update(max_diff_before_stop=before, max_diff_after_stop=after, exact=before == 0 == after)
    if before == 0 == after:
        verdict = "losses exact"
    elif before == 0:
        verdict = f"resumed steps differ by up to {after:.2e} while the first {stop_step} repeat bit for bit: the resume changed the run"
    else:
        verdict = (
            f"--deterministic did not repeat the run: {before:.2e} apart before the stop already, {after:.2e} after it"
        )
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
        tail = steps[-MODE["fsdp_tail"] :]
        end = statistics.fmean(b[s] - a[s] for s in tail) if tail else math.inf
        worst = max(steps, key=lambda s: abs(b[s] - a[s]), default=None)
        r.values.update(
            end_diff_vs_ddp=end, max_diff_vs_ddp=b[worst] - a[worst] if steps else None, max_diff_step=worst
        )
        if steps:
            gap = f"loss - DDP's {end:+.3f} over the last {len(tail)} steps, {b[worst] - a[worst]:+.3f} at most (step {worst})"
        r.check(
            f"the last {MODE['fsdp_tail']} steps' mean loss within {MODE['fsdp_tol']} of DDP's ({end:+.3f})",
            len(tail) == MODE["fsdp_tail"] and abs(end) <= MODE["fsdp_tol"],
        )
    else:
        r.check("DDP's run (row 3) to compare with", False)
    memory = "peak/rank n/a"
    if peak and ddp_peak:
        ratio = peak / ddp_peak
        memory = f"peak/rank {gib(peak)} vs DDP {gib(ddp_peak)} ({ratio:.2f}x)" + (" (RSS)" if DRY else "")
        r.check(
            f"peak/rank under {MODE['memory_max']}x DDP's ({ratio:.2f}x)",
            ratio < MODE["memory_max"] if not DRY else ratio <= MODE["memory_max"],
        )
    else:
        r.check(f"peak memory of both runs (FSDP {gib(peak)}, DDP {gib(ddp_peak)})", False)
    r.figures += f"; {memory}; samples {counts[0]}; {gap}"


# -- 6: import-hf of a bf16 checkpoint, eval text on the device against the CPU -----------------------------


def row_import_eval(r):
    import torch
    import transformers

    from gptkit.model.hf.framing import hf_tokenizer_json
    from gptkit.tokenizer import Tokenizer

    tok = Tokenizer.from_file(TOKENIZER)
    eot = tok.special_tokens["<|endoftext|>"]
    config = transformers.LlamaConfig(
        vocab_size=tok.vocab_size,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        initializer_range=0.05,
        bos_token_id=None,
        eos_token_id=eot,
        tie_word_embeddings=False,
        **MODE["hf"],
    )
    torch.manual_seed(0)
    hf_dir, ckpt = WORK / "hf-bf16", WORK / "imported"
    transformers.LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(hf_dir)
    (hf_dir / "tokenizer.json").write_text(
        json.dumps(hf_tokenizer_json(tok, None), ensure_ascii=False), encoding="utf-8"
    )
    (hf_dir / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast"}))
    log = WORK / "import-eval.log"
    out = run_logged(gptkit("model", "import-hf", "--from", hf_dir, "--out", ckpt), log)
    r.check("import-hf kept bfloat16", "(bfloat16)" in out)
    text = WORK / "eval.txt"
    text.write_text(CORPUS.read_bytes()[: MODE["text_bytes"]].decode("utf-8", errors="ignore"), encoding="utf-8")
    scores = {}
    for role, device in (("cpu", "cpu"), ("device", DEVICE)):
        result = WORK / f"eval-{role}.json"
        run_logged(
            gptkit("eval", "text", "--checkpoint", ckpt, "--input", text, "--device", device, "--out", result, "-q"),
            log,
        )
        scores[role] = json.loads(result.read_text())
    cpu, dev = scores["cpu"]["loss"], scores["device"]["loss"]
    rel = abs(dev - cpu) / cpu
    r.values.update(cpu=scores["cpu"], device=scores["device"], relative_difference=rel)
    r.figures = (
        f"loss {DEVICE} {dev:.5f} vs cpu {cpu:.5f} nats/token ({100 * rel:.3f}% apart), bpb {scores['device']['bpb']:.4f}"
        f" vs {scores['cpu']['bpb']:.4f}; {scores['cpu']['tokens']:,} tokens"
    )
    r.check(f"losses within {MODE['eval_rel']:.0%} of each other ({100 * rel:.3f}%)", rel <= MODE["eval_rel"])
    adapted = WORK / "eval-adapt.json"
    run_logged(
        gptkit(
            "eval", "text", "--checkpoint", ckpt, "--input", text, "--device", DEVICE, "--adapt", "--out", adapted, "-q"
        ),
        log,
    )
    adapt = json.loads(adapted.read_text())
    r.values.update(adapt=adapt)
    r.figures += f"; --adapt on {DEVICE}: bpb {adapt['bpb']:.4f}"
    # the mixture holds the model as trained: at most log 4 nats over the whole text worse than it
    bound = adapt["model_bpb"] + math.log(4) / math.log(2) / adapt["bytes"]
    r.check(
        f"--adapt on {DEVICE} at most the model alone's bits plus the mixture's log 4", adapt["bpb"] <= bound + 1e-6
    )
