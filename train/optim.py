"""AdamW and Muon, and the learning-rate schedules.

Both optimizers keep their state as plain named tensors (`state_tensors()`), which checkpoints
store in safetensors; the step count lives in the trainer's state.
"""
from __future__ import annotations

import math

import torch


class AdamW:
    """AdamW (Loshchilov & Hutter): Adam's bias-corrected moments with decoupled weight decay,
    theta <- theta - lr * wd * theta, then theta <- theta - lr * m_hat / (sqrt(v_hat) + eps).
    The same arithmetic, in the same order, as torch.optim.AdamW.

    `groups`: [(named parameters, weight_decay)], the decay applied to that group.
    """

    def __init__(self, groups, lr, betas=(0.9, 0.95), eps=1e-8):
        self.groups = [([(n, p) for n, p in params], wd) for params, wd in groups]
        self.lr, self.betas, self.eps = lr, betas, eps
        self.steps = 0
        self.exp_avg = {n: torch.zeros_like(p) for params, _ in self.groups for n, p in params}
        self.exp_avg_sq = {n: torch.zeros_like(p) for params, _ in self.groups for n, p in params}

    @torch.no_grad()
    def step(self, lr_scale=1.0):
        self.steps += 1
        lr, (beta1, beta2) = self.lr * lr_scale, self.betas
        bias1, bias2 = 1 - beta1**self.steps, 1 - beta2**self.steps
        for params, weight_decay in self.groups:
            for name, p in params:
                if p.grad is None:
                    continue
                m, v = self.exp_avg[name], self.exp_avg_sq[name]
                if weight_decay:
                    p.mul_(1 - lr * weight_decay)
                m.lerp_(p.grad, 1 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                denom = (v.sqrt() / math.sqrt(bias2)).add_(self.eps)
                p.addcdiv_(m, denom, value=-lr / bias1)

    def state_tensors(self):
        return {**{f"{n}.exp_avg": t for n, t in self.exp_avg.items()},
                **{f"{n}.exp_avg_sq": t for n, t in self.exp_avg_sq.items()}}

    def load_state_tensors(self, tensors, steps):
        for n in self.exp_avg:
            self.exp_avg[n].copy_(tensors[f"{n}.exp_avg"])
            self.exp_avg_sq[n].copy_(tensors[f"{n}.exp_avg_sq"])
        self.steps = steps


def orthogonalize(G, steps=5):
    """The nearest semi-orthogonal matrix to G, approximately: a quintic Newton-Schulz iteration
    with the coefficients of modded-nanogpt, which pushes every singular value towards 1
    (into about [0.7, 1.2]) in a few matrix products. float32 (these CPUs have no fast bf16);
    bf16 on CUDA."""
    a, b, c = 3.4445, -4.7750, 2.0315
    X = G.bfloat16() if G.is_cuda else G.float()
    tall = X.size(-2) > X.size(-1)
    if tall:
        X = X.mT
    X = X / (X.norm(dim=(-2, -1), keepdim=True) + 1e-7)
    for _ in range(steps):
        A = X @ X.mT
        X = a * X + (b * A + c * A @ A) @ X
    return (X.mT if tall else X).to(G.dtype)


class Muon:
    """Momentum with Nesterov, then the update orthogonalized (Newton-Schulz) and scaled by
    sqrt(max(1, rows / cols)) so that its RMS does not depend on the shape: for the hidden
    weight matrices. No weight decay, as in modded-nanogpt's speedruns."""

    def __init__(self, params, lr, momentum=0.95):
        self.params = [(n, p) for n, p in params]
        self.lr, self.momentum = lr, momentum
        self.momentum_buffer = {n: torch.zeros_like(p) for n, p in self.params}

    @torch.no_grad()
    def step(self, lr_scale=1.0):
        lr = self.lr * lr_scale
        for name, p in self.params:
            if p.grad is None:
                continue
            buf = self.momentum_buffer[name]
            buf.lerp_(p.grad, 1 - self.momentum)
            update = orthogonalize(p.grad.lerp(buf, self.momentum))  # Nesterov: look ahead along the momentum
            p.add_(update, alpha=-lr * max(1.0, p.size(-2) / p.size(-1)) ** 0.5)

    def state_tensors(self):
        return {f"{n}.momentum_buffer": t for n, t in self.momentum_buffer.items()}

    def load_state_tensors(self, tensors, steps):
        for n, t in self.momentum_buffer.items():
            t.copy_(tensors[f"{n}.momentum_buffer"])


def lr_scale(step, config, total_steps):
    """The learning rate at `step` as a fraction of the peak (min_lr / lr at the end).

    cosine: linear warmup while step < warmup_steps, (step + 1) / warmup_steps of the peak;
            cosine from the peak to min_lr for warmup_steps <= step <= decay_steps; min_lr after.
    wsd:    the same warmup, then constant, then a linear cool-down to min_lr over the last
            cooldown_fraction of the steps (reaching min_lr at the last step).
    """
    floor = config.min_lr / config.lr if config.lr else 0.0
    if step < config.warmup_steps:
        return (step + 1) / config.warmup_steps
    if config.schedule == "cosine":
        decay_steps = config.decay_steps if config.decay_steps is not None else total_steps - 1
        if step > decay_steps:
            return floor
        ratio = (step - config.warmup_steps) / max(decay_steps - config.warmup_steps, 1)
        return floor + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (1.0 - floor)
    cooldown = int(config.cooldown_fraction * total_steps)
    start = total_steps - cooldown
    if step < start or cooldown == 0:
        return 1.0
    return 1.0 - (step - start + 1) / cooldown * (1.0 - floor)


def build_optimizers(model, config):
    """AdamW for everything, or Muon for the hidden matrices and AdamW for the rest. Weight decay
    goes to matrices only (not norm gains), and to the embedding only if decay_embeddings."""
    hidden, decayed, plain = [], [], []
    for name, p in model.named_parameters():
        is_embedding = name in ("embedding.weight", "lm_head.weight")
        if p.dim() >= 2 and not is_embedding and config.optimizer == "muon":
            hidden.append((name, p))
        elif p.dim() >= 2 and (not is_embedding or config.decay_embeddings):
            decayed.append((name, p))
        else:
            plain.append((name, p))
    adamw = AdamW([(decayed, config.weight_decay), (plain, 0.0)], config.lr, (config.beta1, config.beta2), config.eps)
    optimizers = {"adamw": adamw}
    if hidden:
        optimizers["muon"] = Muon(hidden, config.muon_lr, config.muon_momentum)
    return optimizers
