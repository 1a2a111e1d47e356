"""Differential test: train/ against the record's own program, on CPU, in float32.

    .venv/bin/python -m pytest -q tests/test_train_vs_record.py

The record's program is the fixture tests/fixtures/record-program/2025-09-23_MuonCustomSizing/train_gpt.py (the
exact program text of the record's log; sha256 checked below). benchmarks/record_program.py cuts off its main
section and executes the rest as a module, with the stand-ins its docstring lists (FA3 -> a dense float32
attention from FA3's definition, Triton's two Newton–Schulz kernels -> torch code with their arithmetic, a 1-rank
gloo process group). Both codebases build a 12-layer model of width 64 (the record's forward hard-codes 12
layers; width and heads are free), get the same random non-zero weights through an explicit name mapping, and see
the same batch, windows and YaRN state. Compared: training loss and every gradient, eval loss, one and two
optimizer steps (DistAdam and Muon of both codebases), the hyperparameters each loop applies, read back from the
optimizers' param groups, against the record's own statements, and the training and validation batches of the
record's data generator against train/'s loaders. Last, the speed changes of issue 15 (shard prefetch, compiled
Adam step) are shown to keep batches and arithmetic.

Where the record's code fixes a dtype, it stays: rotary tables bf16 (both), Adam moments bf16, Newton–Schulz bf16.
Everything else runs in float32 (neither codebase casts to bf16 unless told to: the record's main section does the
cast, which is cut; ours has bf16=false). FP8 head and compiled graphs: benchmarks/device_diff.py on a GPU.
"""

from __future__ import annotations

import dataclasses
import hashlib
import types

import pytest
import torch
import torch.distributed as dist

import train.data as data_module
from benchmarks.record_patch import FIXTURE, PROGRAM_SHA256, split_program
from benchmarks.record_program import (
    RecordSetup,
    _Done,
    bind_globals,
    load_record,
    name_map,
    random_weights,
    split_mixed_muon_groups,
)
from tests.ports import free_port
from train.config import TrainConfig, apply_overrides, preset
from train.data import BOS_ID, DataError, TrainLoader, ValLoader, max_docs, write_shard
from train.loop import build_optimizers, set_hyperparameters
from train.model import GPT, layer_plan
from train.newton_schulz import orthogonalize_torch
from train.schedule import lr_multiplier, window_blocks

pytestmark = [  # the record's code calls the collectives torch >= 2.10 renamed, and torch.jit.script_method
    pytest.mark.filterwarnings("ignore:.*is deprecated.*:FutureWarning"),
    pytest.mark.filterwarnings("ignore:.*script_method.*:DeprecationWarning"),
]

# 12 layers (the record's forward hard-codes them), width 64, 2 heads of 32, windows in blocks of 8 tokens,
# one micro-batch of T = 256 tokens; the tiny preset's 8 + 2 steps with the record's Muon momentum warm-up of 300
# steps (a literal in the record's loop).
SMALL = apply_overrides(preset("tiny"), ["num_layers=12", "train_batch_tokens=1024", "val_batch_tokens=1024",
                                         "val_tokens=1024", "muon_momentum_warmup_steps=300"])
T = SMALL.train_tokens_per_slot
BOUNDS = [0, 37, 100, 101, 180, T]  # documents of 37, 63, 1, 79 and 76 tokens; padded with T like the loaders

# ---- tolerances (measured on this test's data with `python -m pytest`; each test says what it compares) ----------
# Forward/backward in float32. The two codebases issue the same ops on the same values except in attention (the
# stand-in's dense softmax vs train/'s: differently arranged einsums and masks). Measured: loss bit-identical,
# gradients bit-identical except `scalars` (rel 4e-8: its entries sum contributions from many layers, in another
# order). Bounds: float32 rounding (6e-8) compounded over 11 layers, with room for other BLAS builds.
LOSS_RTOL = 1e-6
GRAD_RTOL = 1e-6
# Optimizer updates with the same Newton–Schulz on both sides: measured bit-identical for every parameter over two
# steps (same ops, same inputs: the Muon gradients above are bit-identical). 1e-5 admits float32 reordering only;
# a flipped bf16 rounding inside Newton–Schulz would show as ~1e-3 and fail, as it should.
UPDATE_RTOL_SAME_NS = 1e-5
# Adam (both): moments and update in bf16. Its step size is float32 in the record (tensors) and float64 in
# ours, and `scalars` gradients differ by 4e-8: either may move an update by one bf16 ulp (2^-8 relative).
# Measured: bit-identical.
ADAM_ULP = 2.0 ** -8
# The record's own Newton–Schulz driver (normalisation, transposes, its baddbmm; the two Triton kernels replaced
# by their arithmetic: float32 accumulation, one bf16 rounding) vs ours: the same quintic, both rounding each line
# once to bf16, differing only in float32 summation order inside the products, amplified by the iteration.
# Measured: max rel 6.8e-3 over the Muon matrices (gates bit-identical); 1.1e-2 on random 64x64 blocks.
NS_RTOL = 3e-2


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()



@pytest.fixture(scope="module")
def rec():
    """The record's program as a module, with a 1-rank gloo process group (the record's code calls dist.*)."""
    created = not dist.is_initialized()
    if created:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small ops on two shared cores
    try:
        yield load_record("cpu")
    finally:
        torch.set_num_threads(threads)
        if created:
            dist.destroy_process_group()


def record_args(rec, cfg: TrainConfig):
    """The record's Hyperparameters with our config's sizes and schedule (the fields its code reads)."""
    args = rec.Hyperparameters(
        train_batch_size=cfg.train_batch_tokens, train_max_seq_len=cfg.train_max_seq_len,
        val_batch_size=cfg.val_batch_tokens, val_tokens=cfg.val_tokens, num_iterations=cfg.scheduled_steps,
        cooldown_frac=cfg.cooldown_frac, block_size=cfg.block_size, ws_schedule=cfg.ws_schedule,
        ws_validate=cfg.ws_final, ws_long_validate=cfg.ws_final_long)
    args.iteration_extension = cfg.extension_steps  # a class attribute there (no annotation), not a field
    return args


def make_pair(rec, cfg: TrainConfig = SMALL):
    """(ours, record) models of the same size holding the same random weights; the record's globals bound."""
    bind_globals(rec, record_args(rec, cfg), torch.device("cpu"), cfg.grad_accum(1))
    ours = GPT(cfg, attention_backend="dense", fp8=False)
    record = rec.GPT(vocab_size=cfg.vocab_size, num_layers=cfg.num_layers, num_heads=cfg.num_heads,
                     head_dim=cfg.head_dim, model_dim=cfg.model_dim, max_seq_len=cfg.rotary_len)
    record.lm_head.use_fp8 = False  # FP8 needs CUDA; the GPU variant keeps it
    names = name_map(cfg.num_layers)
    ours_params, record_params = dict(ours.named_parameters()), dict(record.named_parameters())
    assert set(names) == set(ours_params), "the mapping must name every parameter of train/'s model"
    assert set(names.values()) == set(record_params), "the mapping must name every parameter of the record's model"
    with torch.no_grad():
        for name, value in random_weights(ours).items():
            assert (value != 0).all(), name
            assert ours_params[name].shape == record_params[names[name]].shape, name
            assert ours_params[name].dtype == record_params[names[name]].dtype == torch.float32, name
            ours_params[name].copy_(value)
            record_params[names[name]].copy_(value)
    return ours, record, names


def batch(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    inputs = torch.randint(0, 50257, (T,), generator=gen, dtype=torch.int32)
    targets = torch.randint(0, 50257, (T,), generator=gen)
    bounds = torch.full((max_docs(T),), T, dtype=torch.int32)
    bounds[: len(BOUNDS)] = torch.tensor(BOUNDS)
    return inputs, targets, bounds


def forward_both(ours: GPT, record, ws_short: int, ws_long: int, seed: int = 0):
    """Losses of both models on the same batch; windows in blocks, each model's own YaRN scale."""
    inputs, targets, bounds = batch(seed)
    bs = ours.cfg.block_size
    loss_ours = ours(inputs, targets, bounds, ws_short * bs, ws_long * bs, ours.yarn.attn_scale)
    loss_record = record(inputs, targets, bounds, ws_short, ws_long)
    return loss_ours, loss_record


def extend_both(ours: GPT, record, old: int, new: int) -> None:
    ours.yarn.extend(old, new)
    record.yarn.apply(old, new)
    assert torch.equal(ours.yarn.cos, record.yarn.cos) and torch.equal(ours.yarn.sin, record.yarn.sin)
    assert ours.yarn.attn_scale == record.yarn.attn_scale


def train_step_grads(rec, step_seed: int = 0, cfg: TrainConfig = SMALL):
    ours, record, names = make_pair(rec, cfg)
    extend_both(ours, record, 3, 7)  # the second third of training: windows (3, 7) after one YaRN step
    loss_ours, loss_record = forward_both(ours, record, 3, 7, seed=step_seed)
    loss_ours.backward()
    loss_record.backward()
    return ours, record, names, loss_ours, loss_record


# ---- the fixture itself ----------------------------------------------------------------------------------------

def test_fixture_is_the_logged_program():
    data = FIXTURE.read_bytes()
    assert hashlib.sha256(data).hexdigest() == PROGRAM_SHA256
    assert len(data) == 59613
    top, main = split_program(data.decode())
    assert "class GPT(nn.Module)" in top and "dist.init_process_group" in main


# ---- model: initialisation, loss and gradients in training mode, loss in eval mode -----------------------------

def test_initial_weights_are_the_records_draw_for_draw(rec):
    """Same seed, same generator (CPU): every parameter of both fresh models is equal, zero-initialised ones
    included. Loss parity over repeated runs (sidebyside --seed) compares two samples of one distribution of
    starting points only if the init rules are the same: scale, zeros, order of the draws."""
    bind_globals(rec, record_args(rec, SMALL), torch.device("cpu"), SMALL.grad_accum(1))
    torch.manual_seed(1234)
    ours = GPT(SMALL, attention_backend="dense", fp8=False)
    torch.manual_seed(1234)
    record = rec.GPT(vocab_size=SMALL.vocab_size, num_layers=SMALL.num_layers, num_heads=SMALL.num_heads,
                     head_dim=SMALL.head_dim, model_dim=SMALL.model_dim, max_seq_len=SMALL.rotary_len)
    record_params = dict(record.named_parameters())
    drawn = 0
    for name, p in ours.named_parameters():
        q = record_params[name_map(SMALL.num_layers)[name]]
        assert torch.equal(p.detach(), q.detach().to(p.dtype)), name
        drawn += bool((p != 0).any())
    plan = layer_plan(SMALL.num_layers)  # embed, 3 value embeds, scalars; qkvo (o zero) per attention, fc per MLP
    assert drawn == 5 + sum(s.has_attn for s in plan) + sum(s.has_mlp for s in plan), drawn


def test_rotary_tables_and_yarn_agree_through_the_schedule(rec):
    ours, record, _ = make_pair(rec)
    assert torch.equal(ours.yarn.cos, record.yarn.cos) and torch.equal(ours.yarn.sin, record.yarn.sin)
    assert ours.yarn.cos.dtype == record.yarn.cos.dtype == torch.bfloat16
    for old, new in ((3, 7), (7, 11), (11, 13)):  # the schedule's YaRN steps, as the training loop applies them
        extend_both(ours, record, old, new)
    ours.yarn.reset()
    record.yarn.reset()
    assert torch.equal(ours.yarn.cos, record.yarn.cos) and ours.yarn.attn_scale == record.yarn.attn_scale == 0.1


def test_training_loss_and_every_gradient_match(rec):
    ours, record, names, loss_ours, loss_record = train_step_grads(rec)
    assert loss_record.item() > 1000  # summed over 256 tokens: the training loss is a sum in both
    assert rel(loss_ours.detach(), loss_record.detach()) < LOSS_RTOL
    record_params = dict(record.named_parameters())
    worst = {}
    for name, p in ours.named_parameters():
        q = record_params[names[name]]
        assert p.grad is not None and q.grad is not None, name
        assert q.grad.abs().sum() > 0, f"{name}: zero gradient, the comparison would prove nothing"
        worst[name] = rel(p.grad, q.grad)
    assert max(worst.values()) < GRAD_RTOL, sorted(worst.items(), key=lambda kv: -kv[1])[:5]


def test_eval_loss_matches_at_the_final_validation_windows(rec):
    ours, record, _ = make_pair(rec)
    for old, new in ((3, 7), (7, 11), (11, 13)):
        extend_both(ours, record, old, new)
    ours.eval()
    record.eval()
    with torch.no_grad():  # the final validation: short window 6, long window widened to 20 without YaRN
        loss_ours, loss_record = forward_both(ours, record, 6, 20, seed=1)
    assert 5 < loss_record.item() < 20  # a mean in eval
    assert rel(loss_ours, loss_record) < LOSS_RTOL


# ---- optimizers: one and two full steps -------------------------------------------------------------------------

def optimizer_pair(rec, ours: GPT, record, cfg: TrainConfig = SMALL, split_groups: bool = True):
    adam, muon = build_optimizers(ours, cfg)
    setup = RecordSetup(rec, record)
    if split_groups:
        assert split_mixed_muon_groups(setup.optimizer2) == [1, 10, 10, 6, 16]
    return adam, muon, setup


def step_both(rec, cfg, step, ours, record, adam, muon, setup):
    set_hyperparameters(adam, muon, cfg, step)
    setup.apply_step_hyperparameters(step)
    before = {n: p.detach().clone() for n, p in ours.named_parameters()}
    before_rec = {n: p.detach().clone() for n, p in record.named_parameters()}
    adam.step()
    muon.step()
    for opt in setup.ns["optimizers"]:  # the record's loop: `for opt in optimizers: opt.step()`
        opt.step()
    names = name_map(cfg.num_layers)
    record_params = dict(record.named_parameters())
    return {n: (p.detach() - before[n], record_params[names[n]].detach() - before_rec[names[n]])
            for n, p in ours.named_parameters()}


def adam_names(ours: GPT) -> set[str]:
    ids = {id(p) for g in ours.adam_groups() for p in g["params"]}
    return {n for n, p in ours.named_parameters() if id(p) in ids}


def assert_adam_updates_agree(deltas, names):
    """Elementwise: the update is computed in bf16 in both, so allow one bf16 ulp of the update plus float32
    rounding of the parameter itself (the update is applied to a float32 parameter)."""
    for name in names:
        d_ours, d_rec = deltas[name]
        assert d_rec.abs().sum() > 0, name
        err = (d_ours - d_rec).abs()
        bound = ADAM_ULP * d_rec.abs() + 1e-6 * (1 + d_rec.abs().max())
        assert (err <= bound).all(), (name, err.max().item())


def test_two_steps_with_the_same_newton_schulz_match_tightly(rec, monkeypatch):
    """Everything of both optimizers but the Newton–Schulz kernels: the record's NS is swapped for ours, so the
    Muon comparison isolates momentum, Nesterov blend, lr scaling, grouping and per-kind reshapes."""
    monkeypatch.setattr(rec, "newton_schulz_triton", orthogonalize_torch)
    ours, record, names, _, _ = train_step_grads(rec)
    adam, muon, setup = optimizer_pair(rec, ours, record)
    first = step_both(rec, SMALL, 0, ours, record, adam, muon, setup)  # momentum 0.85, lr x1
    ours.zero_grad(set_to_none=True)
    record.zero_grad(set_to_none=True)
    loss_ours, loss_record = forward_both(ours, record, 3, 7, seed=2)
    loss_ours.backward()
    loss_record.backward()
    late = SMALL.scheduled_steps - 1  # cool-down: lr multiplier near 0.1, momentum warmed up
    second = step_both(rec, SMALL, late, ours, record, adam, muon, setup)
    for deltas in (first, second):
        assert_adam_updates_agree(deltas, adam_names(ours))
        for name in set(deltas) - adam_names(ours):
            d_ours, d_rec = deltas[name]
            assert d_rec.abs().sum() > 0, name
            assert rel(d_ours, d_rec) < UPDATE_RTOL_SAME_NS, (name, rel(d_ours, d_rec))


def test_one_step_with_the_records_own_newton_schulz(rec):
    """The record's NS driver (its normalisation, transposes and baddbmm, with the Triton kernels' arithmetic)."""
    ours, record, _, _, _ = train_step_grads(rec)
    adam, muon, setup = optimizer_pair(rec, ours, record)
    deltas = step_both(rec, SMALL, 0, ours, record, adam, muon, setup)
    assert_adam_updates_agree(deltas, adam_names(ours))
    worst = {n: rel(*deltas[n]) for n in set(deltas) - adam_names(ours)}
    assert max(worst.values()) < NS_RTOL, sorted(worst.items(), key=lambda kv: -kv[1])[:5]


def test_sidebyside_patch_line_cuts_the_muon_groups_like_split_mixed_muon_groups(rec):
    """benchmarks/sidebyside.py's patch adds one line after the record's Muon is built; run on the record's own
    Muon, it leaves the groups split_mixed_muon_groups makes (runs of one kind), with the group settings kept."""
    from benchmarks.record_patch import MUON_LINE, MUON_SPLIT, program_text, sidebyside_patch

    patched, _ = sidebyside_patch(program_text(), train_files="a", val_files="b", steps=40, val_tokens=1024)
    assert MUON_LINE + MUON_SPLIT in patched
    muon = RecordSetup(rec, make_pair(rec)[1]).optimizer2
    assert [len(g["params"]) for g in muon.param_groups] == [1, 10, 16, 16]
    exec(MUON_SPLIT, {"optimizer2": muon})
    kinds = [[p.module for p in g["params"]] for g in muon.param_groups]
    assert [len(k) for k in kinds] == [1, 10, 10, 6, 16] and all(len(set(k)) == 1 for k in kinds)
    assert all(g["lr"] == 0.05 and g["momentum"] == 0.95 for g in muon.param_groups)

def test_records_unsplit_groups_at_one_rank_orthogonalize_six_mlp_matrices_as_blocks(rec, monkeypatch):
    """The record's own grouping [1, 10, 16, 16] at world size 1: its third group (10 attention + 6 MLP
    matrices) is reshaped by its first member, so those 6 MLP updates come out as four D×D blocks each. train/
    orthogonalizes each matrix by its kind, as the record does at 8 ranks; every other update agrees."""
    monkeypatch.setattr(rec, "newton_schulz_triton", orthogonalize_torch)
    ours, record, _, _, _ = train_step_grads(rec)
    adam, muon, setup = optimizer_pair(rec, ours, record, split_groups=False)
    assert [len(g["params"]) for g in setup.optimizer2.param_groups] == [1, 10, 16, 16]
    deltas = step_both(rec, SMALL, 0, ours, record, adam, muon, setup)
    mlp_in_third_group = [f"blocks.{i}.mlp.{w}" for i in (1, 2, 3) for w in ("fc", "proj")]  # 10 attn come first
    differ = {n for n in set(deltas) - adam_names(ours) if rel(*deltas[n]) > 0.05}
    assert differ == set(mlp_in_third_group)


class RankOfEight(types.ModuleType):
    """torch.distributed as rank `rank` of 8 ranks that all hold the same gradients: a reduce-scatter (average)
    hands this rank its slice of the input; an all-gather fills the other ranks' slots with NaN, so that only the
    parameters this rank owns come back finite."""

    def __init__(self, rank: int):
        super().__init__("rank_of_eight")
        self.rank = rank

    def __getattr__(self, name):
        return getattr(dist, name)

    def get_rank(self):
        return self.rank

    def get_world_size(self):
        return 8

    def reduce_scatter_tensor(self, output, input, op=None, group=None, async_op=False):
        output.copy_(input.view(8, *output.shape)[self.rank])
        return _Done()

    def all_gather_into_tensor(self, output_tensor, input_tensor, group=None, async_op=False):
        output_tensor.fill_(float("nan"))
        output_tensor.view(8, *input_tensor.shape)[self.rank].copy_(input_tensor)
        return _Done()


def record_muon_updates(rec, world_size: int, patched: bool, monkeypatch) -> dict[str, torch.Tensor]:
    """One step of the record's own Muon (its setup statements, its step) on fixed weights and gradients: per
    Muon parameter, the update. At world size 8 each of the 8 ranks is run in turn and every parameter's update
    is taken from the rank that owns it."""
    updates: dict[str, torch.Tensor] = {}
    for rank in range(world_size if world_size == 8 else 1):
        ours, record, names = make_pair(rec)
        muon = RecordSetup(rec, record).optimizer2
        if patched:
            assert split_mixed_muon_groups(muon) == [1, 10, 10, 6, 16]
        gen = torch.Generator().manual_seed(7)
        params = [p for g in muon.param_groups for p in g["params"]]
        record_names = {id(p): n for n, p in record.named_parameters()}
        for p in sorted(params, key=lambda p: record_names[id(p)]):
            p.grad = torch.randn(p.shape, generator=gen)
        before = {record_names[id(p)]: p.detach().clone() for p in params}
        for group in muon.param_groups:  # the loop's step-0 values: lr x1, momentum 0.85
            group["momentum"] = 0.85
        with monkeypatch.context() as patch:
            if world_size == 8:
                patch.setattr(rec, "dist", RankOfEight(rank))
            muon.step()
        for p in params:
            name = record_names[id(p)]
            if torch.isfinite(p).all():
                assert name not in updates, f"{name} owned by two ranks"
                updates[name] = p.detach() - before[name]
    return updates


def one_matrix_at_a_time(G: torch.Tensor) -> torch.Tensor:
    """Newton–Schulz on each matrix of the batch alone: a batch's makeup (which the chunking decides) cannot
    change a matrix's rounding, so updates differ only where a matrix is treated differently (its reshape)."""
    return torch.stack([orthogonalize_torch(g) for g in G])


def test_the_world_size_8_muon_patch_at_one_rank_is_the_unpatched_program_at_eight(rec, monkeypatch):
    """The declared patch (record_patch.MUON_SPLIT) on the record's Muon at world size 1 against the record's
    unpatched Muon as rank 0..7 of 8 (its chunking and reshapes unchanged; only the collectives are simulated):
    every one of the 43 Muon matrices gets the same update, bit for bit. Unpatched at world size 1, six MLP
    matrices are orthogonalized as four blocks each and come out different."""
    monkeypatch.setattr(rec, "newton_schulz_triton", one_matrix_at_a_time)
    eight = record_muon_updates(rec, 8, patched=False, monkeypatch=monkeypatch)
    assert len(eight) == 43 and all(u.abs().sum() > 0 for u in eight.values())
    one_patched = record_muon_updates(rec, 1, patched=True, monkeypatch=monkeypatch)
    assert set(one_patched) == set(eight)
    assert {n for n in eight if not torch.equal(one_patched[n], eight[n])} == set()
    one = record_muon_updates(rec, 1, patched=False, monkeypatch=monkeypatch)
    differ = {n for n in eight if rel(one[n], eight[n]) > 0.05}
    assert differ == {f"blocks.{i}.mlp.{w}" for i in (1, 2, 3) for w in ("c_fc", "c_proj")}


# ---- data: the record's generator against train/'s loaders ---------------------------------------------------------

def synthetic_shards(tmp_path, n_train_docs: int = 150):
    """One train shard of documents 1..700 tokens long (BOS first; some longer than max_seq_len), one val shard."""
    gen = torch.Generator().manual_seed(3)
    docs = []
    for _ in range(n_train_docs):
        length = int(torch.randint(1, 700, (1,), generator=gen))
        docs += [BOS_ID] + torch.randint(0, 50000, (length - 1,), generator=gen).tolist()
    write_shard(tmp_path / "fineweb_train_000001.bin", docs)
    write_shard(tmp_path / "fineweb_val_000000.bin", docs[: 8 * T + 500])
    return str(tmp_path / "fineweb_train_*.bin"), str(tmp_path / "fineweb_val_*.bin")


# The record's DataPreloader starts reading the next file at once; with one file its thread ends in StopIteration
# (so it does in the record's own runs on the last shard). Harmless here: the test never needs a second shard.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_training_batches_match_the_records_generator(rec, tmp_path):
    """World size 1: the record's generator makes grad_accum = 8 micro-batches per step, one BOS-aligned slot each;
    train/'s loader fills the same 8 slots. Compared over 3 steps (24 micro-batches, one shard)."""
    train_glob, _ = synthetic_shards(tmp_path)
    cfg = dataclasses.replace(SMALL, batch_slots=8, train_batch_tokens=8 * T)
    bind_globals(rec, record_args(rec, cfg), torch.device("cpu"), 8)
    theirs = rec.distributed_data_generator(train_glob, cfg.train_batch_tokens, cfg.train_max_seq_len,
                                            grad_accum_steps=8)
    ours = TrainLoader(train_glob, cfg.train_tokens_per_slot, cfg.train_max_seq_len, cfg.batch_slots, 1, 0)
    for _ in range(3 * 8):
        inputs, targets, cum = next(theirs)
        b = ours.next_batch()
        assert torch.equal(b.inputs, inputs) and torch.equal(b.targets, targets)
        assert torch.equal(b.doc_bounds, cum)  # cumulative lengths, last shortened by 1, padded with T


def test_validation_batches_match_the_records_generator(rec, tmp_path):
    """The record's unaligned validation slices vs train/'s: same tokens; document starts equal up to the record's
    repeated 0 when a slice begins with BOS (an empty first document, the same attention)."""
    _, val_glob = synthetic_shards(tmp_path)
    cfg = dataclasses.replace(SMALL, batch_slots=8, val_batch_tokens=8 * T, val_tokens=8 * T)
    bind_globals(rec, record_args(rec, cfg), torch.device("cpu"), 8)
    theirs = rec.distributed_data_generator(val_glob, cfg.val_batch_tokens, -1, grad_accum_steps=8,
                                            align_to_bos=False)
    ours = ValLoader(val_glob, cfg.val_tokens_per_slot, 1, 0, micro_steps=8)
    for _ in range(8):
        inputs, targets, cum = next(theirs)
        b = ours.next_batch()
        assert torch.equal(b.inputs, inputs) and torch.equal(b.targets, targets)
        starts = cum.tolist()
        starts = starts[:1] + [x for x in starts[1:] if x != 0]  # drop the record's duplicate 0
        assert b.doc_bounds.tolist()[: len(starts)] == starts[: b.doc_bounds.numel()]
        assert set(b.doc_bounds.tolist()[len(starts):]) <= {T}


# ---- hyperparameters as each loop applies them --------------------------------------------------------------------

def record_hparams(setup: RecordSetup, record, names: dict[str, str]) -> dict[str, dict]:
    """Per parameter (our names): the lr the record's optimizers apply to it, momentum, betas, eps, decay."""
    reverse = {v: k for k, v in names.items()}
    record_names = {id(p): n for n, p in record.named_parameters()}
    out = {}
    for group in setup.optimizer1.param_groups:
        for p in group["params"]:
            out[reverse[record_names[id(p)]]] = dict(opt="adam", lr=group["lr"] * getattr(p, "lr_mul", 1.0),
                                                     betas=tuple(group["betas"]), eps=group["eps"],
                                                     weight_decay=group["weight_decay"])
    for group in setup.optimizer2.param_groups:
        for p in group["params"]:
            out[reverse[record_names[id(p)]]] = dict(opt="muon", lr=group["lr"] * getattr(p, "lr_mul", 1.0),
                                                     momentum=group["momentum"], weight_decay=group["weight_decay"])
    return out


def our_hparams(ours: GPT, adam, muon) -> dict[str, dict]:
    """The same, read from train/'s optimizers (DistAdam's lr multiplier: the group's lr_mul; no weight decay)."""
    param_names = {id(p): n for n, p in ours.named_parameters()}
    out = {}
    for group in adam.param_groups:
        for p in group["params"]:
            out[param_names[id(p)]] = dict(opt="adam", lr=group["lr"] * getattr(p, "lr_mul", group.get("lr_mul", 1.0)),
                                           betas=tuple(group["betas"]), eps=group["eps"],
                                           weight_decay=group.get("weight_decay", 0.0))
    for group in muon.param_groups:
        for p in group["params"]:
            out[param_names[id(p)]] = dict(opt="muon", lr=group["lr"] * getattr(p, "lr_mul", 1.0),
                                           momentum=group["momentum"], weight_decay=group.get("weight_decay", 0.0))
    return out


RECORD_SCHEDULE = dict(scheduled_steps=1640, extension_steps=40, muon_momentum_warmup_steps=300)
# the side-by-side benchmark's schedule: 80 scheduled steps, no extension, the record's 300-step momentum warm-up
SIDEBYSIDE_SCHEDULE = dict(scheduled_steps=80, extension_steps=0, muon_momentum_warmup_steps=300)


@pytest.mark.parametrize("schedule, steps", [
    (RECORD_SCHEDULE, [0, 1, 150, 299, 300, 819, 820, 821, 1000, 1500, 1639, 1679]),
    (SIDEBYSIDE_SCHEDULE, list(range(80))),
], ids=["record", "sidebyside-80"])
def test_applied_hyperparameters_match_the_records_loop(rec, schedule, steps):
    cfg = dataclasses.replace(SMALL, **schedule).validate()
    ours, record, names = make_pair(rec, cfg)
    adam, muon = build_optimizers(ours, cfg)
    setup = RecordSetup(rec, record)  # the program's own optimizer construction and initial_lr loop
    for step in steps:
        set_hyperparameters(adam, muon, cfg, step)
        setup.apply_step_hyperparameters(step)  # the program's per-step lr and momentum statements
        want, got = record_hparams(setup, record, names), our_hparams(ours, adam, muon)
        assert set(got) == set(want) == set(names)
        for name in names:
            w, g = want[name], got[name]
            assert g["opt"] == w["opt"], name
            assert g["lr"] == pytest.approx(w["lr"], rel=1e-12), (step, name)
            assert g["weight_decay"] == w["weight_decay"] == 0.0, name
            if w["opt"] == "adam":
                assert g["betas"] == w["betas"] == (0.8, 0.95) and g["eps"] == w["eps"] == 1e-8, name
            else:
                assert g["momentum"] == pytest.approx(w["momentum"], rel=1e-12), (step, name)


@pytest.mark.parametrize("schedule", [RECORD_SCHEDULE, SIDEBYSIDE_SCHEDULE], ids=["record", "sidebyside-80"])
def test_schedule_functions_match_the_records_at_every_step(rec, schedule):
    cfg = dataclasses.replace(TrainConfig(), **schedule)
    setup = RecordSetup(rec, make_pair(rec)[1])
    bind_globals(rec, record_args(rec, cfg), torch.device("cpu"), 8)  # get_lr and get_ws read `args`
    for step in range(cfg.total_steps + 1):
        assert window_blocks(step, cfg) == setup.get_ws(step), step
        if step < cfg.total_steps:  # the record evaluates get_lr on training steps only
            assert lr_multiplier(step, cfg) == setup.get_lr(step), step


def test_record_preset_equals_the_programs_constants(rec):
    """The record preset's fields against the program's Hyperparameters defaults and main-section constants."""
    ours, hp = TrainConfig(), rec.Hyperparameters()
    pairs = dict(train_batch_tokens=hp.train_batch_size, train_max_seq_len=hp.train_max_seq_len,
                 val_batch_tokens=hp.val_batch_size, val_tokens=hp.val_tokens, scheduled_steps=hp.num_iterations,
                 extension_steps=hp.iteration_extension, cooldown_frac=hp.cooldown_frac,
                 val_every=hp.val_loss_every, block_size=hp.block_size, ws_schedule=tuple(hp.ws_schedule),
                 ws_final=hp.ws_validate, ws_final_long=hp.ws_long_validate)
    assert {k: getattr(ours, k) for k in pairs} == pairs
    setup = RecordSetup(rec, make_pair(rec)[1])
    bind_globals(rec, hp, torch.device("cpu"), 8)
    assert ours.warmup_steps == setup.warmup_steps == 30
    (adam,) = {g["lr"] for g in setup.optimizer1.param_groups}
    (muon,) = {g["lr"] for g in setup.optimizer2.param_groups}
    assert (ours.adam_lr, ours.muon_lr) == (adam, muon) == (0.008, 0.05)
    record = setup.ns["model"]
    lr_muls = {n: getattr(p, "lr_mul", None) for n, p in record.named_parameters() if hasattr(p, "lr_mul")}
    assert lr_muls == {"scalars": ours.scalar_lr_mul, "embed.weight": ours.embed_lr_mul,
                       **{f"value_embeds.{i}.weight": ours.embed_lr_mul for i in range(3)},
                       "lm_head.weight": ours.head_lr_mul}
    setup.apply_step_hyperparameters(ours.muon_momentum_warmup_steps)  # the warm-up ends where the record's does
    assert {g["momentum"] for g in setup.optimizer2.param_groups} == {0.95}


# ---- the speed changes of issue 15 keep the numbers: shard prefetch, compiled Adam step ----------------------------

def test_prefetched_shards_give_the_same_batches_and_errors_at_the_switch(tmp_path, monkeypatch):
    """Three shards of ~1.5 steps each: the loader with background reads equals one reading synchronously; a
    corrupt third shard fails when the loader reaches it, with the DataError a synchronous read raises."""
    gen = torch.Generator().manual_seed(5)
    for i in range(3):
        docs = []
        while len(docs) < 3 * 8 * (T + 1):
            length = int(torch.randint(1, 300, (1,), generator=gen))
            docs += [BOS_ID] + torch.randint(0, 50000, (length - 1,), generator=gen).tolist()
        write_shard(tmp_path / f"fineweb_train_00000{i + 1}.bin", docs)

    def batches(n: int) -> list:
        loader = TrainLoader(str(tmp_path / "fineweb_train_*.bin"), T, 128, 8, 2, 1, cycle=True)
        return [loader.next_batch() for _ in range(n)]

    prefetched = batches(40)  # 10 steps of 4 micro-batches at rank 1 of 2: several shard switches and a wrap
    monkeypatch.setattr(data_module, "ShardPrefetch", SyncRead)
    synchronous = batches(40)
    for a, b in zip(prefetched, synchronous):
        assert torch.equal(a.inputs, b.inputs) and torch.equal(a.doc_bounds, b.doc_bounds)
    monkeypatch.undo()

    (tmp_path / "fineweb_train_000003.bin").write_bytes(b"\0" * 100)  # truncated: a header-length error
    loader = TrainLoader(str(tmp_path / "fineweb_train_*.bin"), T, 128, 8, 1, 0)
    served = 0
    with pytest.raises(DataError, match="fineweb_train_000003.bin"):
        while True:
            loader.next_batch()
            served += 1
    assert served >= 8 * 2  # the first two shards were served before the error surfaced


class SyncRead:
    """ShardPrefetch without the thread."""

    def __init__(self, path):
        self.path, self._result = path, data_module.read_shard_with_bos(path)

    def get(self):
        return self._result


def test_single_file_cycling_reuses_the_shard_in_memory(tmp_path, monkeypatch):
    train_glob, _ = synthetic_shards(tmp_path, n_train_docs=40)
    reads = []
    real = data_module.read_shard_with_bos
    monkeypatch.setattr(data_module, "read_shard_with_bos", lambda path: reads.append(path) or real(path))
    loader = TrainLoader(train_glob, T, 128, 8, 1, 0, cycle=True)
    for _ in range(8 * 12):  # many passes over the one file
        loader.next_batch()
    assert len(reads) == 1 and loader._file_idx == 0


def test_adam_step_size_as_a_tensor_is_the_same_arithmetic(monkeypatch):
    """compile=True passes the step size as a 0-dim float32 tensor (no recompile per lr). With torch.compile made
    the identity here (inductor on two CPU cores takes minutes), that path must equal the float path bit for bit;
    the compiled kernels themselves are compared with the record's compiled step by benchmarks/device_diff.py."""
    import train.adam as adam_module

    monkeypatch.setattr(adam_module, "_compiled_update", None)
    monkeypatch.setattr(torch, "compile", lambda fn, **_: (lambda *a, **k: fn(*a, **k)))
    gen = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(64, 16, generator=gen).bfloat16()),
              torch.nn.Parameter(torch.randn(72, generator=gen))]
    twins = [torch.nn.Parameter(p.detach().clone()) for p in params]
    eager = adam_module.DistAdam([dict(params=[params[0]], lr_mul=75.0), dict(params=[params[1]], lr_mul=5.0)])
    compiled = adam_module.DistAdam([dict(params=[twins[0]], lr_mul=75.0), dict(params=[twins[1]], lr_mul=5.0)],
                                    compile=True)
    assert compiled._update is not adam_module.adam_update_
    for step in range(3):
        for p, q in zip(params, twins):
            p.grad = torch.randn(p.shape, generator=gen).to(p.dtype)
            q.grad = p.grad.clone()
        for opt in (eager, compiled):
            for group in opt.param_groups:
                group["lr"] = 0.008 * (1 - 0.3 * step)
            opt.step()
        for p, q in zip(params, twins):
            assert torch.equal(p, q)
