"""Loop differential test: train/'s timed loop against the record's own loop, at every step of three schedules.

    .venv/bin/python -m pytest -q tests/test_train_loop_vs_record.py

tests/test_train_vs_record.py compares one step's numerics; this compares what the two loops *apply* at each step
(tests/helpers_loop.py): the learning rate of every parameter, Muon's momentum, the attention windows (short and
long) and YaRN scale of every training and validation forward (the final validation's widened long window
included), the YaRN extensions, the micro-batches of a step (count, tokens, checksum) and the steps that validate.
The record's side runs its loop statements from the pinned program text; train/'s is train.loop.timed_run.

Schedules: the record's whole one (1,640 + 40 steps, validation every 125); the smoke cut of 40 steps as
`repro reproduce --smoke 40` gives each trainer (pipeline/records/patch.py: the record's program patched, the
native trainer's settings); and benchmarks/sidebyside.py's 40- and 80-step device runs (the record's program
patched by sidebyside_patch, the native command it builds). Sizes are tiny (8 slots of 64 tokens) and the same
on both sides; only the schedules come from each side's own source.

The shifted loops at the end prove the test can fail: each injects a one-step shift into train/'s loop through the
functions it calls (train.loop's names), and the comparison must find it.
"""

from __future__ import annotations

import argparse

import pytest
import torch
import torch.distributed as dist

import train.loop as loop_module
from benchmarks.record_patch import program_text, sidebyside_patch
from benchmarks.record_program import load_record
from pipeline.records.smoke_cut import SMOKE_EXTENSION, smoke_cut
from pipeline.runs.train_plan import effective_native_settings
from tests.helpers_loop import first_differences, native_loop, record_hyperparameters, record_loop
from tests.ports import free_port
from train.__main__ import build_config, parse_args
from train.data import BOS_ID, write_shard

pytestmark = [  # the record's code calls the collectives torch >= 2.10 renamed
    pytest.mark.filterwarnings("ignore:.*is deprecated.*:FutureWarning"),
    pytest.mark.filterwarnings("ignore:.*script_method.*:DeprecationWarning"),
]

# the same sizes on both sides: 8 slots of 64 tokens per step, 2 validation batches of 512 tokens
SIZES = dict(train_batch_tokens=512, train_max_seq_len=64, val_batch_tokens=512, val_tokens=1024, block_size=8)
RECORD_FIELDS = dict(train_batch_tokens="train_batch_size", train_max_seq_len="train_max_seq_len",
                     val_batch_tokens="val_batch_size", val_tokens="val_tokens", block_size="block_size")
MODEL = dict(num_layers=12, model_dim=64, num_heads=2, fp8=False, compile=False, bf16=False, fused_loss=False,
             attention="dense")
RECORD_MODEL = dict(num_heads=2, head_dim=32, model_dim=64)


@pytest.fixture(scope="module")
def rec():
    created = not dist.is_initialized()
    if created:  # the record's model reads the world size from the process group
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    try:
        yield load_record("cpu")
    finally:
        if created:
            dist.destroy_process_group()


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> tuple[str, str]:
    """Documents of 1..120 tokens (BOS first): the first train shard lasts the record's 1,680 steps; a second one
    is there for both loaders' background read of the next file."""
    folder = tmp_path_factory.mktemp("loop-shards")
    gen = torch.Generator().manual_seed(11)
    for name, n in (("fineweb_train_000001.bin", 3_000_000), ("fineweb_train_000002.bin", 20_000),
                    ("fineweb_val_000000.bin", 4096)):
        tokens = torch.randint(0, 50000, (n,), generator=gen, dtype=torch.int32)
        starts = torch.randint(1, 121, (n,), generator=gen).cumsum(0)
        tokens[0], tokens[starts[starts < n]] = BOS_ID, BOS_ID
        write_shard(folder / name, tokens)
    return str(folder / "fineweb_train_*.bin"), str(folder / "fineweb_val_*.bin")


def native_config(argv: list[str], shards: tuple[str, str], sizes: dict):
    """train/'s config as its command line builds it: `argv` (the schedule's) plus the shared tiny sizes."""
    sets = [f"{k}={v}" for k, v in {**MODEL, **sizes}.items()]
    args = parse_args(argv + ["--train-files", shards[0], "--val-files", shards[1]]
                      + [x for s in sets for x in ("--set", s)])
    return build_config(args)


def record_args(text: str, shards: tuple[str, str], sizes: dict):
    args = record_hyperparameters(text)
    for ours, theirs in RECORD_FIELDS.items():
        if ours in sizes:
            setattr(args, theirs, sizes[ours])
    args.train_files, args.val_files = shards
    return args


def smoke(steps: int, shards):
    """`repro reproduce --smoke N`: the record's program with its smoke cut; the native trainer's settings."""
    text = smoke_cut(program_text().encode(), steps).apply(program_text().encode()).decode()
    overrides, native_steps = effective_native_settings((), None, steps, None)
    assert native_steps is None  # the cut sets scheduled_steps; nothing is scaled
    argv = ["--preset", "record", *[x for o in overrides for x in ("--set", o)]]
    return text, argv, SIZES


def sidebyside(steps: int, shards, tmp_path):
    """benchmarks/sidebyside.py's device runs: its patched program and its native command (one validation batch)."""
    from benchmarks.sidebyside import native_command

    val = SIZES["val_tokens"]
    text, _ = sidebyside_patch(program_text(), train_files=shards[0], val_files=shards[1], steps=steps,
                               val_tokens=val, cycle_train=False, seed_from_env=True)
    a = argparse.Namespace(steps=steps, val_tokens=val, attention="dense", warmup_steps=None, native_set=[],
                           train_files=shards[0], val_files=shards[1])
    cmd, _, _ = native_command(a, 1, tmp_path / "native", False, [], None)
    argv = cmd[cmd.index("train") + 1:]
    return text, argv, dict(SIZES, val_batch_tokens=val)


def traces(rec, schedule: str, shards, tmp_path):
    if schedule == "record":
        text, argv, sizes = program_text(), ["--preset", "record"], SIZES
    elif schedule == "smoke-40":
        text, argv, sizes = smoke(40, shards)
    else:
        text, argv, sizes = sidebyside(int(schedule.split("-")[1]), shards, tmp_path)
    cfg = native_config(argv, shards, sizes)
    return record_loop(rec, text, record_args(text, shards, sizes), RECORD_MODEL), cfg


# `repro reproduce --smoke N --trainer native` cuts the record's schedule where the record's smoke patch cuts its
# program (N scheduled steps, SMOKE_EXTENSION of extension, the warm-ups as written: native smoke patch version 3).
# Version 1 scaled it instead (39 + 1 steps and a 7-step Muon momentum warm-up at N = 40), and this comparison
# failed from step 1 on.


@pytest.mark.parametrize("schedule, steps", [("record", 1680), ("smoke-40", 40 + SMOKE_EXTENSION),
                                             ("device-40", 40), ("device-80", 80)])
def test_the_loop_applies_the_records_schedule_at_every_step(rec, shards, tmp_path, schedule, steps):
    want, cfg = traces(rec, schedule, shards, tmp_path)
    got = native_loop(cfg)
    assert cfg.total_steps == steps == max(want)
    # the record validates at 0, every 125 steps and at the end, with the final validation's windows (6, 20)
    assert want[steps].val and want[steps].val[0][:2] == (6, 20) and want[0].val
    assert len(want[0].train) == 8 and not want[steps].train  # 8 micro-steps per step; the last step only validates
    assert first_differences(want, got) == []


# ---- a loop shifted by one step must fail the comparison ----------------------------------------------------------

def _later(fn, by: int):
    return lambda step, cfg: fn(max(step + by, 0), cfg)


def _muon_lr_from(step_shift: int):
    """set_hyperparameters, but Muon's lr from another step (a defect an audit once put in by hand)."""
    real = loop_module.set_hyperparameters

    def shifted(adam, muon, cfg, step):
        out = real(adam, muon, cfg, step)
        for group in muon.param_groups:
            group["lr"] = cfg.muon_lr * loop_module.lr_multiplier(max(step + step_shift, 0), cfg)
        return out

    return shifted


SHIFTS = {  # name -> (train.loop attribute, replacement maker)
    "windows-early": ("window_blocks", lambda: _later(loop_module.window_blocks, 1)),
    "windows-late": ("window_blocks", lambda: _later(loop_module.window_blocks, -1)),
    "lr-early": ("lr_multiplier", lambda: _later(loop_module.lr_multiplier, 1)),
    "lr-late": ("lr_multiplier", lambda: _later(loop_module.lr_multiplier, -1)),
    "muon-lr-early": ("set_hyperparameters", lambda: _muon_lr_from(1)),
    "momentum-early": ("muon_momentum", lambda: _later(loop_module.muon_momentum, 1)),
    "momentum-late": ("muon_momentum", lambda: _later(loop_module.muon_momentum, -1)),
    "validation-early": ("validates", lambda: _later(loop_module.validates, 1)),
    "validation-late": ("validates", lambda: _later(loop_module.validates, -1)),
}


@pytest.mark.parametrize("shift", sorted(SHIFTS))
def test_a_loop_shifted_by_one_step_fails(rec, shards, tmp_path, monkeypatch, shift):
    """On the 80-step device schedule (the shortest where every quantity changes: cool-down, momentum warm-up,
    three window phases, validation at 0 and 80)."""
    want, cfg = traces(rec, "device-80", shards, tmp_path)
    name, make = SHIFTS[shift]
    monkeypatch.setattr(loop_module, name, make())
    assert first_differences(want, native_loop(cfg)) != []


def test_a_step_with_another_batch_size_fails(rec, shards, tmp_path):
    """One micro-step fewer per step (the grad_accum the loop is handed) is found too."""
    want, cfg = traces(rec, "device-40", shards, tmp_path)
    assert first_differences(want, native_loop(cfg, grad_accum=cfg.grad_accum(1) - 1)) != []


def test_the_untimed_warm_up_leaves_model_yarn_and_optimizers_as_they_started(shards):
    """The timed loop above starts from a fresh model, YaRN and optimizers; train/'s warm-up (real training steps
    cycling the windows, as the record's; 6 here, twice through the three) must hand it exactly that, as the
    record's warm-up does."""
    from train.log import RunLog
    from train.loop import AttnArgs, DistEnv, Run, build_optimizers, warm_up
    from train.model import GPT

    cfg = native_config(["--preset", "record"], shards, dict(SIZES, warmup_steps=6))
    torch.manual_seed(0)
    model = GPT(cfg, attention_backend="dense", fp8=False)
    adam, muon = build_optimizers(model, cfg)
    cpu = torch.device("cpu")
    run = Run(cfg=cfg, env=DistEnv(0, 0, 1, cpu), model=model, forward=model, adam=adam, muon=muon,
              attn_args=AttnArgs("dense", cfg.block_size, cpu),
              log=RunLog(None, None, enabled=False), grad_accum=cfg.grad_accum(1))
    state = {k: v.clone() for k, v in model.state_dict().items()}
    tables = (model.yarn.cos.clone(), model.yarn.sin.clone(), model.yarn.angular_freq.clone())
    calls = []  # (training, grad enabled, tokens) of each forward
    handle = model.register_forward_pre_hook(
        lambda module, args: calls.append((module.training, torch.is_grad_enabled(), args[0].numel())))
    try:
        warm_up(run)
    finally:
        handle.remove()
    # its last forward is one validation micro-step (eval, no autograd, a validation slot's tokens), so that graph
    # compiles in the warm-up, not after a start gate's opening at step 0
    assert calls[-1] == (False, False, cfg.val_tokens_per_slot) and model.training
    assert all(training and grad for training, grad, _ in calls[:-1]) and len(calls) == 7
    assert adam.state and muon.state  # it trained (the old optimizers hold moments)
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    assert model.yarn.attn_scale == 0.1
    assert all(torch.equal(a, b) for a, b in zip(tables, (model.yarn.cos, model.yarn.sin, model.yarn.angular_freq)))
    assert run.adam is not adam and run.muon is not muon and not run.adam.state and not run.muon.state


# ---- the data the timed run trains on: the record's loader from its start, as after the record's warm-up ----------

def training_inputs_of_a_run(cfg) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(inputs, targets) of every training forward of one real train.loop.train run (CPU, world size 1), in order:
    the warm-up's and then the timed run's. Read by a forward pre-hook of torch's on every GPT module."""
    from train.loop import DistEnv, train
    from train.model import GPT

    seen = []

    def hook(module, args):
        if isinstance(module, GPT) and module.training:
            seen.append((args[0].clone(), args[1].clone()))

    handle = torch.nn.modules.module.register_module_forward_pre_hook(hook)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the trainer does on CPU: small ops, shared cores
    try:
        train(cfg, None, None, env=DistEnv(0, 0, 1, torch.device("cpu")), console=False)
    finally:
        handle.remove()
        torch.set_num_threads(threads)
    return seen


def record_micro_batches(rec, cfg, n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The first n micro-batches of the record's own train loader, made as its program makes it (twice: before its
    warm-up and again before its timed loop, `train_loader = distributed_data_generator(...)`)."""
    rec.device = torch.device("cpu")
    loader = rec.distributed_data_generator(cfg.train_files, cfg.train_batch_tokens, cfg.train_max_seq_len,
                                            grad_accum_steps=cfg.grad_accum(1))
    return [next(loader)[:2] for _ in range(n)]


def test_the_timed_run_trains_on_the_records_loader_from_its_start_after_the_warm_up(rec, shards):
    """The record's program trains its warm-up steps, then makes its train loader again: the timed run starts the
    data over. A timed run that continued the warm-up's loader trains another model (an audit measured val loss
    7.2092 against 7.3788); the schedule comparison above runs the timed loop alone and cannot see it. Here a whole
    run (warm-up 3 micro-steps, then 2 steps of 8) must feed the record's first batches to both."""
    warm, steps = 3, 2
    cfg = native_config(["--preset", "record"], shards, dict(SIZES, warmup_steps=warm, scheduled_steps=steps,
                                                             extension_steps=0, seed=0, val_tokens=512))
    grad_accum = cfg.grad_accum(1)
    seen = training_inputs_of_a_run(cfg)
    assert len(seen) == warm + steps * grad_accum
    want = record_micro_batches(rec, cfg, steps * grad_accum)
    assert not torch.equal(want[0][0], want[warm][0])  # the loader moves on: a continued one would differ
    for i, ((inputs, targets), (rec_inputs, rec_targets)) in enumerate(zip(seen[:warm], want)):
        assert torch.equal(inputs, rec_inputs) and torch.equal(targets, rec_targets), f"warm-up micro-step {i}"
    for i, ((inputs, targets), (rec_inputs, rec_targets)) in enumerate(zip(seen[warm:], want)):
        assert torch.equal(inputs, rec_inputs.to(inputs.dtype)) and torch.equal(targets, rec_targets), \
            f"timed micro-step {i} (step {i // grad_accum}) is not the record's micro-batch {i}"
