"""The GPU tier: what only a CUDA device can show. Every test here is marked `gpu` and skips
without CUDA (CI has none); on a GPU machine `make test` runs them with the rest, and
`pytest -m gpu` runs them alone.

bf16 autocast with torch.compile, a one-process NCCL run stopped by SIGTERM and resumed
exactly, FSDP on one GPU, CUDA sampling against the CPU, a server's continuous batching, and the
pinned, non-blocking loader.
"""

import contextlib
import copy
import json
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from gptkit.model.checkpoint import load_model
from gptkit.shared.errors import SettingError
from gptkit.train.processes import Dist
from gptkit.train.run import train
from gptkit.train.settle import settle
from gptkit.train.trainer import Trainer
from tests.training import ENV, MODEL, ROOT, config, latest_step, records, run_flags, torchrun, wait_for

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def test_bf16_autocast_and_compile_train_and_checkpoint(data, model_json, tmp_path):
    run = tmp_path / "run"
    train(
        config(
            data,
            run,
            model_json,
            device="cuda",
            compile=True,
            max_steps=30,
            log_interval=10,
            eval_interval=30,
            batch_size=8,
            checkpoint_interval=0,
        )
    )
    logs = records(run)
    assert [r["step"] for r in logs] == [1, 10, 20, 30] and logs[-1]["loss"] < logs[0]["loss"] - 0.3
    assert all(np.isfinite([r["loss"], r["grad_norm"]]).all() for r in logs)
    model, _ = load_model(run / "latest")  # saved from the uncompiled module, in float32
    assert all(p.dtype == torch.float32 and torch.isfinite(p).all() for p in model.parameters())


def torchrun_popen(*args, **popen):
    """`gptkit train ARGS` under torchrun, one process, as a Popen (to be signalled)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=1",
            "-m",
            "gptkit.train",
            *map(str, args),
        ],
        cwd=ROOT,
        env=ENV,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **popen,
    )


def test_one_process_nccl_run_stops_on_sigterm_and_resumes_exactly(data, model_json, tmp_path):
    # --deterministic: Inductor's embedding backward adds with atomics otherwise, and a compiled
    # run would not repeat itself bit for bit; the resume takes the setting from the run's config.
    common = [
        *run_flags(data, None, model_json, device="cuda", max_steps=40, checkpoint_interval=1000, optimizer="muon"),
        "--deterministic",
    ]
    torchrun = torchrun_popen
    straight = torchrun(*common, "--out", tmp_path / "straight")
    out, err = straight.communicate(timeout=300)
    assert straight.returncode == 0, err[-3000:]
    assert "cuda:0 x 1 (torch.distributed nccl" in out

    run = tmp_path / "stopped"
    proc = torchrun(*common, "--out", run)
    wait_for(lambda: (run / "metrics.jsonl").exists() and len(records(run)) >= 5, proc, timeout=300)
    proc.send_signal(signal.SIGTERM)  # torchrun forwards it to the worker
    out, err = proc.communicate(timeout=120)
    # The worker stops at a checkpoint and exits 0; torchrun's agent itself then raises torch's
    # SignalException (exit 1, its traceback). gptkit train --nproc-per-node exits 0 instead
    # (make gpu-check's resume row; tests/integration/test_train_processes.py on gloo).
    assert "SignalException" in err and "stopped by SIGTERM" in out, err[-3000:]
    stopped_at = latest_step(run)
    assert 5 <= stopped_at < 40 and "stopped by SIGTERM" in out
    resumed = torchrun("--out", run, "--resume")
    assert resumed.wait(timeout=300) == 0, resumed.stderr.read()[-3000:]
    assert [r["loss"] for r in records(run)] == [r["loss"] for r in records(tmp_path / "straight")]


def test_deterministic_cuda_runs_repeat_themselves_bit_for_bit(data, model_json, tmp_path):
    """--deterministic on CUDA, eager, with activation checkpointing and samples between steps: two
    runs give the same losses, samples and weights, bit for bit (torch's strict deterministic
    algorithms: attention's deterministic backward; the sampler's sums in fixed point)."""
    runs = [tmp_path / "a", tmp_path / "b"]
    for run in runs:
        train(
            config(
                data,
                run,
                model_json,
                device="cuda",
                compile=False,
                deterministic=True,
                activation_checkpointing=True,
                max_steps=15,
                sample_interval=5,
                checkpoint_interval=0,
            )
        )
    assert [r["loss"] for r in records(runs[0])] == [r["loss"] for r in records(runs[1])]
    assert records(runs[0], "sample") == records(runs[1], "sample") != []
    a, b = (load_model(run / "latest")[0].state_dict() for run in runs)
    assert all(torch.equal(a[k], b[k]) for k in a)


def assert_greedy_agrees(reference, prompt, got, want, margin=0.1):
    """Greedy tokens `got` (bf16) and `want` (float32, of `reference`) agree up to their first
    difference, if any, where the reference's logits hold both within `margin`: a near-tie that
    rounding decides, not a wrong model."""
    differ = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
    if differ is not None:
        with torch.no_grad():
            logits = reference(torch.tensor([prompt + want[:differ]]))[0][0, -1].float()
        assert abs(logits[got[differ]] - logits[want[differ]]) < margin, (differ, got, want)


def test_cuda_sampling_computes_in_bf16_and_greedy_gives_the_cpu_text_up_to_rounding(
    data, model_json, tmp_path, monkeypatch
):
    """On CUDA the model computes in bf16 with a bf16 KV cache, the CPU in float32: greedy tokens
    agree up to a near-tie; a seed gives the same text twice."""
    from gptkit.model.generate import generate, prompt_ids
    from gptkit.model.model import KVCache
    from gptkit.sample.cli import cli

    run = tmp_path / "run"
    train(config(data, run, model_json, device="cpu", max_steps=20, checkpoint_interval=0))
    caches = []

    class Recorded(KVCache):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            caches.append(self)

    monkeypatch.setattr("gptkit.model.generate.KVCache", Recorded)
    cpu, tokenizer = load_model(run / "latest")
    ids = prompt_ids(tokenizer, "the cat", tokenizer.special_tokens["<|endoftext|>"])
    greedy = {}
    for device in ("cpu", "cuda"):
        model, _ = load_model(run / "latest", device)
        caches.clear()
        greedy[device] = [int(t) for t in generate(model, ids, max_new_tokens=40, temperature=0)]
        assert {c.keys.dtype for c in caches} == {torch.float32 if device == "cpu" else torch.bfloat16}
    assert_greedy_agrees(cpu, ids, greedy["cuda"], greedy["cpu"])
    texts = []
    for _ in range(2):
        res = CliRunner().invoke(
            cli,
            [
                "--checkpoint",
                str(run / "latest"),
                "--prompt",
                "the cat",
                "--max-new-tokens",
                "40",
                "--seed",
                "3",
                "--num-samples",
                "3",
                "--device",
                "cuda",
            ],
        )
        assert res.exit_code == 0, (res.output, res.exception)
        texts.append(res.stdout)
    assert texts[0] == texts[1]


def test_cuda_decoding_replays_one_graph_and_gives_the_uncaptured_steps_tokens(data, model_json, tmp_path, monkeypatch):
    """On CUDA each one-token step (the model's step and the choice of the next token) replays a
    CUDA graph captured once, kept by the Decoder for the next generation of the same shape: its
    tokens are those of the same steps run eagerly (the same kernels), greedy and sampled, across
    two slides of the window (the cache refilled in place under the graph); and those of the
    plain eager steps (other shapes, so other kernels) up to a near-tie."""
    import gptkit.model.generate as gen

    run = tmp_path / "run"
    train(config(data, run, model_json, device="cpu", max_steps=20, checkpoint_interval=0))
    model, tokenizer = load_model(run / "latest", "cuda")
    gen.decoding_weights(model)
    ids = gen.prompt_ids(tokenizer, "the cat", tokenizer.special_tokens["<|endoftext|>"])
    n = 2 * model.config.context_length + 5

    class Uncaptured(gen.Step):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.captures = False

    for kw in (dict(temperature=0), dict(temperature=0.9, top_p=0.8, num_samples=3, seed=2)):
        decoder = gen.Decoder(model)
        graphed = [torch.stack(list(decoder.generate(ids, max_new_tokens=n, **kw))) for _ in range(2)]
        step = decoder.last[1]
        assert step.graph is not None and torch.equal(graphed[0], graphed[1])
        with monkeypatch.context() as m:
            m.setattr(gen, "Step", Uncaptured)
            uncaptured = torch.stack(list(gen.generate(model, ids, max_new_tokens=n, **kw)))
            m.setattr(gen, "graphed", lambda model, device: False)
            plain = torch.stack(list(gen.generate(model, ids, max_new_tokens=n, **kw)))
        assert torch.equal(graphed[0], uncaptured), kw
        if kw["temperature"] == 0:
            assert_greedy_agrees(load_model(run / "latest")[0], ids, graphed[0][:, 0].tolist(), plain[:, 0].tolist())


def test_a_sampler_decodes_with_bf16_weights_that_give_autocasts_logits(data, model_json, tmp_path):
    """Sampler casts the linear layers to bf16 once on CUDA (decoding_weights): the logits that
    float32 weights give under autocast, bit for bit, without casting them at every step."""
    from gptkit.model.generate import logits_of_last
    from gptkit.model.model import KVCache
    from gptkit.sample.sampling import Sampler

    run = tmp_path / "run"
    train(config(data, run, model_json, device="cpu", max_steps=5, checkpoint_interval=0))
    sampler = Sampler(run / "latest", device="cuda")
    reference, _ = load_model(run / "latest", "cuda")
    assert sampler.model.layers[0].ffn.w1.weight.dtype == torch.bfloat16
    ids = torch.tensor([[1, 2, 3, 4, 5]], device="cuda")
    with torch.inference_mode():
        got = logits_of_last(sampler.model, ids, KVCache(sampler.model.config, 1))
        want = logits_of_last(reference.eval(), ids, KVCache(reference.config, 1))
    assert torch.equal(got, want)


def test_cuda_draws_are_the_cpus_for_a_seed():
    """Top-k, top-p and the draw run on the GPU with the CPU generator's numbers: for the same
    logits, the tokens of the CPU."""
    from gptkit.model.generate import next_tokens

    logits = 3 * torch.randn(256, 5000, generator=torch.Generator().manual_seed(0))
    for temperature, top_p, top_k in ((0.8, 0.9, None), (1.0, 1.0, None), (1.2, 0.5, 50)):
        cpu = next_tokens(logits, temperature, top_p, top_k, torch.Generator().manual_seed(5))
        cuda = next_tokens(logits.cuda(), temperature, top_p, top_k, torch.Generator().manual_seed(5))
        assert cuda.is_cuda and torch.equal(cuda.cpu(), cpu)


def test_serve_batching_on_cuda_gives_a_request_its_tokens_alone():
    """Continuous batching under bf16 autocast: the batch's cache is made in bf16 from the first
    prefill, and with the fixed steps (serve --batch-invariant) a request's tokens are the same
    alone as in company (serve/batching.py)."""
    from gptkit.model.config import ModelConfig
    from gptkit.model.model import TransformerLM
    from gptkit.sample.settings import Settings
    from gptkit.serve.batching import Batcher

    torch.manual_seed(0)
    config = ModelConfig(vocab_size=512, context_length=128, d_model=128, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=256)
    batcher = Batcher(TransformerLM(config).cuda().eval(), rows=4, invariant=True)
    requests = [
        ([5, 6, 7], Settings(max_new_tokens=40, temperature=0), 0),
        ([9] * 30, Settings(max_new_tokens=25, temperature=0.9, top_p=0.8, num_samples=2), 1),
        ([3, 1, 4], Settings(max_new_tokens=60, temperature=0), 2),
        ([2], Settings(max_new_tokens=10, temperature=1.0, num_samples=2), 3),
    ]
    alone = [torch.stack(list(batcher.submit(*r))).tolist() for r in requests]
    together = [batcher.submit(*r) for r in requests]
    assert [torch.stack(list(r)).tolist() for r in together] == alone
    assert batcher.cache.keys is not None and batcher.cache.keys.dtype == torch.bfloat16


def test_sampling_from_fsdp_on_one_gpu_between_training_steps(tmp_path, monkeypatch):
    """FSDP's bf16 policy on NCCL (tests/integration/test_gpu_paths.py runs it on gloo): sampling works
    between training steps, its greedy tokens the unsharded bf16 model's up to a near-tie."""
    import torch.distributed as dist

    from gptkit.model.generate import generate
    from tests.integration.test_gpu_paths import PROMPT, bf16_sharded

    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", rank=0, world_size=1, init_method=f"file://{tmp_path}/store")
    try:
        model, reference = bf16_sharded(monkeypatch, device)
        judge = copy.deepcopy(reference).cpu().float()
        idx = torch.randint(0, model.config.vocab_size, (2, 17), device=device)
        for _ in range(2):
            model.train()
            model(idx[:, :-1], idx[:, 1:])[1].backward()
            model.zero_grad(set_to_none=True)
            model.eval()
            got = [int(t) for t in generate(model, PROMPT, max_new_tokens=20, temperature=0)]
            want = [int(t) for t in generate(reference, PROMPT, max_new_tokens=20, temperature=0)]
            assert_greedy_agrees(judge, PROMPT, got, want)
            sampled = torch.stack(list(generate(model, PROMPT, max_new_tokens=20, num_samples=3, seed=1)))
            assert sampled.min() >= 0 and sampled.max() < model.config.vocab_size
    finally:
        dist.destroy_process_group()


def test_evaluation_copies_its_batches_from_pinned_memory(monkeypatch):
    """Evaluation's batches reach the GPU from pinned memory (a copy the host does not wait for),
    and give the CPU's losses."""
    from gptkit.eval.loss import loss_sums, on_device
    from gptkit.model.config import ModelConfig
    from gptkit.model.model import TransformerLM

    pinned, pin = [], torch.Tensor.pin_memory
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self, *a: pinned.append(self.shape) or pin(self, *a))
    array = np.arange(12, dtype=np.uint16).reshape(3, 4)
    tensor = on_device(array, torch.device("cuda"))
    assert tensor.is_cuda and pinned == [(3, 4)] and torch.equal(tensor.cpu(), torch.from_numpy(array))
    torch.manual_seed(0)
    model = TransformerLM(
        ModelConfig(vocab_size=97, context_length=16, d_model=32, n_layers=2, n_heads=4, d_ff=64)
    ).eval()
    sequences = np.random.default_rng(0).integers(0, 97, (10, 17)).astype(np.uint16)
    sums = {}
    for device in ("cpu", "cuda"):
        nbytes = torch.ones(97, dtype=torch.long, device=device)
        sums[device] = loss_sums(model.to(device), sequences, nbytes, 4, contextlib.nullcontext()).cpu()
    torch.testing.assert_close(sums["cuda"], sums["cpu"], rtol=1e-4, atol=0)


def test_pinned_loader_delivers_the_loaders_batches_on_the_gpu(data, model_json, tmp_path):
    cuda = Dist(device=torch.device("cuda", 0))
    trainer = Trainer(settle(config(data, tmp_path / "run", model_json, device="cuda", grad_accum=2), dist=cuda), cuda)
    for step in range(3):
        for micro in range(2):
            inputs, targets = next(trainer.batches)
            assert inputs.is_cuda and inputs.dtype == torch.int64
            expected = torch.from_numpy(trainer.run.loader.batch(step, micro).astype(np.int64))
            assert torch.equal(inputs.cpu(), expected[:, :-1]) and torch.equal(targets.cpu(), expected[:, 1:])


def test_a_model_too_large_for_the_gpu_is_refused_before_it_is_built(data, tmp_path):
    """The estimate is compared with the GPU's free memory (torch.cuda.mem_get_info): 34B
    parameters, 16 GiB a matrix, are refused before the first one is made."""
    huge = tmp_path / "huge.json"
    huge.write_text(json.dumps({**MODEL, "d_model": 2**16, "n_heads": 2**9}))
    with pytest.raises(SettingError, match=r"34\.\dB parameters.*more than the .* available on cuda") as refused:
        train(config(data, tmp_path / "run", str(huge), device="cuda"))
    assert refused.value.setting == "model" and not (tmp_path / "run").exists()


def test_fsdp_on_one_gpu_trains_as_ddp_does_and_resumes_exactly(data, model_json, tmp_path):
    """--parallel fsdp through NCCL (one process: every collective runs), with activation
    checkpointing and FSDP's bf16 mixed precision: the losses of DDP's bf16 autocast, within bf16's
    precision; a checkpoint one CPU process loads; a resume that repeats the run exactly."""
    common = run_flags(data, None, model_json, device="cuda", max_steps=20, eval_interval=10, checkpoint_interval=10)
    ddp = torchrun(1, *common, "--out", tmp_path / "ddp")
    sharded = torchrun_popen(
        *common, "--parallel", "fsdp", "--activation-checkpointing", "--deterministic", "--out", tmp_path / "fsdp"
    )
    sharded.stdout, sharded.stderr = sharded.communicate(timeout=300)
    assert ddp.returncode == 0 and sharded.returncode == 0, (ddp.stderr + sharded.stderr)[-3000:]
    assert "cuda:0 x 1 (torch.distributed nccl, FSDP2" in sharded.stdout
    assert [r["loss"] for r in records(tmp_path / "fsdp")] == pytest.approx(
        [r["loss"] for r in records(tmp_path / "ddp")], abs=0.05
    )
    model, _ = load_model(tmp_path / "fsdp/latest")
    assert all(p.dtype == torch.float32 and torch.isfinite(p).all() for p in model.parameters())

    resumed = tmp_path / "resumed"
    shutil.copytree(tmp_path / "fsdp", resumed, symlinks=True)
    shutil.rmtree(next((resumed / "checkpoints").glob("step-000020_*")))
    (resumed / "latest").unlink()
    (resumed / "latest").symlink_to(next((resumed / "checkpoints").glob("step-000010_*")).relative_to(resumed))
    again = torchrun_popen("--out", resumed, "--resume")
    _, err = again.communicate(timeout=300)
    assert again.returncode == 0, err[-3000:]
    assert [r["loss"] for r in records(resumed)] == [r["loss"] for r in records(tmp_path / "fsdp")]


def test_a_cuda_run_gives_the_process_its_tf32_settings_back(data, model_json, tmp_path):
    """TF32 for the run's matrix products, not for what the process computes after it (a test
    comparing CUDA's float32 with the CPU's)."""
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        train(config(data, tmp_path / "run", model_json, device="cuda", max_steps=2))
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (False, False)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
