"""AdamW and Muon (the learning rate of each step: schedule.py).

Both optimizers give their state as a step count and plain named tensors (`state_dict()`), which
checkpoints store (train/checkpointing.py: the tensors in safetensors, the count in the trainer's
state); `Optimizers` holds the run's, stepped and saved together.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
import torch.distributed as dist

from .sections import Optim


class AdamW:
    """AdamW (Loshchilov & Hutter): Adam's bias-corrected moments with decoupled weight decay,
    theta <- theta - lr * wd * theta, then theta <- theta - lr * m_hat / (sqrt(v_hat) + eps).

    Each group is updated by multi-tensor kernels, a handful of launches for all its parameters
    rather than several per parameter: torch's `_foreach_*` ops in the same arithmetic, in the
    same order, as torch.optim.AdamW (so on CPU the two agree bit for bit), or with `fused`
    torch's fused AdamW kernel, one launch per group (the default on CUDA).

    `groups`: [(named parameters, weight_decay)], the decay applied to that group.
    """

    def __init__(
        self,
        groups: Iterable[tuple[Iterable[tuple[str, torch.Tensor]], float]],
        lr: float,
        betas: tuple[float, float] = (0.9, 0.95),
        eps: float = 1e-8,
        fused: bool = False,
    ) -> None:
        self.groups = [([(n, p) for n, p in params], wd) for params, wd in groups]
        self.lr, self.betas, self.eps, self.fused = lr, betas, eps, fused
        self.steps = 0
        self.exp_avg = {n: torch.zeros_like(p) for params, _ in self.groups for n, p in params}
        self.exp_avg_sq = {n: torch.zeros_like(p) for params, _ in self.groups for n, p in params}
        if fused:  # the fused kernel reads the step count from a tensor on the parameters' device
            device = next(p.device for params, _ in self.groups for _, p in params)
            self.step_tensor = torch.zeros((), dtype=torch.float32, device=device)

    @torch.no_grad()
    def step(self, lr_scale: float = 1.0) -> None:
        self.steps += 1
        lr = self.lr * lr_scale
        if self.fused:
            self.step_tensor.fill_(self.steps)
        for params, weight_decay in self.groups:
            live = [(n, p, p.grad) for n, p in params if p.grad is not None]
            if not live:
                continue
            ps, grads = [p for _, p, _ in live], [grad for _, _, grad in live]
            exp_avgs, exp_avg_sqs = [self.exp_avg[n] for n, _, _ in live], [self.exp_avg_sq[n] for n, _, _ in live]
            if self.fused:
                torch._fused_adamw_(
                    ps,
                    grads,
                    exp_avgs,
                    exp_avg_sqs,
                    [],
                    [self.step_tensor] * len(ps),
                    lr=lr,
                    beta1=self.betas[0],
                    beta2=self.betas[1],
                    weight_decay=weight_decay,
                    eps=self.eps,
                    amsgrad=False,
                    maximize=False,
                )
            else:
                self._foreach_step(ps, grads, exp_avgs, exp_avg_sqs, lr, weight_decay)

    def _foreach_step(
        self,
        params: list[torch.Tensor],
        grads: list[torch.Tensor],
        exp_avgs: list[torch.Tensor],
        exp_avg_sqs: list[torch.Tensor],
        lr: float,
        weight_decay: float,
    ) -> None:
        beta1, beta2 = self.betas
        bias1, bias2 = 1 - beta1**self.steps, 1 - beta2**self.steps
        if weight_decay:
            torch._foreach_mul_(params, 1 - lr * weight_decay)
        torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2)
        denom = torch._foreach_sqrt(exp_avg_sqs)
        torch._foreach_div_(denom, bias2**0.5)
        torch._foreach_add_(denom, self.eps)
        torch._foreach_addcdiv_(params, exp_avgs, denom, -lr / bias1)

    def state_dict(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "tensors": {
                **{f"{n}.exp_avg": t for n, t in self.exp_avg.items()},
                **{f"{n}.exp_avg_sq": t for n, t in self.exp_avg_sq.items()},
            },
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for n in self.exp_avg:
            self.exp_avg[n].copy_(state["tensors"][f"{n}.exp_avg"])
            self.exp_avg_sq[n].copy_(state["tensors"][f"{n}.exp_avg_sq"])
        self.steps = state["steps"]


def orthogonalize(G: torch.Tensor, steps: int = 5) -> torch.Tensor:
    """The nearest semi-orthogonal matrix to G (or to each matrix of a batch, G's last two dims),
    approximately: a quintic Newton-Schulz iteration with the coefficients of modded-nanogpt,
    which pushes every singular value towards 1 (into about [0.7, 1.2]) in a few matrix
    products. float32 (these CPUs have no fast bf16); bf16 on CUDA."""
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
    weight matrices. No weight decay, as in modded-nanogpt's speedruns.

    Matrices of one shape are orthogonalized together, as one batch. Under torch.distributed
    (every rank holds the same, all-reduced gradients) each rank orthogonalizes its share of
    each batch and an all-gather hands every rank the rest, as modded-nanogpt does, so the
    Newton-Schulz work is split rather than repeated on every rank.
    """

    def __init__(
        self,
        params: Iterable[tuple[str, torch.Tensor]],
        lr: float,
        momentum: float = 0.95,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        self.params = [(n, p) for n, p in params]
        self.lr, self.momentum, self.rank, self.world = lr, momentum, rank, world_size
        self.steps = 0
        self.momentum_buffer = {n: torch.zeros_like(p) for n, p in self.params}
        shapes: dict[tuple[int, ...], list[tuple[str, torch.Tensor]]] = {}
        for n, p in self.params:
            shapes.setdefault(tuple(p.shape), []).append((n, p))
        self.same_shape = list(shapes.values())

    @torch.no_grad()
    def step(self, lr_scale: float = 1.0) -> None:
        self.steps += 1
        lr = self.lr * lr_scale
        for group in self.same_shape:
            live = [(n, p) for n, p in group if p.grad is not None]
            if not live:
                continue
            params, grads = [p for _, p in live], [p.grad for _, p in live]
            buffers = [self.momentum_buffer[n] for n, _ in live]
            # grads: none is None (`live` holds the parameters with a gradient)
            torch._foreach_lerp_(buffers, grads, 1 - self.momentum)  # type: ignore[arg-type]
            nesterov = torch.stack(grads).lerp_(torch.stack(buffers), self.momentum)  # type: ignore[arg-type]  # look ahead along the momentum
            updates = self._orthogonalize_shared(nesterov)
            rows, cols = params[0].shape[-2:]
            torch._foreach_add_(params, list(updates.unbind(0)), alpha=-lr * max(1.0, rows / cols) ** 0.5)

    def _orthogonalize_shared(self, batch: torch.Tensor) -> torch.Tensor:
        if self.world == 1:
            return orthogonalize(batch)
        share = -(-len(batch) // self.world)
        padded = torch.cat([batch, batch.new_zeros(share * self.world - len(batch), *batch.shape[1:])])
        mine = orthogonalize(padded[self.rank * share : (self.rank + 1) * share]).contiguous()
        gathered = [torch.empty_like(mine) for _ in range(self.world)]
        dist.all_gather(gathered, mine)
        return torch.cat(gathered)[: len(batch)]

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "tensors": {f"{n}.momentum_buffer": t for n, t in self.momentum_buffer.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for n, t in self.momentum_buffer.items():
            t.copy_(state["tensors"][f"{n}.momentum_buffer"])
        self.steps = state["steps"]


class Optimizers(dict):
    """The run's optimizers by name: "adamw", and "muon" where Muon trains the hidden matrices."""

    def step(self, lr_scale: float = 1.0) -> None:
        for optimizer in self.values():
            optimizer.step(lr_scale)

    def state_dict(self) -> dict[str, dict[str, Any]]:
        return {name: optimizer.state_dict() for name, optimizer in self.items()}

    def load_state_dict(self, state: dict[str, dict[str, Any]]) -> None:
        for name, optimizer in self.items():
            optimizer.load_state_dict(state[name])


def build_optimizers(model: torch.nn.Module, settings: Optim, rank: int = 0, world_size: int = 1) -> Optimizers:
    """AdamW for everything, or Muon for the hidden matrices and AdamW for the rest. Weight decay
    goes to matrices only (not norm gains), and to the embedding only if decay_embeddings.
    AdamW is fused on CUDA."""
    hidden, decayed, plain = [], [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:  # frozen under LoRA adapters
            continue
        # a LoRA run's trained rows of the embedding and head (model/lora/) are embedding rows too
        is_embedding = name in ("embedding.weight", "position_embedding.weight", "lm_head.weight") or name.endswith(
            ".token_rows"
        )
        if p.dim() >= 2 and not is_embedding and settings.optimizer == "muon":
            hidden.append((name, p))
        elif p.dim() >= 2 and (not is_embedding or settings.decay_embeddings):
            decayed.append((name, p))
        else:
            plain.append((name, p))
    fused = next(model.parameters()).is_cuda
    assert settings.lr is not None  # settled
    adamw = AdamW(
        [(decayed, settings.weight_decay), (plain, 0.0)],
        settings.lr,
        (settings.beta1, settings.beta2),
        settings.eps,
        fused,
    )
    optimizers = Optimizers(adamw=adamw)
    if hidden:
        optimizers["muon"] = Muon(hidden, settings.muon_lr, settings.muon_momentum, rank, world_size)
    return optimizers
