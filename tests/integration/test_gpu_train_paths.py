"""What the GPU training paths promise, checked on the CPU: FSDP2 reduce-scatters every micro-step
(no whole gradient held) and DDP trains without broadcasting buffers, both on two gloo processes
with the gradients of one; activation checkpointing leaves torch.compile the blocks (eager
backend, graph nodes counted) and DDP's compiled graph is split at its buckets; the other
processes wait for a checkpoint's writing as long as its size needs; the log lines' throughput
leaves out evaluations, samples and checkpoints."""

import contextlib
import json
import os
import socket
import time
import types
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.tensor import DTensor

from gptkit.model.config import ModelConfig
from gptkit.model.model import TransformerLM
from gptkit.train.checkpointing import save_timeout
from gptkit.train.config import TrainConfig
from gptkit.train.evaluate import Evaluator
from gptkit.train.fsdp import local
from gptkit.train.parallel import ParallelModel
from gptkit.train.processes import Dist
from gptkit.train.report import LogWindow
from gptkit.train.run import train
from gptkit.train.settle import completed

MODEL = dict(vocab_size=450, context_length=64, d_model=32, n_layers=2, n_heads=2, d_ff=64)


def parallel_model(dist, **settings):
    """The tiny MODEL as ParallelModel holds it in `dist`'s place, with `settings` (compiled: not unless given)."""
    config = completed(TrainConfig.of(**{"data": "unused", "out": "unused", "lr": 1e-3, "compile": False, **settings}))
    memory = types.SimpleNamespace(guard=contextlib.nullcontext)  # no memory checked
    return ParallelModel(ModelConfig(**MODEL), config.parallelism, config.optim, config.job.seed, memory, None, dist)


def batch(rank, micro):
    sequences = torch.randint(
        0, MODEL["vocab_size"], (2, 17), generator=torch.Generator().manual_seed(10 * rank + micro)
    )
    return sequences[:, :-1], sequences[:, 1:]


def counted_compile(counts):
    """torch.compile with a backend that runs the graphs eagerly and appends each one's operator
    count to `counts` (those of subgraphs included: a checkpointed region is one)."""
    compile_ = torch.compile

    def backend(gm, inputs):
        counts.append(
            sum(
                node.op == "call_function" and "higher_order" not in str(node.target)
                for module in gm.modules()
                if isinstance(module, torch.fx.GraphModule)
                for node in module.graph.nodes
            )
        )
        return gm.forward

    return lambda *args, **kwargs: compile_(*args, **{**kwargs, "backend": backend})


def _two_processes(rank, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        _gradients(rank)
        _compiled(rank)
    finally:
        dist.destroy_process_group()


def _gradients(rank):
    """Two micro-steps under FSDP and DDP: the mean gradient of all four batches, as one process
    computes it; under FSDP each parameter's gradient is its shard after every micro-step."""
    torch.manual_seed(TrainConfig.of(data="unused", out="unused").job.seed)  # ParallelModel's
    reference = TransformerLM(ModelConfig(**MODEL))
    for r in range(2):
        for m in range(2):
            (reference(*batch(r, m))[1] / 4).backward()
    expected = {name: p.grad for name, p in reference.named_parameters()}
    for parallel in ("fsdp", "ddp"):
        model = parallel_model(Dist(rank, 2, 0, torch.device("cpu"), True, parallel == "fsdp"), parallel=parallel)
        for micro in range(2):
            with model.gradient_sync(micro == 1):
                _, loss = model.forward(*batch(rank, micro))
            (loss / 2).backward()
            if parallel == "fsdp":  # no whole gradient kept for a later micro-step
                for name, p in model.model.named_parameters():
                    assert isinstance(p.grad, DTensor) and p.grad.placements == p.placements, (micro, name)
                    assert p.grad.to_local().shape == p.to_local().shape, (micro, name)
        for name, p in model.model.named_parameters():
            torch.testing.assert_close(local(p.grad), expected[name], atol=1e-6, rtol=1e-5, msg=f"{parallel} {name}")
        if parallel == "ddp":
            assert model.forward.broadcast_buffers is False  # both torch's names read it


def _compiled(rank):
    """The operators torch.compile captures of a training step, with and without activation
    checkpointing, under FSDP and DDP; and DDP's graph split at its buckets (DDPOptimizer)."""
    counts, compile_ = [], torch.compile
    torch.compile = counted_compile(counts)
    try:
        captured = {}
        for parallel in ("fsdp", "ddp"):
            for recompute in (False, True):
                torch._dynamo.reset()
                counts.clear()
                place = Dist(rank, 2, 0, torch.device("cpu"), True, parallel == "fsdp")
                model = parallel_model(place, parallel=parallel, compile=True, activation_checkpointing=recompute)
                model.forward(*batch(rank, 0))[1].backward()
                captured[parallel, recompute] = sum(counts)
        for parallel in ("fsdp", "ddp"):
            assert captured[parallel, False] > 30, captured  # the blocks' operators, not the root's alone
            assert captured[parallel, True] >= 0.9 * captured[parallel, False], captured
        torch._dynamo.reset()
        counts.clear()
        model = parallel_model(Dist(rank, 2, 0, torch.device("cpu"), True, False), compile=True)
        # a bucket a parameter: the graph splits where dynamo compiles the model inside DDP's forward
        model.forward.bucket_bytes_cap = dist._DEFAULT_FIRST_BUCKET_BYTES = 1
        model.forward(*batch(rank, 0))[1].backward()
        assert len(counts) > 2, counts
    finally:
        torch.compile = compile_
        torch._dynamo.reset()


def test_fsdp_and_ddp_accumulate_the_gradients_of_one_process_and_compile_the_blocks_with_recompute():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_two_processes, args=(port,), nprocs=2, join=True)


def test_the_other_processes_wait_for_a_checkpoint_as_long_as_its_size_needs():
    assert save_timeout(0) == timedelta(minutes=10)  # at least NCCL's default collective timeout
    # 7B parameters with AdamW: 84 GB at 20 MB/s, 70 minutes, and the margin
    assert save_timeout(3 * 4 * 7e9) == timedelta(minutes=80)


def test_a_log_window_leaves_out_the_time_paused():
    now = [100.0]
    window = LogWindow(lambda: now[0])
    now[0] += 2  # steps
    with window.paused():
        now[0] += 30  # an evaluation
    now[0] += 1
    assert window.seconds() == 3
    window.restart()
    now[0] += 0.5
    assert window.seconds() == 0.5


def test_the_throughput_logged_after_an_evaluation_is_the_steps_alone(data, tmp_path, monkeypatch):
    evaluate, pause = Evaluator.__call__, 2.0

    def slow(self, *args):
        time.sleep(pause)
        return evaluate(self, *args)

    monkeypatch.setattr(Evaluator, "__call__", slow)
    (tmp_path / "model.json").write_text(json.dumps(MODEL))
    train(
        TrainConfig.of(
            data=str(data),
            out=str(tmp_path / "run"),
            model=str(tmp_path / "model.json"),
            device="cpu",
            batch_size=4,
            context_length=32,
            max_steps=4,
            warmup_steps=2,
            lr=3e-3,
            eval_interval=2,
            eval_tokens=256,
            log_interval=2,
            checkpoint_interval=0,
        ),
        threads=1,
    )
    lines = [json.loads(line) for line in (tmp_path / "run/metrics.jsonl").read_text().splitlines()]
    after = next(r for r in lines if r["step"] == 4 and "tokens_per_s" in r)
    # steps 3 and 4 follow step 2's evaluation: counted in, it would cap their tokens/s at this
    assert after["tokens_per_s"] > 2 * 4 * 32 / pause
