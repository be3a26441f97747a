"""The training stage: optimizers (AdamW against torch, Muon), schedules, weight decay, the
loader, gradient accumulation, clipping, exact resume, DDP (torchrun, gloo on CPU), signals,
kills during checkpoint saves, non-finite losses, bad input and the `train` CLI end to end.

Everything runs tiny models (d_model 32, 2 layers, context 32-64) for a few steps on CPU;
in-process runs use `train(config)` or the click command, the signal/kill/DDP tests run
`python -m train` / `torchrun` as subprocesses.
"""
import dataclasses
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

from gptkit.model.checkpoint import file_crc32, load_model
from gptkit.model.config import ModelConfig, load_config
from gptkit.model.config import preset_names as model_preset_names
from gptkit.model.info import training_memory
from gptkit.model.model import Block, TransformerLM
from gptkit.shared.errors import SettingError
from gptkit.shared.shard_dir import ShardDir
from gptkit.shared.shards import ShardHeader
from tests.conftest import assert_input_error, english_like
from gptkit.train.cli import cli
from gptkit.train.config import FIELDS, TrainConfig, load_train_config, preset_names
from gptkit.train.data import Loader, ShardData
from gptkit.train.optim import AdamW, Muon, Schedule, build_optimizers, cosine_lr, orthogonalize, warmup_steps, wsd_lr
from gptkit.train.budget import Planner
from gptkit.train.data import identity_difference
from gptkit.train.prepare import Dist, prepare_run
from gptkit.train.run import train
from gptkit.train.trainer import Trainer, TrainingError

ROOT = Path(__file__).resolve().parents[1]
ENV = {**{k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}, "OMP_NUM_THREADS": "1"}
MODEL = dict(vocab_size=450, context_length=64, d_model=32, n_layers=2, n_heads=2, d_ff=64)
SIGNALS = (signal.SIGINT, signal.SIGTERM)


# -- fixtures and helpers ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def data(small_tokenizer, tmp_path_factory):
    """A pretokenize directory: 60 documents (54 train, 6 val) in several train shards."""
    from gptkit.pretokenize.encode import Split, encode_corpus
    from gptkit.shared.corpus import Corpus

    tok, _ = small_tokenizer
    root = tmp_path_factory.mktemp("trainer-data")
    (root / "docs.txt").write_text("<|endoftext|>".join(english_like(200, seed=i) for i in range(60)))
    encode_corpus(Corpus([root / "docs.txt"]), tok, root / "data", split=Split(val_fraction=0.1), shard_tokens=4000,
                  workers=1, quiet=True)
    return root / "data"


@pytest.fixture(scope="module")
def model_json(tmp_path_factory):
    return write_model(tmp_path_factory.mktemp("model") / "model.json")


@pytest.fixture(autouse=True)
def restore_signal_handlers():
    """train() installs SIGINT/SIGTERM handlers; keep pytest's own afterwards."""
    saved = {s: signal.getsignal(s) for s in SIGNALS}
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)


def write_model(path, **overrides):
    path.write_text(json.dumps({**MODEL, **overrides}))
    return str(path)


def settings(data, out, model, **overrides):
    return {"data": str(data), "out": str(out), "model": model, "device": "cpu", "batch_size": 4, "context_length": 32,
            "max_steps": 4, "warmup_steps": 2, "lr": 3e-3, "eval_interval": 0, "eval_tokens": 256, "log_interval": 1,
            "checkpoint_interval": 0, **overrides}


def config(*args, **overrides):
    return TrainConfig(**settings(*args, **overrides))


def flags(**kw):
    return [a for k, v in kw.items() for a in (f"--{k.replace('_', '-')}", str(v))]


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def records(run, key="loss"):
    return [r for r in map(json.loads, (Path(run) / "metrics.jsonl").read_text().splitlines()) if key in r]


def weights(checkpoint):
    return load_file(Path(checkpoint) / "model.safetensors")


def comparable(run):
    """A run's metrics without its timings: equal for a resumed run and an uninterrupted one."""
    lines = (Path(run) / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(r).items() if k not in ("tokens_per_s", "elapsed_s")} for r in lines]


def stopped_after(run, step):
    """`run` as if interrupted after its checkpoint of `step`: the later checkpoints gone (their
    records stay, stale, as a kill leaves them), `latest` at it."""
    checkpoints = Path(run) / "checkpoints"
    for later in (c for c in checkpoints.glob("step-*") if int(c.name[5:11]) > step):
        shutil.rmtree(later)
    (Path(run) / "latest").unlink()
    (Path(run) / "latest").symlink_to(Path("checkpoints") / next(checkpoints.glob(f"step-{step:06d}_*")).name)


def small_model(seed=0, **overrides):
    torch.manual_seed(seed)
    return TransformerLM(ModelConfig(**{**MODEL, "context_length": 32, **overrides}))


def random_batch(seed, batch=4, length=32):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, MODEL["vocab_size"], (batch, length + 1), generator=g)
    return tokens[:, :-1], tokens[:, 1:]


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


def python_train(*args, **popen):
    return subprocess.Popen([sys.executable, "-m", "gptkit.train", *map(str, args)], cwd=ROOT, env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)


def wait_for(predicate, process, timeout=60):
    deadline = time.monotonic() + timeout
    while not predicate():
        if process.poll() is not None:
            pytest.fail(f"training exited early ({process.returncode}): {process.communicate()}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail("timed out waiting for training")
        time.sleep(0.02)


def latest_step(run):
    latest = Path(run) / "latest"
    try:
        return json.loads((latest / "trainer_state.json").read_text())["step"]
    except (FileNotFoundError, ValueError):
        return -1


# -- optimizers ------------------------------------------------------------------------------------

@pytest.mark.parametrize("fused", [False, True])
def test_adamw_equals_torch_bit_for_bit_over_100_steps_with_a_changing_lr(fused):
    """Our multi-tensor AdamW against torch.optim.AdamW's default (foreach) path, and our fused
    path (CUDA's default) against torch's fused kernel, which torch also has for the CPU."""
    ours, theirs = small_model(), small_model()
    named = list(ours.named_parameters())
    decayed = [(n, p) for n, p in named if p.dim() >= 2]
    plain = [(n, p) for n, p in named if p.dim() < 2]
    assert decayed and plain
    opt = AdamW([(decayed, 0.1), (plain, 0.0)], lr=1e-2, betas=(0.9, 0.95), eps=1e-8, fused=fused)
    params = dict(theirs.named_parameters())
    ref = torch.optim.AdamW([{"params": [params[n] for n, _ in decayed], "weight_decay": 0.1},
                             {"params": [params[n] for n, _ in plain], "weight_decay": 0.0}], lr=1e-2, betas=(0.9, 0.95),
                            eps=1e-8, fused=fused or None)
    schedule = Schedule(TrainConfig(data="d", out="o", lr=1e-2, min_lr=1e-3, warmup_steps=10), 100)
    for step in range(100):
        scale = schedule(step)
        for model in (ours, theirs):
            model(*random_batch(step))[1].backward()
        opt.step(scale)
        for group in ref.param_groups:
            group["lr"] = 1e-2 * scale
        ref.step()
        ours.zero_grad(set_to_none=True)
        ref.zero_grad(set_to_none=True)
    assert opt.steps == 100
    for name, p in ours.named_parameters():
        assert torch.equal(p, params[name]), name
        assert torch.equal(opt.exp_avg[name], ref.state[params[name]]["exp_avg"]), name
        assert torch.equal(opt.exp_avg_sq[name], ref.state[params[name]]["exp_avg_sq"]), name
    assert not torch.equal(ours.embedding.weight, small_model().embedding.weight)  # it did train


def test_muon_on_a_batch_of_same_shape_matrices_equals_one_at_a_time():
    batched = [torch.nn.Parameter(torch.randn(48, 32, generator=torch.Generator().manual_seed(i))) for i in range(3)]
    alone = [torch.nn.Parameter(p.detach().clone()) for p in batched]
    many, ones = Muon([(f"w{i}", p) for i, p in enumerate(batched)], lr=0.02), [Muon([("w", p)], lr=0.02) for p in alone]
    for step in range(3):
        for p, q in zip(batched, alone):
            p.grad = torch.randn(48, 32, generator=torch.Generator().manual_seed(100 + step))
            q.grad = p.grad.clone()
        many.step()
        for opt in ones:
            opt.step()
    for p, q in zip(batched, alone):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=0)
    assert len(many.same_shape) == 1


@pytest.mark.parametrize("shape", [(128, 32), (32, 128), (64, 48)])
def test_orthogonalize_pushes_singular_values_towards_one(shape):
    G = torch.randn(*shape, generator=torch.Generator().manual_seed(0)) * 3.0
    X = orthogonalize(G)
    assert X.shape == G.shape and X.dtype == G.dtype
    s = torch.linalg.svdvals(X)
    assert s.min() > 0.6 and s.max() < 1.3, s
    U, _, Vh = torch.linalg.svd(G, full_matrices=False)  # the same direction as the polar factor U V^T
    assert torch.nn.functional.cosine_similarity(X.flatten(), (U @ Vh).flatten(), dim=0) > 0.95


def test_muon_step_is_the_scaled_orthogonalized_nesterov_momentum():
    p = torch.nn.Parameter(torch.randn(64, 32))
    before, grad = p.detach().clone(), torch.randn(64, 32)
    p.grad = grad.clone()
    Muon([("w", p)], lr=0.02, momentum=0.95).step(lr_scale=0.5)
    buffer = 0.05 * grad  # lerp from zero
    expected = before - 0.01 * 2**0.5 * orthogonalize(grad.lerp(buffer, 0.95))
    torch.testing.assert_close(p.detach(), expected)


def test_muon_lowers_the_loss_on_a_fixed_batch():
    model = small_model()
    cfg = TrainConfig(data="d", out="o", optimizer="muon", muon_lr=0.02)
    muon = build_optimizers(model, cfg)["muon"]
    batch = random_batch(0)
    first = model(*batch)[1].item()
    for _ in range(20):
        model(*batch)[1].backward()
        muon.step()  # Muon alone: only the hidden matrices move
        model.zero_grad(set_to_none=True)
    assert model(*batch)[1].item() < first - 0.3


def test_build_optimizers_assigns_parameters():
    model = small_model(tie_embeddings=False)
    names = {n for n, _ in model.named_parameters()}
    opts = build_optimizers(model, TrainConfig(data="d", out="o", optimizer="muon"))
    hidden = {n for n, _ in opts["muon"].params}
    (decayed, wd), (plain, no_wd) = opts["adamw"].groups
    assert hidden == {n for n in names if n.endswith(("wq.weight", "wk.weight", "wv.weight", "wo.weight",
                                                      "w1.weight", "w2.weight", "w3.weight"))}
    assert {n for n, _ in plain} == names - hidden and not decayed and no_wd == 0
    assert {"embedding.weight", "lm_head.weight", "norm.weight"} <= {n for n, _ in plain}
    assert set(build_optimizers(model, TrainConfig(data="d", out="o"))) == {"adamw"}


@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
@pytest.mark.parametrize("tied", [True, False])
def test_the_memory_estimate_counts_what_the_optimizers_keep(optimizer, tied):
    """training_memory (model info's estimate, which train checks against the memory available)
    counts the optimizers' state as they hold it: Muon's one momentum where it is used."""
    model = small_model(tie_embeddings=tied)
    optimizers = build_optimizers(model, TrainConfig(data="d", out="o", optimizer=optimizer))
    kept = {k: sum(t.numel() * t.element_size() for t in o.state_dict()["tensors"].values()) for k, o in optimizers.items()}
    memory = training_memory(model.config, 4, 4, muon=optimizer == "muon")
    assert {k: memory[k] for k in ("weights", "gradients", *kept)} == {"weights": 4 * model.num_params(),
                                                                       "gradients": 4 * model.num_params(), **kept}
    assert set(memory) == {"weights", "gradients", *kept, "activations"}


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("decay_embeddings", [False, True])
def test_weight_decay_only_on_matrices_and_embeddings_on_request(tied, decay_embeddings):
    model = small_model(tie_embeddings=tied)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = build_optimizers(model, TrainConfig(data="d", out="o", lr=0.1, weight_decay=0.5, decay_embeddings=decay_embeddings))["adamw"]
    for p in model.parameters():
        p.grad = torch.zeros_like(p)  # no gradient step: only the decay moves a weight
    opt.step()
    embeddings = {"embedding.weight", "lm_head.weight"}
    for name, p in model.named_parameters():
        decays = p.dim() >= 2 and (name not in embeddings or decay_embeddings)
        torch.testing.assert_close(p.detach(), before[name] * (0.95 if decays else 1.0), rtol=0, atol=0, msg=name)
    assert ("lm_head.weight" in before) != tied


# -- the config: checked when it is made, one flag per field ---------------------------------------

def test_every_field_of_train_config_is_a_flag_with_its_help_and_type():
    options = {option.name: option for option in cli.commands["run"].params if option.name in FIELDS}
    assert list(options) == list(FIELDS)
    click_types = {bool: "boolean", int: "integer", float: "float", str: "text"}
    for name, option in options.items():
        assert option.help.startswith(FIELDS[name].metadata["help"]), name
        default = FIELDS[name].default
        if default not in (None, dataclasses.MISSING):
            assert option.type.name == click_types[type(default)], name


@pytest.mark.parametrize("setting, value, message", [
    ("batch_size", 0, "batch_size 0: expected a whole number, 1 or more"),
    ("lr", float("nan"), "lr nan: expected a finite number 0 or more"),
    ("loader", "shuffled", "loader 'shuffled': expected one of random, sequential"),
    ("verify_data", "no", "verify_data 'no': expected true or false"),
    ("max_time", "soon", "max_time 'soon': expected a duration above 0"),
    ("data", "", "data '': expected a pretokenize output directory"),
    ("model", 3, "model 3: expected a preset name"),
])
def test_a_train_config_checks_every_field_when_made_and_names_it(setting, value, message):
    with pytest.raises(SettingError, match=f"^{re.escape(message)}") as error:
        TrainConfig(**{"data": "d", "out": "o", setting: value})
    assert error.value.setting == setting  # the command line shows the flag, --batch-size ...


@pytest.mark.parametrize("given, message", [
    ({"max_steps": 3, "max_tokens": 999}, "max_steps 3 and --max-tokens 999: give one (each sets the length of the run)"),
    ({"max_tokens": 999, "max_time": "1m"}, "max_tokens 999 and --max-time 1m: give one"),
    ({"lr": 0.0, "min_lr": 1e-4}, "min_lr 0.0001: above the peak --lr 0.0"),
    ({"schedule": "wsd", "decay_steps": 50}, "decay_steps 50: only with --schedule cosine"),
])
def test_settings_that_cannot_hold_together_are_refused_naming_the_first(given, message):
    """Where a setting would be dropped or overruled by another, the two are refused together."""
    with pytest.raises(SettingError, match=f"^{re.escape(message)}") as error:
        TrainConfig(data="d", out="o", **given)
    assert error.value.setting == message.split()[0]


def test_a_train_config_takes_paths_and_needs_data_and_out(tmp_path):
    config = TrainConfig(data=tmp_path / "d", out=tmp_path / "o")
    assert config.data == str(tmp_path / "d") and json.loads(json.dumps(config.to_dict()))["out"] == str(tmp_path / "o")
    with pytest.raises(SettingError, match="^out is needed"):
        load_train_config("tiny", {"data": "d"})


@pytest.mark.parametrize("model", model_preset_names())
def test_every_model_preset_has_a_training_preset(model):
    config = load_train_config(model, {"data": "d", "out": "o"})
    assert config.model == model and config.lr > config.min_lr


# -- schedules -------------------------------------------------------------------------------------

def seed_cosine(t, lr_max, lr_min, warmup_iters, cosine_cycle_iters):
    """The design's schedule, as the seed writes it."""
    if t < warmup_iters:
        return t / warmup_iters * lr_max
    if t <= cosine_cycle_iters:
        return lr_min + 0.5 * (1 + math.cos((t - warmup_iters) / (cosine_cycle_iters - warmup_iters) * math.pi)) * (lr_max - lr_min)
    return lr_min


def test_cosine_lr_is_the_seeds_formula_at_every_step():
    assert [cosine_lr(t, 1e-3, 1e-4, 7, 21) for t in range(25)] == [seed_cosine(t, 1e-3, 1e-4, 7, 21) for t in range(25)]
    assert cosine_lr(0, 1e-3, 1e-4, 7, 21) == 0.0 and cosine_lr(7, 1e-3, 1e-4, 7, 21) == 1e-3
    assert cosine_lr(21, 1e-3, 1e-4, 7, 21) == pytest.approx(1e-4) and cosine_lr(24, 1e-3, 1e-4, 7, 21) == 1e-4


def test_the_trainers_schedule_is_the_seeds():
    c = TrainConfig(data="d", out="o", lr=1e-3, min_lr=1e-4, warmup_steps=10, decay_steps=90)
    schedule = Schedule(c, 100)
    assert [c.lr * schedule(t) for t in range(100)] == pytest.approx([seed_cosine(t, 1e-3, 1e-4, 10, 90) for t in range(100)])
    c.decay_steps = None  # the default: min_lr at the last step
    assert [c.lr * Schedule(c, 100)(t) for t in range(100)] == pytest.approx([seed_cosine(t, 1e-3, 1e-4, 10, 99) for t in range(100)])


def test_wsd_schedule_has_the_same_warmup_then_cools_down_linearly():
    c = TrainConfig(data="d", out="o", lr=1e-3, min_lr=1e-4, warmup_steps=10, schedule="wsd", cooldown_fraction=0.2)
    schedule = Schedule(c, 100)
    assert [schedule(t) for t in range(10)] == pytest.approx([cosine_lr(t, 1.0, 0.1, 10, 99) for t in range(10)])
    assert all(schedule(s) == 1.0 for s in range(10, 80))
    cooldown = [schedule(s) for s in range(79, 100)]
    assert cooldown[-1] == pytest.approx(0.1) and cooldown[1] < 1.0
    assert np.diff(cooldown[1:]) == pytest.approx([-0.9 / 20] * 19)  # linear
    assert schedule(80) == pytest.approx(wsd_lr(80, 1.0, 0.1, 10, 80, 99))


def test_a_given_warmup_is_obeyed_and_the_default_is_a_fraction_of_the_planned_steps():
    given, unset = TrainConfig(data="d", out="o", warmup_steps=100), TrainConfig(data="d", out="o")
    assert [warmup_steps(given, n) for n in (5000, 500, 46, 4)] == [100, 100, 100, 100]
    assert [warmup_steps(unset, n) for n in (5000, 500, 46)] == [250, 25, 2]


def test_a_checkpoint_from_before_resumes_on_the_warmup_it_was_cut_to():
    """Runs begun before a given warmup was obeyed had it cut to a tenth of the steps; their
    checkpoints' schedules hold no warmup, and they go on with the one they had."""
    planner = Planner(TrainConfig(data="d", out="o", warmup_steps=4, max_steps=80), 1, True)
    saved = {"total_steps": 80, "replanned_at": None, "scale_then": None, "rising": False}
    planner.load_state_dict(saved)
    assert planner.schedule.warmup == 4
    planner.load_state_dict({**saved, "total_steps": 30})
    assert planner.schedule.warmup == 3
    planner.load_state_dict({**saved, "warmup": 4})
    assert planner.schedule.warmup == 4


@pytest.mark.parametrize("schedule", ["cosine", "wsd"])
def test_a_replanned_schedule_goes_on_without_a_jump_and_ends_at_min_lr(schedule):
    c = TrainConfig(data="d", out="o", lr=1e-3, min_lr=1e-4, warmup_steps=10, schedule=schedule)
    for before, after, at in ((100, 300, 60), (100, 70, 60), (100, 300, 95), (100, 300, 5), (10**12, 40, 4), (1000, 30, 20)):
        old = Schedule(c, before)
        new = old.replan(at, after)
        assert new(at) == pytest.approx(old(at)) and new(after - 1) == pytest.approx(0.1)
        peak = max(at, new.warmup) if old.warming_up(at) else at
        # a warmup goes on to the peak; past it, only wsd's stable phase, still at the peak, stays there
        assert (old.warming_up(at) or old(at) == 1.0) == (max(new(s) for s in range(at, after)) == 1.0)
        assert all(new(s) <= new(s + 1) + 1e-12 for s in range(at, peak))  # rising to it without a jump ...
        assert all(abs(new(s + 1) - new(s)) <= max(1 / new.warmup, 0.2) for s in range(at, after - 1))
        assert all(new(s) >= new(s + 1) - 1e-12 for s in range(peak, after - 1))  # ... and no rise after it
    assert Schedule(c, 100).replan(5, 300).replanned_at is None  # in the warmup: simply the plan for 300 steps
    if schedule == "wsd":  # in the stable phase: the cool-down moves to the new end
        assert Schedule(c, 100).replan(60, 300).replanned_at is None


# -- the loader ------------------------------------------------------------------------------------

SIZES = (150, 10, 90, 257)  # a shard too short for any sequence of 16 + 1 in the middle


@pytest.fixture(scope="module")
def positions(tmp_path_factory):
    """Plain llm.c shards whose tokens are their positions in the train stream."""
    directory = tmp_path_factory.mktemp("positions")
    start = 0
    for i, n in enumerate(SIZES):
        tokens = np.arange(start, start + n, dtype="<u2")
        (directory / f"pos_train_{i:06d}.bin").write_bytes(ShardHeader(np.dtype("<u2"), n).to_bytes() + tokens.tobytes())
        start += n
    return directory


def open_positions(directory, T=16):
    return ShardData(ShardDir(directory), "train", 65536, "0" * 16, T)


def loader(data, mode, batch_size, context_length, seed, rank=0, world=1, grad_accum=1):
    """A Loader of `batch_size` sequences a process, the `rank`th of `world`."""
    settings = TrainConfig(data="d", out="o", loader=mode, batch_size=batch_size * world, seed=seed, grad_accum=grad_accum)
    return Loader(data, settings, context_length, Dist(rank=rank, world=world))


def inputs_targets(loader, step, micro=0):
    sequences = loader.batch(step, micro)
    return sequences[:, :-1], sequences[:, 1:]


def test_loader_is_deterministic_in_seed_step_micro_rank(positions):
    data = open_positions(positions)
    a, b = (loader(data, "random", 4, 16, seed=7, grad_accum=2) for _ in range(2))
    x = a.batch(3, 1)
    assert x.shape == (4, 17) and x.dtype == np.uint16  # the shards' width: widened on the device
    assert np.array_equal(x, b.batch(3, 1))
    assert not np.array_equal(x, a.batch(4, 1)) and not np.array_equal(x, a.batch(3, 0))
    assert not np.array_equal(x, loader(data, "random", 4, 16, seed=8, grad_accum=2).batch(3, 1))


def test_random_offsets_stay_inside_one_shard(positions):
    data, T = open_positions(positions), 16
    starts = np.concatenate([[0], np.cumsum(SIZES)])
    for step in range(50):
        x, y = inputs_targets(loader(data, "random", 8, T, seed=1), step)
        assert np.array_equal(x[:, 1:], y[:, :-1])
        for row, target in zip(x, y):
            assert np.array_equal(np.diff(np.append(row, target[-1])), np.ones(T))  # T + 1 consecutive tokens
            shard = int(np.searchsorted(starts, row[0], side="right")) - 1
            assert shard != 1 and 0 <= row[0] - starts[shard] <= SIZES[shard] - T - 1


@pytest.mark.parametrize("mode", ["random", "sequential"])
def test_ranks_take_disjoint_slices_of_the_global_batch(positions, mode):
    data = open_positions(positions)
    for step, micro in [(0, 0), (2, 1), (5, 0)]:
        whole = loader(data, mode, 4, 16, seed=3, grad_accum=2).batch(step, micro)
        parts = [loader(data, mode, 2, 16, seed=3, rank=r, world=2, grad_accum=2).batch(step, micro) for r in (0, 1)]
        assert np.array_equal(np.concatenate(parts), whole)


def test_sequential_reads_the_stream_across_shards_and_wraps(positions):
    data, T, B = open_positions(positions), 16, 3
    total = sum(SIZES)
    sequential = loader(data, "sequential", B, T, seed=0, grad_accum=2)
    for step in range(12):  # 12 * 2 * 48 tokens: across every shard boundary and twice around
        for micro in (0, 1):
            x, y = inputs_targets(sequential, step, micro)
            start = (step * 2 + micro) * B * T
            expected = (start + np.arange(B * T + 1)) % total
            assert np.array_equal(x.reshape(-1), expected[:-1]) and np.array_equal(y[:, -1], expected[T::T])
            assert np.array_equal(x[:, 1:], y[:, :-1])


# -- the trainer: accumulation, clipping, resume -------------------------------------------------------

def test_gradient_accumulation_matches_one_big_batch(data, model_json, tmp_path, captured_grads):
    for out, batch, accum in (("big", 4, 1), ("accum", 2, 2)):
        train(config(data, tmp_path / out, model_json, batch_size=batch, grad_accum=accum, loader="sequential", max_steps=2))
    big, accum = captured_grads[:2], captured_grads[2:]
    for g1, g2 in zip(big, accum):
        for name in g1:
            torch.testing.assert_close(g2[name], g1[name], atol=1e-7, rtol=1e-4, msg=name)
    for r1, r2 in zip(records(tmp_path / "big"), records(tmp_path / "accum"), strict=True):
        assert (r1["step"], r1["tokens"]) == (r2["step"], r2["tokens"])
        assert r1["loss"] == pytest.approx(r2["loss"], abs=1e-5) and r1["grad_norm"] == pytest.approx(r2["grad_norm"], rel=1e-5)
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
    run = dict(max_steps=8, checkpoint_interval=4, eval_interval=4, optimizer=optimizer,
               grad_accum=2 if optimizer == "muon" else 1)
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


def test_resume_refuses_changed_settings_and_fresh_runs_refuse_a_used_dir(data, model_json, tmp_path):
    run = tmp_path / "run"
    base = flags(data=data, out=run, model=model_json, device="cpu", batch_size=4, context_length=32, max_steps=2,
                 warmup_steps=1, eval_interval=0, eval_tokens=256)
    res = invoke(*base)
    assert res.exit_code == 0, res.output
    assert_input_error(invoke(*base), "--out", "--resume")  # a fresh run into a run directory
    assert_input_error(invoke("--out", run, "--resume", "--lr", "0.5"), "lr", "0.5")
    assert_input_error(invoke("--out", run, "--resume", "--max-steps", "1"), "--max-steps", "has done 2 steps")
    assert_input_error(invoke("--out", tmp_path / "none", "--resume"), "config.json")
    res = invoke("--out", run, "--resume", "--log-interval", "5")  # not a fixed setting: resumes (nothing left to do)
    assert res.exit_code == 0, res.output


def test_a_run_keeps_its_model_when_the_model_file_is_edited(data, tmp_path):
    model_file, run = write_model(tmp_path / "model.json"), tmp_path / "run"
    train(config(data, run, model_file, max_steps=2))
    saved = json.loads((run / "config.json").read_text())
    assert saved["model"] == ModelConfig(**MODEL).to_dict()  # the model itself, not the file's name
    assert load_config(run / "config.json") == ModelConfig(**MODEL)  # a run's config.json serves as a model config
    write_model(tmp_path / "model.json", d_model=64, n_heads=4)
    res = invoke("--out", run, "--resume", "--max-steps", 4)
    assert res.exit_code == 0, (res.output, res.exception)
    assert latest_step(run) == 4 and load_model(run / "latest")[0].config == ModelConfig(**MODEL)


def test_a_checkpoint_of_another_model_is_refused(data, model_json, tmp_path):
    run, other = tmp_path / "run", tmp_path / "other"
    train(config(data, run, model_json, max_steps=2))
    train(config(data, other, write_model(tmp_path / "other.json", d_ff=96), max_steps=2))
    res = invoke("--out", run, "--resume", "--from-checkpoint", other / "latest", "--max-steps", 4)
    assert_input_error(res, "--resume", "its model has d_ff 96, the run's 64")
    saved = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**saved, "model": {**saved["model"], "d_ff": 96}}))
    assert_input_error(invoke("--out", run, "--resume", "--max-steps", 4), "its model has d_ff 64, the run's 96")
    assert latest_step(run) == 2


def test_activation_checkpointing_recomputes_each_block_and_trains_the_same_run(data, model_json, tmp_path, monkeypatch):
    calls, forward = [], Block.forward

    def counted(self, *args, **kwargs):
        calls.append(torch.is_grad_enabled())
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(Block, "forward", counted)
    runs = {}
    for recompute in (False, True):
        calls.clear()
        train(config(data, tmp_path / str(recompute), model_json, max_steps=3, eval_interval=3, activation_checkpointing=recompute))
        runs[recompute] = calls.count(True)  # the blocks' forwards with gradients: training's, and the recomputed ones
    assert (runs[False], runs[True]) == (3 * MODEL["n_layers"], 2 * 3 * MODEL["n_layers"])
    for key in ("loss", "grad_norm", "val_loss"):
        assert [r[key] for r in records(tmp_path / "True", key)] == [r[key] for r in records(tmp_path / "False", key)]
    a, b = weights(tmp_path / "True/latest"), weights(tmp_path / "False/latest")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_init_from_starts_a_new_run_from_a_checkpoints_weights(data, model_json, tmp_path):
    source, copy, tuned, scratch = (tmp_path / name for name in ("source", "copy", "tuned", "scratch"))
    train(config(data, source, model_json, max_steps=40))
    start = weights(source / "latest")
    # with lr 0 a step changes nothing: the run holds the checkpoint's weights bit for bit, as float32
    res = invoke(*flags(data=data, out=copy, init_from=source / "latest", device="cpu", batch_size=4, context_length=32,
                        max_steps=1, lr=0, eval_tokens=256))
    assert res.exit_code == 0, res.output
    saved = weights(copy / "latest")
    assert saved.keys() == start.keys() and all(torch.equal(saved[k], start[k]) for k in start)
    recorded = json.loads((copy / "config.json").read_text())
    assert recorded["init_from"] == str((source / "latest").resolve()) and recorded["model"] == ModelConfig(**MODEL).to_dict()
    state = json.loads((copy / "latest/trainer_state.json").read_text())
    assert state["step"] == 1 and state["optimizer_steps"] == {"adamw": 1}  # a fresh optimizer, not the source's 40 steps
    # training on from the checkpoint starts where it ended, far below a random model's first loss
    train(config(data, tuned, None, init_from=source / "latest", max_steps=2))
    train(config(data, scratch, model_json, max_steps=2))
    assert records(tuned)[0]["loss"] < records(scratch)[0]["loss"] - 0.5


def test_a_run_from_init_from_resumes_exactly(data, model_json, tmp_path):
    source = tmp_path / "source"
    train(config(data, source, model_json, max_steps=3))
    run = dict(init_from=source / "latest", max_steps=6, checkpoint_interval=3)
    train(config(data, tmp_path / "straight", None, **run))
    shutil.copytree(tmp_path / "straight", tmp_path / "resumed", symlinks=True)
    stopped_after(tmp_path / "resumed", 3)
    shutil.rmtree(source)  # not needed: the run goes on from its own checkpoint
    res = invoke("--out", tmp_path / "resumed", "--resume")  # the run's model, recorded in full by the run
    assert res.exit_code == 0, res.output
    a, b = weights(tmp_path / "straight/latest"), weights(tmp_path / "resumed/latest")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_init_from_refuses_another_tokenizer_a_model_and_a_missing_checkpoint(data, model_json, small_text, tmp_path):
    from gptkit.model.checkpoint import save_model
    from gptkit.shared.corpus import Corpus
    from gptkit.tokenizer import train_bpe

    (tmp_path / "corpus.txt").write_text(small_text[:20_000])
    other = train_bpe(Corpus([tmp_path / "corpus.txt"]), 300, quiet=True)
    torch.manual_seed(0)
    save_model(TransformerLM(ModelConfig(**{**MODEL, "vocab_size": 300})), other, tmp_path / "other", eot_id=None)
    base = flags(data=data, device="cpu", batch_size=4, context_length=32, max_steps=1, eval_tokens=256)
    res = invoke(*base, "--out", tmp_path / "a", "--init-from", tmp_path / "other")
    assert_input_error(res, f"{data}: encoded with tokenizer", "(450 tokens)", f"{other.fingerprint} (300 tokens)",
                       "encode the data with")
    res = invoke(*base, "--out", tmp_path / "b", "--init-from", tmp_path / "other", "--model", model_json)
    assert_input_error(res, "--init-from", "not both")
    res = invoke(*base, "--out", tmp_path / "c", "--init-from", tmp_path / "none")
    assert_input_error(res, "--init-from", "no such checkpoint directory")
    res = invoke(*base, "--out", tmp_path / "d", "--init-from", tmp_path / "other", "--config", "tiny")  # a preset's model
    assert_input_error(res, "--config tiny: gives a model, and --init-from", "give one of them")
    assert not any((tmp_path / name / "checkpoints").exists() for name in "abcd")


def test_a_resume_keeps_its_own_weights_and_refuses_another_init_from(data, model_json, tmp_path):
    source, run, scratch = tmp_path / "source", tmp_path / "run", tmp_path / "scratch"
    train(config(data, source, model_json, max_steps=2))
    train(config(data, run, None, init_from=source / "latest", max_steps=2))
    train(config(data, scratch, model_json, max_steps=2))
    res = invoke("--out", run, "--resume", "--init-from", source / "latest", "--max-steps", 3)  # the run's own, given again
    assert res.exit_code == 0, res.output
    started = str((source / "latest").resolve())
    assert_input_error(invoke("--out", run, "--resume", "--init-from", run / "latest", "--max-steps", 4),
                       f"--init-from {run / 'latest'}: a resumed run goes on from its own checkpoints", f"(it started from {started})")
    assert_input_error(invoke("--out", scratch, "--resume", "--init-from", source / "latest", "--max-steps", 3),
                       "--init-from", "(it started from a random initialization)")
    assert latest_step(run) == 3 and latest_step(scratch) == 2
    assert json.loads((run / "config.json").read_text())["init_from"] == started
    assert json.loads((scratch / "config.json").read_text())["init_from"] is None


def test_checkpoints_keep_only_the_state_a_resume_restores_and_old_ones_resume_exactly(data, model_json, tmp_path):
    straight = tmp_path / "straight"
    # warmup 0: the warmup a checkpoint of before resumes on is the one it had (cut to a tenth of the steps)
    train(config(data, straight, model_json, max_steps=6, checkpoint_interval=3, warmup_steps=0))
    state = json.loads((straight / "latest/trainer_state.json").read_text())
    assert set(state) == {"step", "tokens", "config_digest", "data", "optimizer_steps", "schedule", "rng"}
    assert list(state["rng"]) == ["torch"]

    # A run of the format before: config.json names the model file; trainer_state.json holds the
    # loader's settings and the CUDA generators' state, which no resume ever read, a digest of the
    # settings with the data's path, and not the data's content nor the schedule's warmup.
    old = tmp_path / "old"
    shutil.copytree(straight, old, symlinks=True)
    stopped_after(old, 3)
    settings_then = {**json.loads((old / "config.json").read_text()), "model": model_json}
    (old / "config.json").write_text(json.dumps(settings_then))
    checkpoint = old / "checkpoints/step-000003_tokens-384"
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    del state["data"], state["schedule"]["warmup"]
    state.update(config_digest=TrainConfig(**settings_then).digest(settings_then["data"]), rng={**state["rng"], "cuda": []},
                 loader={"mode": "random", "seed": 1337, "batch_size": 4, "context_length": 32, "world_size": 1, "grad_accum": 1})
    (checkpoint / "trainer_state.json").write_text(json.dumps(state))
    checkpoint_config = json.loads((checkpoint / "config.json").read_text())
    checkpoint_config["crc32"]["trainer_state.json"] = file_crc32(checkpoint / "trainer_state.json")
    (checkpoint / "config.json").write_text(json.dumps(checkpoint_config))

    res = invoke("--out", old, "--resume")
    assert res.exit_code == 0, (res.output, res.exception)
    assert [{k: v for k, v in r.items() if k not in ("tokens_per_s", "elapsed_s")} for r in records(old)] == \
        [{k: v for k, v in r.items() if k not in ("tokens_per_s", "elapsed_s")} for r in records(straight)]
    a, b = weights(straight / "latest"), weights(old / "latest")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_resume_extends_or_shortens_a_run_from_where_it_stopped(data, model_json, tmp_path):
    common = dict(max_steps=8, checkpoint_interval=4, warmup_steps=2)
    train(config(data, tmp_path / "straight", model_json, **common))
    for name, steps in (("longer", 12), ("shorter", 6)):
        run = tmp_path / name
        shutil.copytree(tmp_path / "straight", run, symlinks=True)
        stopped_after(run, 4)
        res = invoke("--config", "tiny", "--out", run, "--resume", "--max-steps", steps)  # --config: the Makefile's
        assert res.exit_code == 0, (res.output, res.exception)
        assert "--config tiny is not applied" in res.stderr and f"re-planned: 8 -> {steps} steps" in res.stdout
        logs, straight = records(run), records(tmp_path / "straight")
        assert [r["step"] for r in logs] == list(range(1, steps + 1))
        assert [r["loss"] for r in logs[:5]] == [r["loss"] for r in straight[:5]]  # the first step after the resume too
        assert logs[4]["lr"] == straight[4]["lr"] and logs[-1]["lr"] == pytest.approx(3e-4)  # no jump; min_lr (lr / 10) at the end
        (replan,) = [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "replan" in r]
        assert replan["step"] == 4 and replan["replan"]["total_steps"] == steps
        assert json.loads((run / "config.json").read_text())["max_steps"] == steps
        assert json.loads((run / "latest/trainer_state.json").read_text())["schedule"]["total_steps"] == steps


# -- a run that moves --------------------------------------------------------------------------------

def test_a_run_and_its_data_copied_elsewhere_resume_exactly_given_the_datas_new_place(data, model_json, tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    shutil.copytree(data, old / "data")
    run = dict(max_steps=8, checkpoint_interval=4, eval_interval=4)
    train(config(old / "data", tmp_path / "straight", model_json, **run))
    train(config(old / "data", old / "run", model_json, **run))
    stopped_after(old / "run", 4)
    shutil.copytree(old, new, symlinks=True)  # to another machine, say
    shutil.rmtree(old)
    assert_input_error(invoke("--out", new / "run", "--resume"), f"--data {(old / 'data').resolve()}: no such directory",
                       "if it moved, give its new place with --data DIR")
    res = invoke("--out", new / "run", "--resume", "--data", new / "data")
    assert res.exit_code == 0, (res.output, res.exception)
    assert comparable(new / "run") == comparable(tmp_path / "straight")
    a, b = weights(tmp_path / "straight/latest"), weights(new / "run/latest")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert json.loads((new / "run/config.json").read_text())["data"] == str((new / "data").resolve())
    res = invoke("--out", new / "run", "--resume", "--max-steps", 9)  # the run's data is at its new place now
    assert res.exit_code == 0, (res.output, res.exception)


def test_a_resume_on_other_data_is_refused_naming_what_differs(data, model_json, small_tokenizer, tmp_path):
    from gptkit.pretokenize.encode import Split, encode_corpus
    from gptkit.shared.corpus import Corpus

    (tmp_path / "other.txt").write_text("<|endoftext|>".join(english_like(200, seed=100 + i) for i in range(60)))
    encode_corpus(Corpus([tmp_path / "other.txt"]), small_tokenizer[0], tmp_path / "other", split=Split(val_fraction=0.1),
                  shard_tokens=4000, workers=1, quiet=True)
    run = tmp_path / "run"
    train(config(data, run, model_json, max_steps=2))
    res = invoke("--out", run, "--resume", "--data", tmp_path / "other", "--max-steps", 3)
    assert_input_error(res, f"--data {(tmp_path / 'other').resolve()}: not the data the run was trained on (",
                       "give --data the run's data")
    assert latest_step(run) == 2 and json.loads((run / "config.json").read_text())["data"] == str(Path(data).resolve())
    then, now = ({"train": [["d_train_000001.bin", 5, crc]], "val": []} for crc in ("0000aaaa", "0000bbbb"))
    assert identity_difference(then, now) == "train shard d_train_000001.bin: CRC-32 0000bbbb, the run's 0000aaaa"
    assert identity_difference(now, {**now, "val": [["d_val_000000.bin", 5, "0000cccc"]]}) == "val shards: 1, the run's 0"
    assert identity_difference(now, now) is None


def test_a_renamed_run_resumes_without_its_init_from_and_names_a_moved_file_it_needs(data, model_json, tmp_path):
    source, run, straight, moved = (tmp_path / name for name in ("source", "run", "straight", "moved"))
    train(config(data, source, model_json, max_steps=2))
    hellaswag = tmp_path / "hellaswag.jsonl"
    hellaswag.write_text("".join(json.dumps({"ctx": english_like(8, seed=i), "label": i % 4,
                                             "endings": [english_like(3, seed=10 * i + j) for j in range(4)]}) + "\n"
                                 for i in range(4)))
    train(config(data, run, None, init_from=source / "latest", eval_hellaswag=hellaswag, max_steps=4, checkpoint_interval=2))
    shutil.copytree(run, straight, symlinks=True)
    stopped_after(run, 2)
    run.rename(moved)
    shutil.rmtree(source)  # not needed: the run goes on from its own checkpoints
    hellaswag.rename(tmp_path / "moved.jsonl")  # needed: scored at every evaluation
    assert_input_error(invoke("--out", moved, "--resume"), f"--eval-hellaswag {hellaswag.resolve()}: no such file",
                       "if it moved, give its new place with --eval-hellaswag FILE")
    res = invoke("--out", moved, "--resume", "--eval-hellaswag", tmp_path / "moved.jsonl")
    assert res.exit_code == 0, (res.output, res.exception)
    assert comparable(moved) == comparable(straight) and "hellaswag_acc" in comparable(moved)[-1]
    assert json.loads((moved / "config.json").read_text())["eval_hellaswag"] == str((tmp_path / "moved.jsonl").resolve())


def test_a_given_warmup_is_obeyed_however_long_the_run(data, model_json, tmp_path):
    """The lr a log line records is the one its step trained with: step s (from 1) is at (s - 1) / warmup of the peak."""
    for steps, warmup in ((8, 4), (4, 8)):
        run = tmp_path / f"{steps}-{warmup}"
        res = invoke(*flags(data=data, out=run, model=model_json, device="cpu", batch_size=4, context_length=32, lr=1e-3,
                            max_steps=steps, warmup_steps=warmup, eval_interval=0, eval_tokens=256, log_interval=1))
        assert res.exit_code == 0, res.output
        lrs = [r["lr"] for r in records(run)]
        assert len(lrs) == steps and lrs[:min(steps, warmup)] == pytest.approx([1e-3 * s / warmup for s in range(min(steps, warmup))])
    assert lrs[-1] == pytest.approx(1e-3 * 3 / 8)  # a run shorter than its warmup ends warming up
    assert records(tmp_path / "8-4")[4]["lr"] == pytest.approx(1e-3)  # the peak where the warmup ends


def test_max_time_plans_the_steps_to_end_on_time(data, model_json, tmp_path, monkeypatch):
    monkeypatch.setattr("gptkit.train.budget.UNPLANNED", 50_000)  # a planning bug ends the test instead of running forever
    run = tmp_path / "run"
    res = invoke(*flags(data=data, out=run, model=model_json, device="cpu", batch_size=4, context_length=32, max_time="2s",
                        warmup_steps=2, eval_interval=0, eval_tokens=256, log_interval=5, checkpoint_interval=0))
    assert res.exit_code == 0, (res.output, res.exception)
    assert "steps 0 -> 2s of training" in res.stdout and "/? (timing the steps)" in res.stdout
    replans = [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "replan" in r]
    assert replans and all("--max-time 2s" in r["replan"]["reason"] for r in replans)
    logs = records(run)
    assert logs[-1]["step"] == replans[-1]["replan"]["total_steps"] < 50_000  # the last plan was carried out
    assert logs[-1]["lr"] == pytest.approx(1e-4)  # and the schedule ended with it (min_lr, a tenth of lr)
    assert json.loads((run / "latest/trainer_state.json").read_text())["step"] == logs[-1]["step"]
    assert_input_error(invoke(*flags(data=data, out=tmp_path / "r2", model=model_json, max_time="soon")), "--max-time", "soon")


def test_train_restores_signal_handlers(data, model_json, tmp_path):
    before = {s: signal.getsignal(s) for s in SIGNALS}
    train(config(data, tmp_path / "run", model_json, max_steps=1))
    assert {s: signal.getsignal(s) for s in SIGNALS} == before


@pytest.fixture
def nan_run(data, model_json, tmp_path, monkeypatch):
    """A CLI run whose 4th step has a NaN loss (checkpoints every step): (result, run directory)."""
    forward, calls = TransformerLM.forward, []

    def poisoned(self, idx, targets=None, cache=None):
        logits, loss = forward(self, idx, targets, cache)
        if self.training:
            calls.append(1)
            if len(calls) == 4:
                loss = loss * float("nan")
        return logits, loss

    monkeypatch.setattr(TransformerLM, "forward", poisoned)
    run = tmp_path / "run"
    res = invoke(*flags(data=data, out=run, model=model_json, device="cpu", batch_size=4, context_length=32, max_steps=10,
                        warmup_steps=1, eval_interval=0, eval_tokens=256, checkpoint_interval=1, log_interval=1))
    return res, run


def test_non_finite_loss_stops_with_an_error_and_keeps_the_last_checkpoint(nan_run):
    """A training failure, not bad input: exit status 1."""
    res, run = nan_run
    assert res.exit_code == 1 and isinstance(res.exception, SystemExit), (res.output, res.exception)
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and re.match(r"Error: step \d+: the loss is nan; stopping", lines[0]) and "Traceback" not in res.output
    assert str(run) in lines[0]
    assert [r["step"] for r in records(run)] == [1, 2, 3] and latest_step(run) == 3
    model, _ = load_model(run / "latest")
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_non_finite_loss_error_names_the_step_as_the_logs_do(nan_run):
    assert nan_run[0].stderr.startswith("Error: step 4: the loss is nan")


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
    with pytest.raises(TrainingError, match=r"^step 7: the loss is nan; stopping \(the last checkpoint, step-000005_tokens-640 in "):
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
    sequences = torch.from_numpy(eval_sequences(ShardData(data_dir, "val", tok.vocab_size, tok.fingerprint, 32), 32, 1024)).long()
    losses = model.eval().token_losses(sequences[:, :-1], sequences[:, 1:])
    eot = tok.special_tokens["<|endoftext|>"]
    nbytes = torch.tensor([0 if i == eot else len(tok.decode_bytes([i])) for i in range(tok.vocab_size)])[sequences[:, 1:]]
    assert (nbytes == 0).any()  # the end-of-text targets count in neither sum
    assert record["val_loss"] == pytest.approx(losses.double().mean().item(), rel=1e-6)
    assert record["val_bpb"] == pytest.approx((losses.double() * (nbytes > 0)).sum().item() / np.log(2) / nbytes.sum().item(), rel=1e-6)


def test_a_length_on_the_command_line_beats_the_presets(data, tmp_path):
    where = {"data": "d", "out": "o"}
    assert load_train_config("gpt2-small", where).max_tokens == 10_000_000_000
    assert load_train_config("gpt2-small", {**where, "max_steps": 12}).max_tokens is None
    assert load_train_config("gpt2-small", {**where, "max_tokens": 5000}).max_tokens == 5000
    assert load_train_config("gpt2-small", {**where, "max_time": "1m"}).max_tokens is None


def test_two_lengths_are_refused_from_flags_a_settings_file_and_a_library_call(data, tmp_path):
    out, two = tmp_path / "r", tmp_path / "two.json"
    refused = "--max-steps 3 and --max-tokens 999: give one (each sets the length of the run)"
    assert_input_error(invoke("--config", "tiny", "--data", data, "--out", out, "--max-steps", 3, "--max-tokens", 999), refused)
    two.write_text(json.dumps({"model": "tiny", "max_steps": 3, "max_tokens": 999}))
    assert_input_error(invoke("--config", two, "--data", data, "--out", out), refused)
    assert load_train_config(two, {"data": "d", "out": "o", "max_time": "1m"}).max_steps is None  # a flag's length: the file's go
    with pytest.raises(SettingError, match="^max_steps 3 and --max-tokens 999: give one"):
        train(TrainConfig(data=str(data), out=str(out), max_steps=3, max_tokens=999))
    assert not out.exists()


@pytest.mark.parametrize("preset", preset_names())
def test_presets_compile_on_cuda_only(preset):
    assert load_train_config(preset, {"data": "d", "out": "o"}).compile is None  # None: compile where the device is CUDA


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


def test_a_checkpoint_a_killed_writer_left_aside_is_read_where_it_lies_and_put_back_by_the_next_save(data, model_json,
                                                                                                      tmp_path):
    """A writer killed inside the swap of a checkpoint directory (shared/files.py, atomic_directory)
    leaves nothing under its name, the whole old one aside as .NAME.old-PID. Sampling the run's
    latest reads it there and changes nothing; a resume reads it there and goes on exactly; the
    resumed run, a writer, puts it back before it writes."""
    from gptkit.sample.cli import cli as sample_cli

    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    run = dict(max_steps=8, checkpoint_interval=4)
    train(config(data, straight, model_json, **run))
    shutil.copytree(straight, resumed, symlinks=True)
    stopped_after(resumed, 4)
    pid = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout)
    name = (resumed / "latest").resolve().name
    (resumed / "checkpoints" / name).rename(resumed / "checkpoints" / f".{name}.old-{pid}")
    left = sorted(os.listdir(resumed / "checkpoints"))
    res = CliRunner().invoke(sample_cli, ["--checkpoint", str(resumed / "latest"), "--prompt", "the", "--max-new-tokens", "4",
                                          "--seed", "1", "--device", "cpu"])
    assert res.exit_code == 0, (res.output, res.exception)
    assert sorted(os.listdir(resumed / "checkpoints")) == left == [f".{name}.old-{pid}"]
    train(config(data, resumed, model_json, **run), resume=True)
    assert comparable(resumed) == comparable(straight)
    a, b = weights(straight / "latest"), weights(resumed / "latest")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert sorted(os.listdir(resumed / "checkpoints")) == [name, "step-000008_tokens-1024"]


# -- subprocesses: signals, kills, DDP -------------------------------------------------------------------

def run_flags(data, out, model, **kw):
    base = dict(data=data, out=out, model=model, device="cpu", batch_size=4, context_length=32, warmup_steps=1,
                eval_interval=0, eval_tokens=256, log_interval=1)
    return flags(**{k: v for k, v in {**base, **kw}.items() if v is not None})


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_training_with_a_checkpoint(data, model_json, tmp_path, signum):
    run = tmp_path / "run"
    proc = python_train(*run_flags(data, run, model_json, max_steps=100000, checkpoint_interval=100000))
    wait_for(lambda: (run / "metrics.jsonl").exists() and len(records(run)) >= 3, proc)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert f"stopped by {signum.name}" in out and f"resume with: gptkit train --out {run} --resume" in out
    last = records(run)[-1]["step"]
    assert latest_step(run) == last >= 3
    load_model(run / "latest")


def test_kill_at_random_moments_leaves_a_resumable_checkpoint(data, model_json, tmp_path):
    run, rng = tmp_path / "run", random.Random(0)
    args = run_flags(data, run, model_json, max_steps=100000, checkpoint_interval=1, keep_last=2)
    for attempt in range(4):
        proc = python_train(*(args if attempt == 0 else ["--out", run, "--resume"]))
        reached = latest_step(run)
        wait_for(lambda: latest_step(run) >= reached + 2, proc)
        time.sleep(rng.uniform(0, 0.05))
        proc.kill()
        proc.communicate()
        latest = (run / "latest").resolve()
        model, tok = load_model(latest)
        state = json.loads((latest / "trainer_state.json").read_text())
        assert latest.name == f"step-{state['step']:06d}_tokens-{state['tokens']}" and state["step"] >= reached + 2
        assert load_file(latest / "optimizer.safetensors")
        for checkpoint in (run / "checkpoints").glob("step-*"):  # the latest and any newer one are whole
            if checkpoint.name >= latest.name:
                load_model(checkpoint)
    proc = python_train("--out", run, "--resume")
    reached = latest_step(run)
    wait_for(lambda: latest_step(run) >= reached + 2, proc)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    steps = [r["step"] for r in records(run)]
    assert steps == list(range(1, steps[-1] + 1))  # records of killed attempts past their checkpoint are dropped
    assert len(list((run / "checkpoints").glob("step-*"))) <= 2


def torchrun(processes, *args):
    """`torchrun --standalone --nproc_per_node=N -m train ARGS` (as `python -m torch.distributed.run`,
    which needs no PATH)."""
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}",
                           "-m", "gptkit.train", *map(str, args)], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=180)


@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
def test_ddp_on_two_processes_matches_one(data, model_json, tmp_path, optimizer):
    common = run_flags(data, None, model_json, batch_size=4, grad_accum=2, max_steps=4, eval_interval=2, optimizer=optimizer)
    single = subprocess.run([sys.executable, "-m", "gptkit.train", *common, "--out", tmp_path / "one"], cwd=ROOT, env=ENV,
                            capture_output=True, text=True, timeout=120)
    assert single.returncode == 0, single.stderr
    ddp = torchrun(2, *common, "--out", tmp_path / "two")
    assert ddp.returncode == 0, ddp.stderr[-3000:]
    assert "cpu x 2 (torch.distributed gloo, DDP, 1 thread)" in ddp.stdout and ddp.stdout.count("| loss ") == 4  # rank 0 alone logs
    for key in ("loss", "val_loss", "val_bpb"):
        one, two = records(tmp_path / "one", key), records(tmp_path / "two", key)
        assert [r["step"] for r in one] == [r["step"] for r in two] and one
        assert [r[key] for r in two] == pytest.approx([r[key] for r in one], abs=1e-5)
    w1, w2 = weights(tmp_path / "one/latest"), weights(tmp_path / "two/latest")
    for name in w1:
        torch.testing.assert_close(w2[name], w1[name], atol=1e-5, rtol=0, msg=name)


def test_torchrun_with_one_process_takes_the_distributed_path(data, model_json, tmp_path):
    """One process under torchrun runs the process group, the DDP wrapper and every collective,
    so a single GPU tests what eight would (here on gloo), and trains as a plain process does."""
    common = run_flags(data, None, model_json, max_steps=3, eval_interval=3, optimizer="muon")
    assert subprocess.run([sys.executable, "-m", "gptkit.train", *common, "--out", tmp_path / "plain"], cwd=ROOT, env=ENV,
                          capture_output=True, timeout=120).returncode == 0
    one = torchrun(1, *common, "--out", tmp_path / "one")
    assert one.returncode == 0, one.stderr[-3000:]
    assert "cpu x 1 (torch.distributed gloo, DDP, 1 thread)" in one.stdout
    for key in ("loss", "grad_norm", "val_loss"):
        assert [r[key] for r in records(tmp_path / "one", key)] == [r[key] for r in records(tmp_path / "plain", key)]


# -- bad input ------------------------------------------------------------------------------------------

def base_flags(data, out, model, **kw):
    return flags(**{**dict(data=data, out=out, model=model, device="cpu", batch_size=4, context_length=32, max_steps=1,
                            warmup_steps=1, eval_interval=0, eval_tokens=256), **kw})


def test_bad_data_directories(data, model_json, small_tokenizer, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_input_error(invoke(*base_flags(empty, tmp_path / "r", model_json)), "--data", "tokenizer.json")
    shutil.copy(small_tokenizer[1], empty / "tokenizer.json")
    assert_input_error(invoke(*base_flags(empty, tmp_path / "r", model_json)), "--data", "no train shards")

    from gptkit.pretokenize.encode import Split, encode_corpus
    from gptkit.shared.corpus import Corpus

    (tmp_path / "tiny.txt").write_text("the cat sat<|endoftext|>on the mat")
    encode_corpus(Corpus([tmp_path / "tiny.txt"]), small_tokenizer[0], tmp_path / "tiny", split=Split(val_fraction=0.5), quiet=True)
    assert_input_error(invoke(*base_flags(tmp_path / "tiny", tmp_path / "r", model_json, context_length=64)),
                       "too few for one sequence of 64")
    assert not (tmp_path / "r").exists()


def test_bad_settings(data, model_json, tmp_path):
    out = tmp_path / "r"
    assert_input_error(invoke(*base_flags(data, out, model_json, context_length=128)), "--context-length 128", "64")
    assert_input_error(invoke("--config", "no-such-preset", *base_flags(data, out, model_json)), "no-such-preset", "tiny")
    (tmp_path / "c.json").write_text(json.dumps({"batch_size": 4, "learning_rate": 1e-3}))
    assert_input_error(invoke("--config", tmp_path / "c.json", *base_flags(data, out, model_json)), "learning_rate")
    assert_input_error(invoke(*base_flags(data, out, model_json, loader="shuffled")), "--loader", "sequential")
    assert_input_error(invoke(*base_flags(data, out, model_json, grad_accum=0)), "--grad-accum")
    with pytest.raises(SettingError, match="^batch_size 3: not divisible among 2 processes"):
        prepare_run(config(data, out, model_json, batch_size=3), dist=Dist(world=2))
    assert not out.exists()


def test_library_errors_name_the_setting(data, model_json, tmp_path):
    """Settings, data and model errors name TrainConfig's fields (the CLI shows them as flags,
    test_bad_settings and test_bad_data_directories)."""
    with pytest.raises(SettingError, match="^context_length 128: longer than the model's context of 64"):
        prepare_run(config(data, tmp_path / "r", model_json, context_length=128))
    with pytest.raises(SettingError, match=f"^data {re.escape(str(tmp_path))}: no tokenizer.json"):
        train(config(tmp_path, tmp_path / "r", model_json))
    (tmp_path / "bad.json").write_text("{oops")
    with pytest.raises(SettingError, match=f"^model {re.escape(str(tmp_path / 'bad.json'))}: not valid JSON"):
        train(config(data, tmp_path / "r", str(tmp_path / "bad.json")))
    assert not (tmp_path / "r").exists()


def test_shards_of_another_tokenizer_are_refused(data, model_json, small_tokenizer, tmp_path):
    from gptkit.pretokenize.encode import Split, encode_corpus
    from gptkit.shared.corpus import Corpus
    from gptkit.tokenizer import Tokenizer, train_bpe

    text = english_like(20_000, seed=5).replace("the", "thy")
    (tmp_path / "other.txt").write_text("<|endoftext|>".join(text[i : i + 5000] for i in range(0, len(text), 5000)))
    other = train_bpe(Corpus([tmp_path / "other.txt"]), 450, quiet=True)
    other.save(tmp_path / "other.json")
    other = Tokenizer.from_file(tmp_path / "other.json")
    ours = small_tokenizer[0]
    assert other.vocab_size == ours.vocab_size and other.fingerprint != ours.fingerprint
    encode_corpus(Corpus([tmp_path / "other.txt"]), other, tmp_path / "mixed", split=Split(val_fraction=0.1), quiet=True)
    shutil.copy(small_tokenizer[1], tmp_path / "mixed/tokenizer.json")  # shards of one tokenizer, another's tokenizer.json
    assert_input_error(invoke(*base_flags(tmp_path / "mixed", tmp_path / "r", model_json)), other.fingerprint, ours.fingerprint)


def test_plain_llmc_shards_train_with_a_warning(data, model_json, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    shutil.copy(data / "tokenizer.json", plain)
    for path in data.glob("*.bin"):
        raw = path.read_bytes()
        header = ShardHeader.from_bytes(raw, path)
        (plain / path.name).write_bytes(ShardHeader(header.dtype, header.num_tokens).to_bytes() + raw[1024:])
    res = invoke(*base_flags(plain, tmp_path / "r", model_json, max_steps=2))
    assert res.exit_code == 0, (res.output, res.exception)
    assert "warning:" in res.stderr and "plain llm.c shard" in res.stderr and "fingerprint" in res.stderr
    assert len(records(tmp_path / "r")) == 2


# -- the CLI end to end ---------------------------------------------------------------------------------

def test_cli_trains_logs_checkpoints_and_samples(data, model_json, tmp_path):
    from gptkit.sample.cli import cli as sample_cli

    run = tmp_path / "runs/NAME"
    res = invoke(*flags(data=data, out=run, model=model_json, device="cpu", batch_size=8, context_length=32, max_steps=30,
                        lr=3e-3, warmup_steps=5, eval_interval=10, eval_tokens=512, log_interval=5, checkpoint_interval=10,
                        keep_last=2, sample_interval=15, sample_tokens=8))
    assert res.exit_code == 0, (res.output, res.exception)
    assert "step 30/30" in res.stdout and f"saved {run}/checkpoints/step-000030_tokens-{30 * 8 * 32}" in res.stdout
    logs = records(run)
    assert [r["step"] for r in logs] == [1, 5, 10, 15, 20, 25, 30]
    assert all({"loss", "lr", "grad_norm", "tokens", "ppl"} <= r.keys() for r in logs)
    assert logs[-1]["tokens"] == 30 * 8 * 32 and logs[-1]["lr"] == pytest.approx(3e-4)
    assert logs[-1]["loss"] < logs[0]["loss"] - 0.5
    val = records(run, "val_loss")
    assert [r["step"] for r in val] == [10, 20, 30] and val[-1]["val_loss"] < val[0]["val_loss"]
    assert [r["step"] for r in records(run, "sample")] == [15, 30]
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-000020_tokens-5120", "step-000030_tokens-7680"]
    assert json.loads((run / "config.json").read_text())["max_steps"] == 30
    model, tok = load_model(run / "latest")
    assert model.config.d_model == 32 and tok.vocab_size == 450
    res = CliRunner().invoke(sample_cli, ["--checkpoint", str(run / "latest"), "--prompt", "the cat", "--max-new-tokens", "8",
                                          "--seed", "1", "--device", "cpu"])
    assert res.exit_code == 0, (res.output, res.exception)
    assert res.stdout.startswith("the cat") and len(res.stdout) > len("the cat\n")


def test_a_model_file_without_a_vocabulary_size_takes_the_datas(data, tmp_path):
    """The README's promise: the vocabulary size comes from the data (a file's own is replaced)."""
    model = {k: v for k, v in MODEL.items() if k != "vocab_size"} | {"context_length": 32}
    (tmp_path / "model.json").write_text(json.dumps(model))
    res = invoke(*flags(data=data, out=tmp_path / "run", model=tmp_path / "model.json", device="cpu", batch_size=2,
                        context_length=32, max_steps=1, eval_interval=0))
    assert res.exit_code == 0, res.output
    saved = json.loads((tmp_path / "run" / "latest" / "config.json").read_text())
    assert saved["model"]["vocab_size"] == saved["tokenizer"]["vocab_size"] == 450


# -- what an earlier gptkit wrote -------------------------------------------------------------------------

def tree(directory):
    """Every path under `directory`, with a file's bytes and a link's target."""
    return {p.relative_to(directory): os.readlink(p) if p.is_symlink() else p.read_bytes() if p.is_file() else None
            for p in sorted(Path(directory).rglob("*"))}


def test_a_data_directory_and_a_run_written_before_issue_30_sample_resume_and_train(tmp_path):
    """tests/fixtures/main-eb0d129 (made by tests/fixtures/make-main-eb0d129.sh with the code of
    eb0d129): a data directory and a run of 3 steps as if killed after its checkpoint of step 2,
    the uninterrupted run's records of step 3 left in metrics.jsonl. Sampling it changes nothing;
    the run resumes on the data at its new place and ends as the uninterrupted run did, writing
    files of the same format; and a new run trains on the data."""
    from gptkit.sample.cli import cli as sample_cli

    shutil.copytree(ROOT / "tests/fixtures/main-eb0d129", tmp_path, symlinks=True, dirs_exist_ok=True)
    run, data = tmp_path / "run", tmp_path / "data"
    before, then = tree(run), comparable(run)
    res = CliRunner().invoke(sample_cli, ["--checkpoint", str(run / "latest"), "--prompt", "the cat", "--max-new-tokens", "8",
                                          "--seed", "1", "--device", "cpu"])
    assert res.exit_code == 0 and res.stdout.startswith("the cat"), (res.output, res.exception)
    assert tree(run) == before

    res = invoke("--out", run, "--resume", "--data", data)
    assert res.exit_code == 0, (res.output, res.exception)
    now = comparable(run)
    assert [sorted(r) for r in now] == [sorted(r) for r in then] and [r["step"] for r in now] == [1, 2, 3, 3]
    assert now == [pytest.approx(r, rel=1e-5) for r in then]  # step 3 trained again, as the run of eb0d129 trained it
    old, new = (run / "checkpoints" / name for name in ("step-000002_tokens-64", "step-000003_tokens-96"))
    assert json.loads((new / "trainer_state.json").read_text()).keys() == json.loads((old / "trainer_state.json").read_text()).keys()
    assert json.loads((new / "config.json").read_text()).keys() == json.loads((old / "config.json").read_text()).keys()
    assert json.loads((run / "config.json").read_text())["data"] == str(data.resolve())
    assert load_file(new / "optimizer.safetensors").keys() == load_file(old / "optimizer.safetensors").keys()

    res = invoke(*flags(data=data, out=tmp_path / "new", model=run / "config.json", device="cpu", batch_size=2,
                        context_length=16, max_steps=2, eval_tokens=32))
    assert res.exit_code == 0, (res.output, res.exception)
    assert latest_step(tmp_path / "new") == 2
