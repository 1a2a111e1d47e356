"""train/ optimizers: Newton–Schulz accuracy, DistAdam and Muon against float64 references, the Muon group
plan at world sizes 1-16, and real gloo runs at world sizes 1-4 against the single-process optimizers.

    .venv/bin/python -m pytest -q tests/test_train_optim.py
"""

from __future__ import annotations

import copy
import functools
import math
import os
import secrets
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tests.conftest import cuda_or_skip
from tests.ports import free_port
from train.adam import DistAdam
from train.muon import Muon, plan_groups
from train.newton_schulz import NS_COEFFS, orthogonalize, set_backend

D, H = 32, 6  # small model dim for speed; heads as in the record
RECORD_KINDS = ["gate"] * 11 + ["attn"] * 10 + ["mlp"] * 22  # smear gate, attn gates, qkvo, MLP fc/proj
RECORD_SHAPES = [(1, 12)] + [(H, 12)] * 10 + [(D, 4 * D)] * 32
LR_SCHEDULE, MOMENTA = (1.0, 0.7), (0.85, 0.9)  # per step, as the loop would set them

# Measured over 300 seeds per shape: relative error of bf16 NS vs its exact-arithmetic map <= 0.077,
# direction gains in [0.655, 1.206], cosine with U Vᵀ >= 0.963. Bounds below leave ~1.5x margin.
NS_REL_TOL, GAIN_RANGE, MIN_COS, SV_FLOOR = 0.12, (0.62, 1.25), 0.95, 0.002


def f5(s: torch.Tensor) -> torch.Tensor:
    """Exact-arithmetic effect of 5 NS iterations on one normalized singular value."""
    a, b, c = NS_COEFFS
    for _ in range(5):
        s = a * s + b * s**3 + c * s**5
    return s


def test_the_exact_polynomial_map_lands_in_the_claimed_band():
    s = torch.linspace(SV_FLOOR, 1.0, 200_001, dtype=torch.float64)
    out = f5(s)
    assert 0.68 < out.min() < 0.69 and 1.20 < out.max() < 1.21  # f⁵ maps [0.002, 1] into [0.682, 1.203]


@pytest.mark.parametrize("shape", [(32, 32), (32, 128), (128, 32), (4, 32, 32), (3, 16, 48), (2, 64, 16),
                                   (H, 12), (1, 12)])
def test_newton_schulz_matches_its_exact_map_and_the_polar_factor(shape):
    seed = secrets.randbits(32)  # fresh inputs each run; the seed is in every message
    gen = torch.Generator().manual_seed(seed)
    scale = 10 ** (6 * torch.rand(1, generator=gen).item() - 3)  # NS normalizes: any scale works
    G = torch.randn(shape, generator=gen, dtype=torch.float64) * scale
    O = orthogonalize(G)
    assert O.dtype == torch.bfloat16 and O.shape == G.shape
    O = O.double()
    U, S, Vh = torch.linalg.svd(G, full_matrices=False)  # (..., r, k), (..., k), (..., k, c)
    s = S / torch.linalg.matrix_norm(G).unsqueeze(-1)  # singular values of G/‖G‖_F, in [0, 1]
    expected = U @ torch.diag_embed(f5(s)) @ Vh  # NS in exact arithmetic: U f⁵(S) Vᵀ
    rel = torch.linalg.matrix_norm(O - expected) / torch.linalg.matrix_norm(expected)
    assert rel.max() < NS_REL_TOL, f"seed {seed}: bf16 NS is {rel.max():.3f} away from its exact map"
    gains = torch.diagonal(U.mT @ O @ Vh.mT, dim1=-2, dim2=-1)  # (..., k): O's gain along each direction of G
    live = gains[s >= SV_FLOOR]
    lo, hi = live.min().item(), live.max().item()
    assert GAIN_RANGE[0] < lo and hi < GAIN_RANGE[1], f"seed {seed}: gains {lo:.3f}..{hi:.3f}"
    assert torch.linalg.matrix_norm(O, ord=2).max() < GAIN_RANGE[1], f"seed {seed}"
    polar = U @ Vh
    cos = (O * polar).sum((-2, -1)) / (torch.linalg.matrix_norm(O) * torch.linalg.matrix_norm(polar))
    assert cos.min() > MIN_COS, f"seed {seed}: cosine with the polar factor {cos.min():.4f}"


def test_newton_schulz_on_cuda_uses_the_triton_kernels_and_keeps_the_bounds():
    torch_ = cuda_or_skip()
    ns_triton = pytest.importorskip("train.ns_triton")
    if not ns_triton.AVAILABLE:
        pytest.skip("Triton is not installed: CUDA runs the torch path, which the CPU tests cover")
    from benchmarks.ns_check import selfcheck

    check = selfcheck(time_it=False)  # kernels vs fp32 torch, Triton NS vs torch NS
    assert check.product_rel_err < 1e-2 and check.ns_rel_diff < 0.1
    G = torch_.randn(8, 768, 768, dtype=torch_.float64)
    U, S, Vh = torch_.linalg.svd(G)
    expected = U @ torch_.diag_embed(f5(S / torch_.linalg.matrix_norm(G).unsqueeze(-1))) @ Vh
    try:
        for backend in ("auto", "triton", "torch"):  # auto = the compiled Triton path
            set_backend(backend)
            O = orthogonalize(G.cuda()).cpu().double()
            rel = torch_.linalg.matrix_norm(O - expected) / torch_.linalg.matrix_norm(expected)
            assert rel.max() < NS_REL_TOL, (backend, rel)
    finally:
        set_backend("auto")


def test_newton_schulz_rejects_a_vector_and_an_unknown_backend():
    with pytest.raises(ValueError, match="matrix"):
        orthogonalize(torch.ones(5))
    with pytest.raises(ValueError, match="unknown Newton-Schulz backend"):
        set_backend("cublas")


# ---------------------------------------------------------------------------------------------------------
# One shared problem: the record's parameter kinds at small D, gradients that differ per rank but average
# to the same value at every world size.


def make_params():
    gen = torch.Generator().manual_seed(1234)

    def randn(*shape, dtype=torch.float32, scale=1.0):
        return (torch.randn(shape, generator=gen) * scale).to(dtype)

    # bf16 gates, zero-initialised as in the record; fp32 attention and MLP matrices
    muon = [torch.zeros(s, dtype=torch.bfloat16) if k == "gate" else randn(*s, scale=D**-0.5)
            for k, s in zip(RECORD_KINDS, RECORD_SHAPES)]
    scalars, odd, head = randn(7) + 1, randn(3, 8), torch.zeros(50, D, dtype=torch.bfloat16)
    embeds = [randn(64, D, dtype=torch.bfloat16) for _ in range(4)]
    embeds[3].lr_mul = 75.0  # the record's per-parameter attribute; the other embeddings use the group key
    groups = [dict(params=[scalars, odd], lr_mul=5.0), dict(params=[head]),
              dict(params=embeds[:3], lr_mul=75.0), dict(params=[embeds[3]])]
    adam = [scalars, odd, head, *embeds]
    lr_muls = [5.0, 5.0, 1.0, 75.0, 75.0, 75.0, 75.0]
    return adam, groups, lr_muls, muon


def make_grads(step: int, rank: int, world: int) -> list[torch.Tensor]:
    """Rank r's gradients (Adam's parameters, then Muon's) G + c_r·E with sum_r c_r = 0.

    G and E are multiples of 1/16 in [-0.5, 0.5] and c_r in {±0.5, ±1.5}: every rank's gradient, every
    partial sum over <= 4 ranks and the average are exact even in bf16 (and x/3 of an exact 3x rounds
    back to x), so the average is G bit for bit at world sizes 1-4 whatever order a collective sums in.
    """
    adam, _, _, muon = make_params()
    gen = torch.Generator().manual_seed(100 + step)
    c = rank - (world - 1) / 2

    def grid(shape):
        return torch.randint(-8, 9, shape, generator=gen) / 16

    return [(grid(p.shape) + c * grid(p.shape)).to(p.dtype) for p in adam + muon]


def run_problem(rank: int, world: int, steps: int = 2) -> dict:
    adam_params, groups, _, muon_params = make_params()
    adam = DistAdam(groups, lr=0.008, betas=(0.8, 0.95), eps=1e-8)
    muon = Muon(muon_params, RECORD_KINDS, lr=0.05, momentum=0.95)
    for step in range(steps):
        for p, g in zip(adam_params + muon_params, make_grads(step, rank, world)):
            p.grad = g
        for group in adam.param_groups:
            group["lr"] = 0.008 * LR_SCHEDULE[step]
        muon.param_groups[0].update(lr=0.05 * LR_SCHEDULE[step], momentum=MOMENTA[step])
        adam.step()
        muon.step()
    owned = [i for i, p in enumerate(muon_params) if muon.state[p]]
    return dict(adam=adam_params, muon=muon_params, owned=owned, plan=muon.plan.to_dict())


@functools.cache
def single_process_run() -> dict:
    """run_problem without a process group: the optimizers' local path (read-only for callers)."""
    return run_problem(0, 1)


def ref_adam(steps: int = 2) -> list[torch.Tensor]:
    params, _, lr_muls, _ = make_params()
    out = []
    for p, mul, idx in zip(params, lr_muls, range(len(params))):
        p, m, v = p.double(), 0.0, 0.0
        for t in range(1, steps + 1):
            g = make_grads(t - 1, 0, 1)[idx].double()
            m, v = 0.8 * m + 0.2 * g, 0.95 * v + 0.05 * g * g
            step_size = 0.008 * LR_SCHEDULE[t - 1] * mul * math.sqrt(1 - 0.95**t) / (1 - 0.8**t)
            p = p - step_size * m / (v.sqrt() + 1e-8)
        out.append(p)
    return out


def ref_ns(X: torch.Tensor) -> torch.Tensor:
    """The same five NS iterations in float64. X: (n, r, c)."""
    a, b, c = NS_COEFFS
    tall = X.size(-2) > X.size(-1)
    X = X.mT if tall else X
    X = X / (torch.linalg.matrix_norm(X, keepdim=True) + 1e-7)
    for _ in range(5):
        A = X @ X.mT
        X = a * X + (b * A + c * A @ A) @ X
    return X.mT if tall else X


def ref_muon(steps: int = 2, attn_as_blocks: bool = True) -> list[torch.Tensor]:
    adam, _, _, params = make_params()
    out = []
    for idx, (p, kind) in enumerate(zip(params, RECORD_KINDS)):
        p, buf = p.double(), torch.zeros(p.shape, dtype=torch.float64)
        R, C = p.shape
        for step in range(steps):
            g, m = make_grads(step, 0, 1)[len(adam) + idx].double(), MOMENTA[step]
            buf = buf + (1 - m) * (g - buf)
            u = g + m * (buf - g)
            blocks = u.reshape(4, R, C // 4) if kind == "attn" and attn_as_blocks else u[None]
            lr_eff = 0.05 * LR_SCHEDULE[step] * math.sqrt(max(1.0, blocks.size(-2) / blocks.size(-1)))
            p = p - lr_eff * ref_ns(blocks).reshape(R, C)
        out.append(p)
    return out


def rel_delta_error(new: torch.Tensor, ref: torch.Tensor, old: torch.Tensor) -> float:
    """‖Δ - Δref‖ / ‖Δref‖ of the change each optimizer made to a parameter."""
    d, dref = new.double() - old.double(), ref.double() - old.double()
    return ((d - dref).norm() / dref.norm()).item()


def test_dist_adam_matches_float64_adam_with_bias_correction_and_lr_multipliers():
    got, ref, (old, *_) = single_process_run()["adam"], ref_adam(), make_params()
    errors = [rel_delta_error(n, r, o) for n, r, o in zip(got, ref, old)]
    # bf16 moments and update: a few roundings of 2^-9 each; measured <= 0.0047
    assert max(errors) < 0.01, errors


def test_muon_matches_float64_muon_with_attention_as_qkvo_blocks():
    got, ref, (*_, old) = single_process_run()["muon"], ref_muon(), make_params()
    errors = [rel_delta_error(n, r, o) for n, r, o in zip(got, ref, old)]
    assert max(errors) < NS_REL_TOL, errors  # bf16 NS vs float64 NS, as measured above
    whole = ref_muon(attn_as_blocks=False)  # the record's bug at world 2/4: attention orthogonalized whole
    gaps = [rel_delta_error(w, r, o) for w, r, o, k in zip(whole, ref, old, RECORD_KINDS) if k == "attn"]
    assert min(gaps) > 3 * NS_REL_TOL, gaps  # measured 0.63: the tolerance above tells the two apart


# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("world", [1, 2, 3, 4, 8, 16])
@pytest.mark.parametrize("with_shapes", [False, True])
def test_plan_groups_for_the_record_kinds(world, with_shapes):
    plan = plan_groups(RECORD_KINDS, world, RECORD_SHAPES if with_shapes else None)
    covered = [i for g in plan.groups for r in range(world) for i in g.owned(r)]
    assert covered == list(range(len(RECORD_KINDS)))  # every parameter once, in module order
    for g in plan.groups:
        assert g.padded % world == 0 and g.padded - g.size < world and g.chunk * world == g.padded
        assert len({RECORD_SHAPES[i] for i in range(g.start, g.start + g.size)}) == 1  # stackable
    if world != 3:
        assert plan.sizes == [1, 10, 16, 16]
    if world == 8:
        assert [g.padded - g.size for g in plan.groups[2:]] == [0, 0] and plan.mixed_chunks() == []
    if world in (2, 4):
        assert plan.mixed_chunks(), "at 2 and 4 some chunk mixes attention and MLP"
    assert str(plan).startswith("muon plan {") and plan.to_dict()["sizes"] == plan.sizes


def test_state_dict_round_trip_continues_the_same_run():
    """The loop snapshots and restores optimizer state around its warm-up: a restored optimizer must
    continue exactly, with Adam's moments still bf16 (load_state_dict casts them to the parameter dtype)."""
    def two_optimizers():
        adam_params, groups, _, muon_params = make_params()
        return (adam_params + muon_params, DistAdam(groups), Muon(muon_params, RECORD_KINDS))

    def step(params, adam, muon, k):
        for p, g in zip(params, make_grads(k, 0, 1)):
            p.grad = g
        adam.step()
        muon.step()

    params, adam, muon = two_optimizers()
    step(params, adam, muon, 0)
    saved = copy.deepcopy(([p.detach() for p in params], adam.state_dict(), muon.state_dict()))
    step(params, adam, muon, 1)
    params2, adam2, muon2 = two_optimizers()
    with torch.no_grad():
        for p, q in zip(params2, saved[0]):
            p.copy_(q)
    adam2.load_state_dict(saved[1])
    muon2.load_state_dict(saved[2])
    step(params2, adam2, muon2, 1)
    assert all(torch.equal(p, q) for p, q in zip(params, params2))
    assert {s["exp_avg"].dtype for s in adam2.state.values()} == {torch.bfloat16}


def test_muon_refuses_a_missing_gradient_and_a_plan_for_another_world():
    *_, muon_params = make_params()
    with pytest.raises(ValueError, match="world size 8"):
        Muon(muon_params, RECORD_KINDS, plan=plan_groups(RECORD_KINDS, 8))
    with pytest.raises(ValueError, match="one kind per parameter"):
        Muon(muon_params, RECORD_KINDS[:-1])
    with pytest.raises(RuntimeError, match=r"parameter 0 \(gate\) has no gradient"):
        Muon(muon_params, RECORD_KINDS).step()


def test_plan_groups_rejects_bad_input():
    with pytest.raises(ValueError, match="unknown parameter kinds"):
        plan_groups(["gate", "conv"], 8)
    with pytest.raises(ValueError, match="world_size"):
        plan_groups(RECORD_KINDS, 0)


# ---------------------------------------------------------------------------------------------------------


def _gloo_worker(rank: int, world: int, port: int, out_dir: str) -> None:
    torch.set_num_threads(1)  # up to 4 ranks share 2 cores
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))
    try:
        torch.save(run_problem(rank, world), f"{out_dir}/rank{rank}.pt")
        dist.barrier()  # no rank closes its connections while a peer's last all-gather is still in flight
    finally:
        dist.destroy_process_group()
    # Results saved and every rank past the barrier: leave without the interpreter's C++ teardown, where gloo's
    # threads aborted a rank twice in CI ('terminate called without an active exception', SIGABRT; [4] before the
    # barrier went in, [2] on 2026-12-05), a failure of the teardown, not of the optimizers under test.
    os._exit(0)


@pytest.mark.parametrize("world", [1, 2, 3, 4])  # 2, 3, 4: chunks mixing attention and MLP; 3: padding
def test_gloo_steps_match_the_single_process_optimizers(world, tmp_path):
    mp.spawn(_gloo_worker, args=(world, free_port(), str(tmp_path)), nprocs=world, join=True)
    single = single_process_run()
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(world)]
    plan = plan_groups(RECORD_KINDS, world, RECORD_SHAPES)
    for r, got in enumerate(ranks):
        for new, base in zip(got["adam"] + got["muon"], ranks[0]["adam"] + ranks[0]["muon"]):
            assert torch.equal(new, base)  # the all-gathers leave identical parameters on every rank
        assert got["owned"] == [i for g in plan.groups for i in g.owned(r)]  # momentum only where owned
    for a, b in zip(ranks[0]["adam"], single["adam"]):
        assert torch.equal(a, b)  # exact averages (see make_grads) and elementwise Adam: bit for bit
    (*_, old_muon) = make_params()
    muon_err = max(rel_delta_error(a, b, o) for a, b, o in zip(ranks[0]["muon"], single["muon"], old_muon))
    # Bit-exact here too (x86, torch CPU bmm computes each matrix alike whatever the batch); the bound only
    # allows a BLAS whose bf16 results depend on batch composition. Real faults (a kind mix-up, a missed
    # average: c_r·E is as large as G) change updates by > 0.3.
    assert muon_err < 1e-2, muon_err
