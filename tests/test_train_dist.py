"""World sizes 1, 2 and 4 on CPU with gloo (127.0.0.1): the same global batch gives the same training.

    .venv/bin/python -m pytest -q tests/test_train_dist.py

1. Gradients: one step of the tiny model at world 4 (torch.multiprocessing, gloo), averaged across ranks as the
   optimizers do, equals world size 1 with 4 accumulated micro-steps: to fp32 summation order (1e-5) for an fp32
   model, to bf16 summation order (1e-2) in the record's bf16.
2. Training: 3 steps of the tiny preset (fp32 model, fixed seed) at world 1 (in this process), 2 (`torchrun -m
   train`, the real launcher and CLI) and 4 (the spawned ranks above) end with the same validation loss (2e-3)
   and parameters. The parameter tolerance is not bit-level: Muon orthogonalizes in
   bf16, and the 1e-7 differences that summation order leaves in its input flip bf16 roundings of a few elements;
   Newton–Schulz amplifies those along small singular directions (its slope near zero is a^5 ≈ 485), so Muon's
   matrices agree to a few percent (1e-1), and Adam's (bf16 moments) to 2e-2.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tests.ports import free_port
from tests.test_train_data import write_corpus
from train.config import TrainConfig, apply_overrides, preset
from train.data import TrainLoader
from train.loop import AttnArgs, DistEnv, accumulate_gradients, init_distributed, train
from train.model import GPT

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def one_step_gradients(env: DistEnv, train_glob: str, bf16: bool) -> dict[str, torch.Tensor]:
    cfg = apply_overrides(preset("tiny"), [f"train_files={train_glob}", f"bf16={bf16}"])
    torch.manual_seed(0)
    model = GPT(cfg, attention_backend="dense", fp8=False, world_size=env.world_size)
    loader = TrainLoader(cfg.train_files, cfg.train_tokens_per_slot, cfg.train_max_seq_len, cfg.batch_slots,
                         env.world_size, env.rank)
    args = AttnArgs("dense", cfg.block_size, env.device)(1, 3, 0.1)
    accumulate_gradients(model, model, loader, cfg.grad_accum(env.world_size), env.device, args)
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if n != "scalars"}


def fp32_tiny(corpus) -> TrainConfig:
    train_glob, val_glob = corpus
    return apply_overrides(preset("tiny"), [f"train_files={train_glob}", f"val_files={val_glob}", "seed=0",
                                            "bf16=false", "warmup_steps=0", "val_every=0"]).with_total_steps(3)


def _world_worker(rank: int, world: int, port: int, corpus, out: str) -> None:
    """One rank of a gloo run: one step's gradients (averaged like the optimizers do), then 3 training steps."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    env = init_distributed()
    grads = {}
    for bf16 in (False, True):
        grads[bf16] = one_step_gradients(env, corpus[0], bf16)
        for g in grads[bf16].values():
            dist.all_reduce(g, op=dist.ReduceOp.SUM)
            g /= world
    result = train(fp32_tiny(corpus), None, None, env=env, save_model=Path(out) / "model.pt", console=False)
    if rank == 0:
        torch.save(dict(grads=grads, final_val_loss=result.final_val_loss), Path(out) / "grads.pt")
    dist.barrier()  # as in train/__main__: all ranks done before any closes its connections
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def world1(corpus, tmp_path_factory):
    """World size 1 in this process: 4 micro-steps per step."""
    out = tmp_path_factory.mktemp("world1")
    single = DistEnv(0, 0, 1, torch.device("cpu"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the trainer does on CPU: small ops, shared cores
    try:
        grads = {bf16: one_step_gradients(single, corpus[0], bf16) for bf16 in (False, True)}
        result = train(fp32_tiny(corpus), None, None, env=single, save_model=out / "model.pt", console=False)
    finally:
        torch.set_num_threads(threads)
    return dict(grads=grads, final_val_loss=result.final_val_loss, params=torch.load(out / "model.pt"))


@pytest.fixture(scope="module")
def world4(corpus, tmp_path_factory):
    """World size 4 through torch.multiprocessing and gloo on 127.0.0.1: one micro-step per rank and step."""
    out = tmp_path_factory.mktemp("world4")
    try:
        mp.spawn(_world_worker, args=(4, free_port(), corpus, str(out)), nprocs=4, join=True)
    except mp.ProcessExitedException as exc:
        # A rank killed by a signal, not by a Python error: once in eleven CI runs (2026-12-02) one rank aborted in
        # gloo's C++ ("terminate called without an active exception", SIGABRT) on the loaded 2-core machine, the
        # test's own code raising nothing. Started once more on a fresh port; an error, or a second abort, fails.
        if exc.exit_code is not None and exc.exit_code >= 0:
            raise
        mp.spawn(_world_worker, args=(4, free_port(), corpus, str(out)), nprocs=4, join=True)
    return dict(**torch.load(out / "grads.pt"), params=torch.load(out / "model.pt"))


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30)).item()


@pytest.mark.slow
def test_gradients_at_world_4_equal_accumulation_at_world_1(world1, world4):
    assert sum(g.abs().sum() for g in world1["grads"][False].values()) > 0
    for name, ref in world1["grads"][False].items():
        assert rel(world4["grads"][False][name], ref) < 1e-5, name
    for name, ref in world1["grads"][True].items():
        if ref.abs().sum() > 0:
            assert rel(world4["grads"][True][name], ref) < 1e-2, name


def run_torchrun(nproc: int, corpus, tmp_path) -> tuple[dict, str]:
    """The real launcher and CLI: `torchrun --standalone --nproc_per_node=N -m train ...`."""
    train_glob, val_glob = corpus
    model_path, log_path = tmp_path / "model.pt", tmp_path / "log.txt"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           "-m", "train", "--preset", "tiny", "--steps", "3", "--set", "seed=0", "--set", "bf16=false",
           "--set", "warmup_steps=0", "--set", "val_every=0", "--train-files", train_glob, "--val-files", val_glob,
           "--log-file", str(log_path), "--save-model", str(model_path)]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return torch.load(model_path), log_path.read_text()


@pytest.mark.slow
def test_training_at_world_1_2_4_ends_with_the_same_parameters(corpus, world1, world4, tmp_path):
    params2, log2 = run_torchrun(2, corpus, tmp_path)
    runs = {2: (params2, float(log2.rsplit("val_loss:", 1)[1].split()[0])),
            4: (world4["params"], world4["final_val_loss"])}
    base = world1["params"]
    muon_names = {n for n in base if ".attn." in n or ".mlp." in n or "gate" in n}
    for world, (params, loss) in runs.items():
        assert abs(loss - world1["final_val_loss"]) < 2e-3, world
        for name, ref in base.items():
            bound = 1e-1 if name in muon_names else 2e-2
            assert rel(params[name], ref) < bound, (world, name, rel(params[name], ref))


# ---- an unseeded run: every rank starts from rank 0's weights -----------------------------------------------------

def _unseeded_worker(rank: int, world: int, port: int, corpus, out: str) -> None:
    """One rank of an unseeded 2-step tiny run (`train`, as `python -m train` calls it): the parameters the first
    forward pass sees are saved per rank; rank 0's metrics say the seed it drew."""
    from train.model import GPT

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    env = init_distributed()
    first: dict = {}

    def hook(module, args):
        if isinstance(module, GPT) and not first:
            first.update({k: v.detach().clone() for k, v in module.state_dict().items()})

    handle = torch.nn.modules.module.register_module_forward_pre_hook(hook)
    cfg = apply_overrides(fp32_tiny(corpus), ["seed=none"])
    train(cfg, None, Path(out) / "metrics.jsonl" if rank == 0 else None, env=env, console=False)
    handle.remove()
    torch.save(first, Path(out) / f"start-{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()


@pytest.mark.slow
def test_an_unseeded_run_starts_every_rank_from_rank_0s_weights(corpus, tmp_path):
    """Without a seed each process draws its own (train/loop.py set_up), so the ranks would start from different
    weights unless rank 0's are broadcast: two gloo ranks must meet the first forward pass with rank 0's, i.e.
    the weights of rank 0's logged seed."""
    import json

    mp.spawn(_unseeded_worker, args=(2, free_port(), corpus, str(tmp_path)), nprocs=2, join=True)
    starts = [torch.load(tmp_path / f"start-{rank}.pt") for rank in range(2)]
    config = next(json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()
                  if json.loads(line).get("event") == "config")
    assert config["config"]["seed"] is None and config["world_size"] == 2
    torch.manual_seed(config["init_seed"])
    rank0 = GPT(fp32_tiny(corpus), attention_backend="dense", fp8=False, world_size=2).state_dict()
    assert set(starts[0]) == set(starts[1]) == set(rank0)
    differ = [(rank, name) for name, value in rank0.items() for rank in range(2)
              if not torch.equal(starts[rank][name], value)]
    assert differ == [], "these ranks start these parameters from other weights than rank 0's seed gives"
