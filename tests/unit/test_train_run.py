"""A run through the library (`train(config)`, prepare_run, the Trainer), in-process on CPU with a tiny
model: gradient accumulation, clipping, exact resume, activation checkpointing, host syncs,
non-finite losses, bits per byte, kills during checkpoint saves, the library's errors."""

import json
import os
import re
import shutil
import signal
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from gptkit.model.checkpoint import load_model
from gptkit.model.model import Block, TransformerLM
from gptkit.shared.errors import SettingError
from gptkit.shared.shard_dir import ShardDir
from gptkit.train.data import ShardData
from gptkit.train.optim import AdamW
from gptkit.train.run import train
from gptkit.train.settle import settle
from gptkit.train.trainer import Trainer, TrainingError
from tests.training import (
    MODEL,
    SIGNALS,
    comparable,
    config,
    invoke,
    latest_step,
    records,
    run_flags,
    stopped_after,
    weights,
)


@pytest.fixture
def captured_grads(monkeypatch):
    """The gradients AdamW applies at every step (after clipping), per parameter name."""
    captured, step = [], AdamW.step

    def capturing_step(self, lr_scale=1.0):
        captured.append({n: p.grad.clone() for params, _ in self.groups for n, p in params if p.grad is not None})
        return step(self, lr_scale)

    monkeypatch.setattr(AdamW, "step", capturing_step)
    return captured


def global_norm(grads):
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads.values()])).item()


def test_gradient_accumulation_matches_one_big_batch(data, model_json, tmp_path, captured_grads):
    for out, batch, accum in (("big", 4, 1), ("accum", 2, 2)):
        train(
            config(
                data, tmp_path / out, model_json, batch_size=batch, grad_accum=accum, loader="sequential", max_steps=2
            )
        )
    big, accum = captured_grads[:2], captured_grads[2:]
    for g1, g2 in zip(big, accum):
        for name in g1:
            torch.testing.assert_close(g2[name], g1[name], atol=1e-7, rtol=1e-4, msg=name)
    for r1, r2 in zip(records(tmp_path / "big"), records(tmp_path / "accum"), strict=True):
        assert (r1["step"], r1["tokens"]) == (r2["step"], r2["tokens"])
        assert r1["loss"] == pytest.approx(r2["loss"], abs=1e-5) and r1["grad_norm"] == pytest.approx(
            r2["grad_norm"], rel=1e-5
        )
    w1, w2 = weights(tmp_path / "big/latest"), weights(tmp_path / "accum/latest")
    for name in w1:
        torch.testing.assert_close(w2[name], w1[name], atol=1e-5, rtol=0, msg=name)


def test_logged_grad_norm_is_before_clipping(data, model_json, tmp_path, captured_grads):
    train(config(data, tmp_path / "free", model_json, grad_clip=0, max_steps=1))
    unclipped = global_norm(captured_grads[0])
    assert records(tmp_path / "free")[0]["grad_norm"] == pytest.approx(unclipped, rel=1e-5)
    clip = unclipped / 4
    train(config(data, tmp_path / "clipped", model_json, grad_clip=clip, max_steps=3))
    logged = [r["grad_norm"] for r in records(tmp_path / "clipped")]
    assert logged[0] == pytest.approx(unclipped, rel=1e-5)  # same first step, reported before clipping
    for norm, grads in zip(logged, captured_grads[1:], strict=True):
        applied = global_norm(grads)
        assert applied <= clip * (1 + 1e-5)
        assert applied == pytest.approx(min(norm, clip), rel=1e-4)


@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
def test_resume_is_exact(data, model_json, tmp_path, optimizer):
    run = dict(
        max_steps=8,
        checkpoint_interval=4,
        eval_interval=4,
        optimizer=optimizer,
        grad_accum=2 if optimizer == "muon" else 1,
    )
    train(config(data, tmp_path / "straight", model_json, **run))
    shutil.copytree(tmp_path / "straight", tmp_path / "resumed", symlinks=True)
    assert [p.name[:11] for p in sorted((tmp_path / "resumed/checkpoints").iterdir())] == ["step-000004", "step-000008"]
    stopped_after(tmp_path / "resumed", 4)  # as if interrupted after step 6: the records of steps 5-6 are stale
    train(config(data, tmp_path / "resumed", model_json, **run), resume=True)

    assert comparable(tmp_path / "resumed") == comparable(tmp_path / "straight")
    assert len(records(tmp_path / "straight")) == 8 and len(records(tmp_path / "straight", "val_loss")) == 2
    for name in ("model.safetensors", "optimizer.safetensors"):
        a, b = load_file(tmp_path / "straight/latest" / name), load_file(tmp_path / "resumed/latest" / name)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name


def test_deterministic_trains_under_deterministic_algorithms_and_gives_the_process_its_settings_back(
    data, model_json, tmp_path, monkeypatch
):
    """--deterministic: every step computes with torch's deterministic algorithms, strictly (warn_only
    off: CUDA's attention kernels take their deterministic backward only then), and Inductor's
    deterministic switch (what makes a compiled CUDA run repeat itself, where the GPU tier checks it);
    the setting is recorded, so a resume keeps it; the process computes as before afterwards."""
    import torch._inductor.config as inductor

    seen, step = [], Trainer.train_step

    def recorded(self):
        strict = (
            torch.are_deterministic_algorithms_enabled() and not torch.is_deterministic_algorithms_warn_only_enabled()
        )
        seen.append((strict, inductor.deterministic))
        return step(self)

    monkeypatch.setattr(Trainer, "train_step", recorded)
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    before = torch.are_deterministic_algorithms_enabled(), inductor.deterministic
    train(config(data, tmp_path / "run", model_json, max_steps=2, deterministic=True))
    assert seen == [(True, True)] * 2 and os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert (torch.are_deterministic_algorithms_enabled(), inductor.deterministic) == before == (False, False)
    assert json.loads((tmp_path / "run/config.json").read_text())["deterministic"] is True
    seen.clear()
    assert (
        invoke("--out", tmp_path / "run", "--resume", "--max-steps", 3).exit_code == 0
    )  # the run's config.json's setting
    assert seen == [(True, True)]
    seen.clear()
    train(config(data, tmp_path / "plain", model_json, max_steps=1))
    assert seen == [(False, False)]


def test_an_op_without_a_deterministic_kernel_stops_a_deterministic_run_in_one_line_naming_it(
    data, model_json, tmp_path, monkeypatch
):
    forward = Block.residual

    def unpooled(self, x, *args, **kwargs):  # max_unpool has no deterministic kernel, on the CPU too
        indices = torch.arange(0, 2 * x.shape[-1], 2).expand_as(x).contiguous()
        return forward(self, x, *args, **kwargs) + torch.nn.functional.max_unpool1d(x, indices, 2)[..., ::2]

    monkeypatch.setattr(Block, "residual", unpooled)
    result = invoke(*run_flags(data, tmp_path / "run", model_json, max_steps=2), "--deterministic")
    assert result.exit_code == 2 and result.output.strip().splitlines()[-1] == (
        "Error: --deterministic cannot hold here: max_unpooling2d_forward_out has no deterministic implementation "
        f"in torch {torch.__version__}; train without it"
    ), result.output
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["config.json"]  # no checkpoint: a new run's directory
    assert invoke(*run_flags(data, tmp_path / "run", model_json, max_steps=1)).exit_code == 0  # the op runs there


def test_activation_checkpointing_recomputes_each_block_and_trains_the_same_run(
    data, model_json, tmp_path, monkeypatch
):
    calls, forward = [], Block.residual

    def counted(self, *args, **kwargs):
        calls.append(torch.is_grad_enabled())
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(Block, "residual", counted)
    runs = {}
    for recompute in (False, True):
        calls.clear()
        train(
            config(
                data,
                tmp_path / str(recompute),
                model_json,
                max_steps=3,
                eval_interval=3,
                activation_checkpointing=recompute,
            )
        )
        runs[recompute] = calls.count(True)  # the blocks' forwards with gradients: training's, and the recomputed ones
    assert (runs[False], runs[True]) == (3 * MODEL["n_layers"], 2 * 3 * MODEL["n_layers"])
    for key in ("loss", "grad_norm", "val_loss"):
        assert [r[key] for r in records(tmp_path / "True", key)] == [r[key] for r in records(tmp_path / "False", key)]
    a, b = weights(tmp_path / "True/latest"), weights(tmp_path / "False/latest")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_train_restores_signal_handlers(data, model_json, tmp_path):
    before = {s: signal.getsignal(s) for s in SIGNALS}
    train(config(data, tmp_path / "run", model_json, max_steps=1))
    assert {s: signal.getsignal(s) for s in SIGNALS} == before


def test_the_host_waits_for_the_device_only_at_log_eval_and_checkpoint_steps(data, model_json, tmp_path, monkeypatch):
    synced, sync = [], Trainer._sync

    def counting_sync(self, window):
        synced.append((self.step, len(window)))
        return sync(self, window)

    monkeypatch.setattr(Trainer, "_sync", counting_sync)
    run = tmp_path / "run"
    train(config(data, run, model_json, max_steps=12, log_interval=5, eval_interval=6, checkpoint_interval=0))
    assert synced == [(1, 1), (5, 4), (6, 1), (10, 4), (12, 2)]  # steps 2-4, 7-9 and 11 ran without a sync
    assert [r["step"] for r in records(run)] == [1, 5, 10, 12]


def test_a_non_finite_loss_between_syncs_is_caught_and_never_checkpointed(data, model_json, tmp_path, monkeypatch):
    forward, calls = TransformerLM.forward, []

    def poisoned(self, idx, targets=None, cache=None):
        logits, loss = forward(self, idx, targets, cache)
        calls.append(1)
        return logits, loss * float("nan") if len(calls) == 7 else loss

    monkeypatch.setattr(TransformerLM, "forward", poisoned)
    run = tmp_path / "run"
    with pytest.raises(
        TrainingError, match=r"^step 7: the loss is nan; stopping \(the last checkpoint, step-000005_tokens-640 in "
    ):
        train(config(data, run, model_json, max_steps=20, log_interval=10, checkpoint_interval=5))
    assert latest_step(run) == 5 and [r["step"] for r in records(run)] == [1]
    with pytest.raises(TrainingError, match="no checkpoint was written"):
        calls.clear()
        train(config(data, tmp_path / "fresh", model_json, max_steps=20, log_interval=10, checkpoint_interval=0))


def test_validation_reports_bits_per_byte_of_the_text(data, model_json, tmp_path):
    from gptkit.eval.loss import eval_sequences
    from gptkit.train.data import data_tokenizer

    run = tmp_path / "run"
    train(config(data, run, model_json, max_steps=3, eval_interval=3, eval_tokens=1024))
    (record,) = records(run, "val_bpb")
    data_dir = ShardDir(data)
    tok = data_tokenizer(data_dir)
    model, _ = load_model(run / "latest")
    sequences = torch.from_numpy(
        eval_sequences(ShardData(data_dir, "val", tok.vocab_size, tok.fingerprint, 32), 32, 1024)[0]
    ).long()
    losses = model.eval().token_losses(sequences[:, :-1], sequences[:, 1:])
    eot = tok.special_tokens["<|endoftext|>"]
    nbytes = torch.tensor([0 if i == eot else len(tok.decode_bytes([i])) for i in range(tok.vocab_size)])[
        sequences[:, 1:]
    ]
    assert (nbytes == 0).any()  # the end-of-text targets count in neither sum
    assert record["val_loss"] == pytest.approx(losses.double().mean().item(), rel=1e-6)
    assert record["val_bpb"] == pytest.approx(
        (losses.double() * (nbytes > 0)).sum().item() / np.log(2) / nbytes.sum().item(), rel=1e-6
    )


class Killed(BaseException):
    """Stands for a SIGKILL: nothing after it runs."""


def test_a_kill_while_deleting_an_old_checkpoint_leaves_no_half_checkpoint(data, model_json, tmp_path, monkeypatch):
    rmtree = shutil.rmtree

    def dying_rmtree(path, *args, **kwargs):
        if not (Path(path) / "model.safetensors").exists():  # not a whole checkpoint: a temporary directory
            return rmtree(path, *args, **kwargs)
        (Path(path) / "model.safetensors").unlink()  # the first file gone, then the process dies
        raise Killed

    monkeypatch.setattr(shutil, "rmtree", dying_rmtree)
    run = tmp_path / "run"
    with pytest.raises(Killed):
        train(config(data, run, model_json, max_steps=3, checkpoint_interval=1, keep_last=1))
    monkeypatch.undo()
    load_model(run / "latest")
    for checkpoint in (run / "checkpoints").glob("step-*"):
        load_model(checkpoint)


def test_library_errors_name_the_setting(data, model_json, tmp_path):
    """Settings, data and model errors name TrainConfig's fields (the CLI shows them as flags,
    tests/integration/test_train_cli.py's test_bad_settings and test_bad_data_directories)."""
    with pytest.raises(SettingError, match="^context_length 128: longer than the model's context of 64"):
        settle(config(data, tmp_path / "r", model_json, context_length=128))
    (tmp_path / "empty").mkdir()
    with pytest.raises(SettingError, match=f"^data {re.escape(str(tmp_path / 'empty'))}: no tokenizer.json"):
        train(config(tmp_path / "empty", tmp_path / "r", model_json))
    (tmp_path / "bad.json").write_text("{oops")
    with pytest.raises(SettingError, match=f"^model {re.escape(str(tmp_path / 'bad.json'))}: not valid JSON"):
        train(config(data, tmp_path / "r", str(tmp_path / "bad.json")))
    assert not (tmp_path / "r").exists()


def test_a_checkpoint_is_written_from_the_things_it_holds_alone(small_tokenizer, tmp_path):
    """save_checkpoint takes what it writes (CS336's save_checkpoint(model, optimizer, iteration, out)),
    not a run: another tool can write a checkpoint that sample and a resume read."""
    from gptkit.model.config import ModelConfig
    from gptkit.train.checkpointing import save_checkpoint

    tok, _ = small_tokenizer
    model = TransformerLM(ModelConfig(**MODEL))
    optimizer = AdamW([(list(model.named_parameters()), 0.0)], lr=1e-3)
    tensors = {f"adamw/{name}": t for name, t in optimizer.state_dict()["tensors"].items()}
    save_checkpoint(model, tensors, {"step": 3, "tokens": 96}, tmp_path / "ckpt", tok)
    loaded, loaded_tok = load_model(tmp_path / "ckpt")
    assert all(torch.equal(t, model.state_dict()[n]) for n, t in loaded.state_dict().items())
    assert loaded_tok.fingerprint == tok.fingerprint
    assert json.loads((tmp_path / "ckpt" / "trainer_state.json").read_text()) == {"step": 3, "tokens": 96}
    assert load_file(tmp_path / "ckpt" / "optimizer.safetensors").keys() == tensors.keys()
