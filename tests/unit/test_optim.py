"""The optimizers (AdamW against torch, Muon), weight decay, the optimizers' memory, and the
learning-rate schedules (cosine as the design writes it, wsd, warmups, re-plans): train/optim.py."""

import math

import numpy as np
import pytest
import torch

from gptkit.model.config import ModelConfig
from gptkit.model.info import training_memory
from gptkit.model.model import TransformerLM
from gptkit.train.budget import Planner
from gptkit.train.config import TrainConfig
from gptkit.train.optim import AdamW, Muon, build_optimizers, orthogonalize
from gptkit.train.schedule import Schedule, cosine_lr, warmup_steps, wsd_lr
from tests.training import MODEL


def schedule_of(config, total_steps):
    """The schedule of a run of `config` (its lr and min_lr given) and `total_steps`."""
    return Schedule(config.lr_schedule, config.lr_schedule.min_lr / config.optim.lr, total_steps)


def small_model(seed=0, **overrides):
    torch.manual_seed(seed)
    return TransformerLM(ModelConfig(**{**MODEL, "context_length": 32, **overrides}))


def random_batch(seed, batch=4, length=32):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, MODEL["vocab_size"], (batch, length + 1), generator=g)
    return tokens[:, :-1], tokens[:, 1:]


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
    ref = torch.optim.AdamW(
        [
            {"params": [params[n] for n, _ in decayed], "weight_decay": 0.1},
            {"params": [params[n] for n, _ in plain], "weight_decay": 0.0},
        ],
        lr=1e-2,
        betas=(0.9, 0.95),
        eps=1e-8,
        fused=fused or None,
    )
    schedule = schedule_of(TrainConfig.of(data="d", out="o", lr=1e-2, min_lr=1e-3, warmup_steps=10), 100)
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
    many, ones = (
        Muon([(f"w{i}", p) for i, p in enumerate(batched)], lr=0.02),
        [Muon([("w", p)], lr=0.02) for p in alone],
    )
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
    cfg = TrainConfig.of(data="d", out="o", lr=1e-3, optimizer="muon", muon_lr=0.02)
    muon = build_optimizers(model, cfg.optim)["muon"]
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
    opts = build_optimizers(model, TrainConfig.of(data="d", out="o", lr=1e-3, optimizer="muon").optim)
    hidden = {n for n, _ in opts["muon"].params}
    (decayed, wd), (plain, no_wd) = opts["adamw"].groups
    assert hidden == {
        n
        for n in names
        if n.endswith(("wq.weight", "wk.weight", "wv.weight", "wo.weight", "w1.weight", "w2.weight", "w3.weight"))
    }
    assert {n for n, _ in plain} == names - hidden and not decayed and no_wd == 0
    assert {"embedding.weight", "lm_head.weight", "norm.weight"} <= {n for n, _ in plain}
    assert set(build_optimizers(model, TrainConfig.of(data="d", out="o", lr=1e-3).optim)) == {"adamw"}


@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
@pytest.mark.parametrize("tied", [True, False])
def test_the_memory_estimate_counts_what_the_optimizers_keep(optimizer, tied):
    """training_memory (model info's estimate, which train checks against the memory available)
    counts the optimizers' state as they hold it: Muon's one momentum where it is used."""
    model = small_model(tie_embeddings=tied)
    optimizers = build_optimizers(model, TrainConfig.of(data="d", out="o", lr=1e-3, optimizer=optimizer).optim)
    kept = {
        k: sum(t.numel() * t.element_size() for t in o.state_dict()["tensors"].values()) for k, o in optimizers.items()
    }
    memory = training_memory(model.config, 4, 4, muon=optimizer == "muon")
    assert {k: memory[k] for k in ("weights", "gradients", *kept)} == {
        "weights": 4 * model.num_params(),
        "gradients": 4 * model.num_params(),
        **kept,
    }
    assert set(memory) == {"weights", "gradients", *kept, "activations"}


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("decay_embeddings", [False, True])
def test_weight_decay_only_on_matrices_and_embeddings_on_request(tied, decay_embeddings):
    model = small_model(tie_embeddings=tied)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = build_optimizers(
        model, TrainConfig.of(data="d", out="o", lr=0.1, weight_decay=0.5, decay_embeddings=decay_embeddings).optim
    )["adamw"]
    for p in model.parameters():
        p.grad = torch.zeros_like(p)  # no gradient step: only the decay moves a weight
    opt.step()
    embeddings = {"embedding.weight", "lm_head.weight"}
    for name, p in model.named_parameters():
        decays = p.dim() >= 2 and (name not in embeddings or decay_embeddings)
        torch.testing.assert_close(p.detach(), before[name] * (0.95 if decays else 1.0), rtol=0, atol=0, msg=name)
    assert ("lm_head.weight" in before) != tied


# -- schedules -------------------------------------------------------------------------------------


def seed_cosine(t, lr_max, lr_min, warmup_iters, cosine_cycle_iters):
    """The design's schedule, as the seed writes it."""
    if t < warmup_iters:
        return t / warmup_iters * lr_max
    if t <= cosine_cycle_iters:
        return lr_min + 0.5 * (1 + math.cos((t - warmup_iters) / (cosine_cycle_iters - warmup_iters) * math.pi)) * (
            lr_max - lr_min
        )
    return lr_min


def test_cosine_lr_is_the_seeds_formula_at_every_step():
    assert [cosine_lr(t, 1e-3, 1e-4, 7, 21) for t in range(25)] == [
        seed_cosine(t, 1e-3, 1e-4, 7, 21) for t in range(25)
    ]
    assert cosine_lr(0, 1e-3, 1e-4, 7, 21) == 0.0 and cosine_lr(7, 1e-3, 1e-4, 7, 21) == 1e-3
    assert cosine_lr(21, 1e-3, 1e-4, 7, 21) == pytest.approx(1e-4) and cosine_lr(24, 1e-3, 1e-4, 7, 21) == 1e-4


def test_the_trainers_schedule_is_the_seeds():
    c = TrainConfig.of(data="d", out="o", lr=1e-3, min_lr=1e-4, warmup_steps=10, decay_steps=90)
    schedule = schedule_of(c, 100)
    assert [c.optim.lr * schedule(t) for t in range(100)] == pytest.approx(
        [seed_cosine(t, 1e-3, 1e-4, 10, 90) for t in range(100)]
    )
    c = c.replace(decay_steps=None)  # the default: min_lr at the last step
    assert [c.optim.lr * schedule_of(c, 100)(t) for t in range(100)] == pytest.approx(
        [seed_cosine(t, 1e-3, 1e-4, 10, 99) for t in range(100)]
    )


def test_wsd_schedule_has_the_same_warmup_then_cools_down_linearly():
    c = TrainConfig.of(data="d", out="o", lr=1e-3, min_lr=1e-4, warmup_steps=10, schedule="wsd", cooldown_fraction=0.2)
    schedule = schedule_of(c, 100)
    assert [schedule(t) for t in range(10)] == pytest.approx([cosine_lr(t, 1.0, 0.1, 10, 99) for t in range(10)])
    assert all(schedule(s) == 1.0 for s in range(10, 80))
    cooldown = [schedule(s) for s in range(79, 100)]
    assert cooldown[-1] == pytest.approx(0.1) and cooldown[1] < 1.0
    assert np.diff(cooldown[1:]) == pytest.approx([-0.9 / 20] * 19)  # linear
    assert schedule(80) == pytest.approx(wsd_lr(80, 1.0, 0.1, 10, 80, 99))


def test_a_given_warmup_is_obeyed_and_the_default_is_a_fraction_of_the_planned_steps():
    given, unset = (
        TrainConfig.of(data="d", out="o", lr=1e-3, warmup_steps=100),
        TrainConfig.of(data="d", out="o", lr=1e-3),
    )
    assert [warmup_steps(given.lr_schedule, n) for n in (5000, 500, 46, 4)] == [100, 100, 100, 100]
    assert [warmup_steps(unset.lr_schedule, n) for n in (5000, 500, 46)] == [250, 25, 2]


def test_a_checkpoint_from_before_resumes_on_the_warmup_it_was_cut_to():
    """Runs begun before a given warmup was obeyed had it cut to a tenth of the steps; their
    checkpoints' schedules hold no warmup, and they go on with the one they had."""
    config = TrainConfig.of(data="d", out="o", lr=1e-3, min_lr=1e-4, warmup_steps=4, max_steps=80)
    planner = Planner(config.length, config.lr_schedule, 1e-3, 1, True)
    saved = {"total_steps": 80, "replanned_at": None, "scale_then": None, "rising": False}
    planner.load_state_dict(saved)
    assert planner.schedule.warmup == 4
    planner.load_state_dict({**saved, "total_steps": 30})
    assert planner.schedule.warmup == 3
    planner.load_state_dict({**saved, "warmup": 4})
    assert planner.schedule.warmup == 4


@pytest.mark.parametrize("schedule", ["cosine", "wsd"])
def test_a_replanned_schedule_goes_on_without_a_jump_and_ends_at_min_lr(schedule):
    c = TrainConfig.of(data="d", out="o", lr=1e-3, min_lr=1e-4, warmup_steps=10, schedule=schedule)
    for before, after, at in (
        (100, 300, 60),
        (100, 70, 60),
        (100, 300, 95),
        (100, 300, 5),
        (10**12, 40, 4),
        (1000, 30, 20),
    ):
        old = schedule_of(c, before)
        new = old.replan(at, after)
        assert new(at) == pytest.approx(old(at)) and new(after - 1) == pytest.approx(0.1)
        peak = max(at, new.warmup) if old.warming_up(at) else at
        # a warmup goes on to the peak; past it, only wsd's stable phase, still at the peak, stays there
        assert (old.warming_up(at) or old(at) == 1.0) == (max(new(s) for s in range(at, after)) == 1.0)
        assert all(new(s) <= new(s + 1) + 1e-12 for s in range(at, peak))  # rising to it without a jump ...
        assert all(abs(new(s + 1) - new(s)) <= max(1 / new.warmup, 0.2) for s in range(at, after - 1))
        assert all(new(s) >= new(s + 1) - 1e-12 for s in range(peak, after - 1))  # ... and no rise after it
    assert schedule_of(c, 100).replan(5, 300).replanned_at is None  # in the warmup: simply the plan for 300 steps
    if schedule == "wsd":  # in the stable phase: the cool-down moves to the new end
        assert schedule_of(c, 100).replan(60, 300).replanned_at is None
