"""Sharded Adam for the embeddings, head and scalars (trainer.md section 3, "DistAdam").

    from train.adam import DistAdam
    adam = DistAdam([dict(params=[scalars], lr_mul=5.0), dict(params=[head_w]),
                     dict(params=[embed_w, *value_embed_ws], lr_mul=75.0)],
                    lr=0.008, betas=(0.8, 0.95), eps=1e-8)
    loss.backward(); adam.step()

Each parameter's gradient is reduce-scattered (average) along dim 0, every rank runs bias-corrected Adam
on its slice with bf16 moments, and the slices are all-gathered back. Dim 0 that does not divide by the
world size is padded with zero rows (zero gradient keeps their moments and update at zero). Without a
process group, or at world size 1, the same arithmetic runs on the whole tensor.

With compile=True (the loop passes cfg.compile) the per-slice update runs as one torch.compile'd function, as
the record compiles its whole step: the moment updates and the parameter update fuse into one kernel per shape
instead of about eight passes over each bf16 tensor. The step size then enters as a 0-dim float32 tensor so that
the changing lr does not recompile.

The small collective helpers at the top are shared with train/muon.py.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
from torch import Tensor


def dist_rank_world() -> tuple[int, int]:
    """(rank, world size) of the default process group, or (0, 1) when there is none."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def reduce_scatter_avg(out: Tensor, inp: Tensor):
    """Async average-reduce-scatter of inp (world·k, ...) into out (k, ...); returns the Work to wait on."""
    # torch >= 2.10 renamed the tensor collectives; the record's torch 2.8/2.9 only has the old names
    fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    return fn(out, inp, op=dist.ReduceOp.AVG, async_op=True)


def all_gather(out: Tensor, inp: Tensor):
    """Async all-gather of inp (k, ...) into out (world·k, ...); returns the Work to wait on."""
    fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    return fn(out, inp, async_op=True)


def adam_update_(p_slice: Tensor, g_slice: Tensor, m: Tensor, v: Tensor, step_size, beta1: float, beta2: float,
                 eps: float) -> None:
    """In place on one (k, ...) slice: bf16 moments m, v of g, then p <- p - step_size · m / (√v + eps).
    step_size: float, or a 0-dim float32 tensor (compiled)."""
    m.mul_(beta1).add_(g_slice, alpha=1 - beta1)
    v.mul_(beta2).addcmul_(g_slice, g_slice, value=1 - beta2)
    update = m.div(v.sqrt().add_(eps)).mul_(step_size)  # (k, ...) bf16
    p_slice.sub_(update)


_compiled_update = None


def compiled_adam_update():
    """adam_update_ under torch.compile (created once per process; one graph per slice shape and dtype)."""
    global _compiled_update
    if _compiled_update is None:
        _compiled_update = torch.compile(adam_update_, dynamic=False)
    return _compiled_update


class DistAdam(torch.optim.Optimizer):
    """Adam without weight decay, sharded along dim 0 across ranks, moments in bf16.

    Per-parameter lr multiplier: a parameter's own `lr_mul` attribute (the record's convention) wins,
    else its group's "lr_mul" key, else 1. The loop sets group["lr"] each step.
    """

    def __init__(self, params_or_groups, lr: float = 0.008, betas: tuple[float, float] = (0.8, 0.95),
                 eps: float = 1e-8, compile: bool = False):
        if lr < 0 or eps < 0 or not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"DistAdam: need lr >= 0, eps >= 0 and betas in [0, 1); got lr={lr}, "
                             f"betas={betas}, eps={eps}")
        super().__init__(params_or_groups, dict(lr=lr, betas=tuple(betas), eps=eps))
        self._update = compiled_adam_update() if compile else adam_update_
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim == 0:
                    raise ValueError("DistAdam shards along dim 0 and cannot take a 0-dim parameter: "
                                     "store scalars as a 1-D vector (as the model's `scalars` does)")

    def _moments(self, p: Tensor, slice_shape: torch.Size) -> tuple[dict, Tensor, Tensor]:
        state = self.state[p]
        if not state:
            state["step"] = 0
            state["exp_avg"] = torch.zeros(slice_shape, dtype=torch.bfloat16, device=p.device)
            state["exp_avg_sq"] = torch.zeros(slice_shape, dtype=torch.bfloat16, device=p.device)
        # Optimizer.load_state_dict casts state to the parameter's dtype; the record's moments are bf16
        for key in ("exp_avg", "exp_avg_sq"):
            if state[key].dtype != torch.bfloat16:
                state[key] = state[key].to(torch.bfloat16)
        return state, state["exp_avg"], state["exp_avg_sq"]

    @torch.no_grad()
    def step(self, closure=None):
        if closure is not None:
            raise ValueError("DistAdam.step takes no closure: call loss.backward() before step()")
        rank, world = dist_rank_world()

        # Pass 1: issue every reduce-scatter before waiting on any, so communication overlaps the updates.
        pending = []  # (group, p, grad slice (k, ...), Work or None, rows per rank k)
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                rows = p.shape[0]
                k = -(-rows // world)  # rows per rank, dim 0 padded to world·k
                if world == 1:
                    pending.append((group, p, p.grad, None, k))
                    continue
                grad = p.grad  # (rows, ...)
                if k * world != rows:  # zero rows up to (world·k, ...)
                    grad = torch.cat([grad, grad.new_zeros(k * world - rows, *grad.shape[1:])])
                g_slice = grad.new_empty(k, *grad.shape[1:])  # (k, ...)
                pending.append((group, p, g_slice, reduce_scatter_avg(g_slice, grad), k))

        # Pass 2: per parameter, wait for its gradient slice, update the local slice, gather asynchronously.
        gathers = []  # (p, gathered (world·k, ...) or None when p itself is the target, Work)
        for group, p, g_slice, work, k in pending:
            if work is not None:
                work.wait()
            rows = p.shape[0]
            padded = k * world != rows
            lo, hi = min(rank * k, rows), min((rank + 1) * k, rows)
            if padded:  # the last ranks own fewer (or no) real rows: work on a zero-filled (k, ...) copy
                p_slice = p.new_zeros(k, *p.shape[1:])
                p_slice[: hi - lo] = p[lo:hi]
            else:
                p_slice = p[lo:hi]  # (k, ...) view: updated in place
            self._adam_update(group, p, p_slice, g_slice)
            if world == 1:
                continue
            if padded:
                gathered = p.new_empty(k * world, *p.shape[1:])  # (world·k, ...)
                gathers.append((p, gathered, all_gather(gathered, p_slice)))
            else:
                gathers.append((p, None, all_gather(p, p_slice)))  # in place: p_slice sits at its own offset

        for p, gathered, work in gathers:
            work.wait()
            if gathered is not None:
                p.copy_(gathered[: p.shape[0]])

    def _adam_update(self, group: dict, p: Tensor, p_slice: Tensor, g_slice: Tensor) -> None:
        """Bias-corrected Adam on one slice; the arithmetic (bf16 moments and update) follows the record."""
        beta1, beta2 = group["betas"]
        lr = group["lr"] * getattr(p, "lr_mul", group.get("lr_mul", 1.0))
        state, m, v = self._moments(p, p_slice.shape)
        state["step"] += 1
        t = state["step"]
        step_size = lr * math.sqrt(1 - beta2**t) / (1 - beta1**t)
        if self._update is not adam_update_:  # compiled: a tensor, so a new lr is not a new graph
            step_size = torch.full((), step_size, dtype=torch.float32, device=p.device)
        self._update(p_slice, g_slice, m, v, step_size, beta1, beta2, group["eps"])
