"""Muon with the record's custom sizing, correct at every world size (trainer.md section 3).

    from train.muon import Muon, plan_groups
    muon = Muon(params, kinds, lr=0.05, momentum=0.95)  # params/kinds in module order
    print(muon.plan)  # world 8: groups [1, 10, 16, 16], no padding for attention and MLP
    loss.backward(); muon.step()

`plan_groups` cuts the module-ordered parameters into collective groups: a run of equally shaped
parameters stacks into one reduce-scatter; gates stay whole (they are tiny) and the run of D×4D
attention + MLP matrices is cut in two, so the first half's Newton–Schulz overlaps the second half's
communication. At world size 8 this gives the record's [1, 10, 16, 16] with no padding for attention
and MLP. Each group is padded with zero gradients to a multiple of the world size and every rank owns
a contiguous chunk of it. Unlike the record, a chunk may mix attention and MLP matrices (world 2 and 4):
each parameter is orthogonalized by its own kind — attention as four (Q, K, V, O) blocks, the others whole.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

import torch
from torch import Tensor

from train.adam import all_gather, dist_rank_world, reduce_scatter_avg
from train.newton_schulz import orthogonalize

KINDS = ("gate", "attn", "mlp")


@dataclass(frozen=True, kw_only=True)
class CommGroup:
    """One stacked collective: parameters [start, start + size) padded to `padded`, `chunk` per rank."""

    start: int
    size: int
    padded: int
    chunk: int
    kinds: tuple[str, ...]

    def owned(self, rank: int) -> range:
        """Indices (into the module-ordered parameter list) of the real parameters `rank` updates."""
        lo = self.start + rank * self.chunk
        return range(min(lo, self.start + self.size), min(lo + self.chunk, self.start + self.size))


@dataclass(frozen=True)
class GroupPlan:
    world_size: int
    groups: tuple[CommGroup, ...]

    @property
    def sizes(self) -> list[int]:
        return [g.size for g in self.groups]

    def mixed_chunks(self) -> list[tuple[int, int]]:
        """(group index, rank) of every chunk holding more than one kind (the record mis-handled these)."""
        mixed = []
        for gi, group in enumerate(self.groups):
            for rank in range(self.world_size):
                kinds = {group.kinds[i - group.start] for i in group.owned(rank)}
                if len(kinds) > 1:
                    mixed.append((gi, rank))
        return mixed

    def to_dict(self) -> dict:
        groups = [dict(asdict(g), kinds={k: g.kinds.count(k) for k in KINDS if k in g.kinds})
                  for g in self.groups]
        return dict(world_size=self.world_size, sizes=self.sizes, groups=groups,
                    mixed_chunks=[list(m) for m in self.mixed_chunks()])

    def __str__(self) -> str:
        return "muon plan " + json.dumps(self.to_dict(), separators=(",", ":"))


def plan_groups(kinds: list[str], world_size: int, shapes: list[tuple[int, ...]] | None = None) -> GroupPlan:
    """Group the module-ordered Muon parameters for `world_size` ranks.

    kinds: "gate" | "attn" | "mlp" per parameter. shapes (optional): their shapes; a group must hold one
    shape. Without shapes the interface's module order is assumed: a leading gate is the smear gate (1×12),
    which cannot stack with the attention gates (H×12), and attention and MLP share the D×4D shape.
    """
    if world_size < 1:
        raise ValueError(f"plan_groups: world_size must be >= 1, got {world_size}")
    bad = sorted({k for k in kinds if k not in KINDS})
    if bad:
        raise ValueError(f"plan_groups: unknown parameter kinds {bad}; each kind must be one of {KINDS}")
    if shapes is not None and len(shapes) != len(kinds):
        raise ValueError(f"plan_groups: {len(kinds)} kinds but {len(shapes)} shapes; give one shape per kind")

    def stack_key(i: int) -> tuple:
        is_gate = kinds[i] == "gate"
        if shapes is not None:
            return (is_gate, tuple(shapes[i]))
        return ("smear" if is_gate and i == 0 else "gate" if is_gate else "matrix",)

    runs: list[tuple[int, int]] = []  # (start, length) of maximal runs with one stack key
    for i in range(len(kinds)):
        if runs and stack_key(i) == stack_key(runs[-1][0]):
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((i, 1))

    sizes: list[tuple[int, int]] = []  # (start, size) of each group
    for start, n in runs:
        per_rank = -(-n // world_size)
        if kinds[start] != "gate" and per_rank >= 2:
            # two groups, the first a multiple of the world size: 32 matrices -> 16 + 16 at 1, 2, 4, 8, 16
            first = min(n, world_size * -(-per_rank // 2))
            sizes += [(start, first), (start + first, n - first)]
        else:
            sizes.append((start, n))

    groups = []
    for start, size in sizes:
        if size == 0:
            continue
        chunk = -(-size // world_size)
        groups.append(CommGroup(start=start, size=size, padded=chunk * world_size, chunk=chunk,
                                kinds=tuple(kinds[start:start + size])))
    return GroupPlan(world_size, tuple(groups))


class Muon(torch.optim.Optimizer):
    """Momentum + Newton–Schulz orthogonalized updates, no weight decay; one param group (lr, momentum)."""

    def __init__(self, params: list[Tensor], kinds: list[str], lr: float = 0.05, momentum: float = 0.95,
                 plan: GroupPlan | None = None):
        params = list(params)
        if len(params) != len(kinds):
            raise ValueError(f"Muon: {len(params)} parameters but {len(kinds)} kinds; "
                             "give one kind per parameter")
        for i, (p, kind) in enumerate(zip(params, kinds, strict=True)):
            if p.ndim != 2:
                raise ValueError(f"Muon: parameter {i} ({kind}) has shape {tuple(p.shape)}; Muon takes "
                                 "matrices only (give vectors and embeddings to DistAdam)")
            if kind == "attn" and p.shape[1] % 4:
                raise ValueError(f"Muon: attention parameter {i} has shape {tuple(p.shape)}; it must be "
                                 "stored as (hdim, 4·dim) so it splits into Q, K, V, O blocks")
        _, world = dist_rank_world()
        self.kinds = list(kinds)
        self.plan = plan or plan_groups(self.kinds, world, [tuple(p.shape) for p in params])
        if self.plan.world_size != world:
            raise ValueError(f"Muon: the plan is for world size {self.plan.world_size} but this process sees "
                             f"{world}; build the optimizer (and its plan) after init_process_group")
        for g in self.plan.groups:
            members = params[g.start:g.start + g.size]
            same_stack = len({(tuple(p.shape), p.dtype) for p in members}) == 1
            if not same_stack or g.kinds != tuple(kinds[g.start:g.start + g.size]):
                raise ValueError(f"Muon: plan group {g} does not match the parameters (a group needs one "
                                 "shape and dtype); build it with plan_groups(kinds, world_size, shapes)")
        if sum(g.size for g in self.plan.groups) != len(params):
            raise ValueError("Muon: the plan does not cover every parameter exactly once; use plan_groups")
        super().__init__([dict(params=params)], dict(lr=lr, momentum=momentum))

    @torch.no_grad()
    def step(self, closure=None):
        if closure is not None:
            raise ValueError("Muon.step takes no closure: call loss.backward() before step()")
        rank, world = dist_rank_world()
        if world != self.plan.world_size:
            raise RuntimeError(f"Muon: the plan is for world size {self.plan.world_size} but the process "
                               f"group has {world}; build the optimizer after init_process_group")
        group = self.param_groups[0]
        params = group["params"]

        # Pass 1: stack, pad and reduce-scatter every group before waiting on any.
        inflight = []  # (CommGroup, grad chunk (chunk, R, C), Work or None)
        for g in self.plan.groups:
            grads = []
            for i in range(g.start, g.start + g.size):
                if params[i].grad is None:
                    raise RuntimeError(f"Muon: parameter {i} ({self.kinds[i]}) has no gradient; the ranks "
                                       "stack every Muon gradient into one collective, so each needs one "
                                       "every step")
                grads.append(params[i].grad)
            grads += [torch.zeros_like(grads[0])] * (g.padded - g.size)
            stacked = torch.stack(grads)  # (padded, R, C)
            if world == 1:
                inflight.append((g, stacked, None))
            else:
                chunk = stacked.new_empty(g.chunk, *stacked.shape[1:])  # (chunk, R, C)
                inflight.append((g, chunk, reduce_scatter_avg(chunk, stacked)))

        # Pass 2: group by group (small first), wait, update the owned chunk, all-gather asynchronously.
        gathers = []  # (CommGroup, gathered (padded, R, C), Work or None)
        for g, grad_chunk, work in inflight:
            if work is not None:
                work.wait()
            new_chunk = self._update_chunk(group, g, g.owned(rank), grad_chunk)  # (chunk, R, C)
            if world == 1:
                gathers.append((g, new_chunk, None))
            else:
                gathered = new_chunk.new_empty(g.padded, *new_chunk.shape[1:])  # (padded, R, C)
                gathers.append((g, gathered, all_gather(gathered, new_chunk)))

        for g, gathered, work in gathers:
            if work is not None:
                work.wait()
            for j, p in enumerate(params[g.start:g.start + g.size]):
                p.copy_(gathered[j])

    def _update_chunk(self, group: dict, g: CommGroup, owned: range, grad_chunk: Tensor) -> Tensor:
        """Momentum, per-kind orthogonalization and the update for this rank's chunk.

        grad_chunk: (chunk, R, C) averaged gradients, the first len(owned) rows real; returns the updated
        parameters (chunk, R, C) in the parameters' dtype, padding rows zero.
        """
        params, momentum = group["params"], group["momentum"]
        R, C = grad_chunk.shape[1:]
        updates = grad_chunk[:len(owned)]  # (n, R, C); overwritten in place with u
        by_shape: dict[tuple[int, int], list[tuple[int, Tensor]]] = {}  # matrix shape -> (row j, its blocks)
        for j, i in enumerate(owned):
            state = self.state[params[i]]
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = torch.zeros_like(updates[j])  # (R, C), the gradient's dtype
            buf = state["momentum_buffer"]
            buf.lerp_(updates[j], 1 - momentum)  # b <- lerp(b, g, 1 - m)
            updates[j].lerp_(buf, momentum)  # u = lerp(g, b, m), Nesterov-style
            # the matrices actually orthogonalized: attention as its Q, K, V, O blocks, the rest whole
            blocks = updates[j].view(4, R, C // 4) if self.kinds[i] == "attn" else updates[j].unsqueeze(0)
            by_shape.setdefault(tuple(blocks.shape[1:]), []).append((j, blocks))

        # every rank must gather in the group's dtype, also a rank that owns only padding
        new_chunk = torch.zeros_like(grad_chunk, dtype=params[g.start].dtype)  # (chunk, R, C)
        for (rows, cols), items in by_shape.items():
            ortho = orthogonalize(torch.cat([blocks for _, blocks in items]))  # (all blocks, rows, cols) bf16
            scale = math.sqrt(max(1.0, rows / cols))
            offset = 0
            for j, blocks in items:
                p = params[owned[j]]
                lr_eff = group["lr"] * scale * getattr(p, "lr_mul", 1.0)
                new_chunk[j].copy_(p)
                new_chunk[j].add_(ortho[offset:offset + len(blocks)].reshape(R, C), alpha=-lr_eff)
                offset += len(blocks)
        return new_chunk
