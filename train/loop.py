"""The training run (trainer.md section 4): setup, untimed warm-up, timed loop with untimed validations.

    python -m train --preset tiny --train-files 'data/x/train_*.bin' --val-files 'data/x/val_*.bin' \
        --log-file runs/x/log.txt --metrics-file runs/x/metrics.jsonl          (see train/__main__.py)
    from train.loop import train; result = train(cfg, log_path, metrics_path)

Gradient convention: each micro-step's loss is summed over its tokens; after grad_accum micro-steps the
gradients are divided by grad_accum, and the optimizers average across ranks. So every world size that divides
batch_slots hands the optimizers the same gradient as the record's 8 ranks x 1 micro-step (no division there).
"""

import copy
import dataclasses
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from train.adam import DistAdam
from train.attention import select_backend
from train.config import TrainConfig
from train.data import DataError, TrainLoader, ValLoader, shards_total_tokens
from train.log import RunLog
from train.model import GPT
from train.muon import Muon
from train.profile import StepProfiler
from train.schedule import lr_multiplier, muon_momentum, validates, warmup_long_window, window_blocks

MiB = 1024 * 1024


@dataclass(frozen=True)
class DistEnv:
    rank: int
    local_rank: int
    world_size: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0


@dataclass(frozen=True, kw_only=True)
class RunResult:
    final_val_loss: float
    val_losses: tuple[tuple[int, float], ...]  # (step, loss)
    steps: int
    train_time_ms: float
    step_avg_ms: float
    warmup_s: float  # wall time of model build, compile and warm-up (untimed in the record)
    peak_allocated_mib: int
    peak_reserved_mib: int
    world_size: int
    grad_accum: int
    attention: str
    fp8: bool


def init_distributed() -> DistEnv:
    """torchrun's environment -> process group (nccl on CUDA, gloo on CPU); plain `python` -> world size 1."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
        if "OMP_NUM_THREADS" not in os.environ:
            # the CPU presets run many small ops: on a shared machine, threads waiting for each other cost far more
            # than they gain (measured 5x slower with 2 threads under load); OMP_NUM_THREADS overrides
            torch.set_num_threads(1)
    if "RANK" in os.environ and not dist.is_initialized():
        if device.type == "cuda":
            dist.init_process_group(backend="nccl", device_id=device)
        else:
            dist.init_process_group(backend="gloo")
    return DistEnv(rank, local_rank, world, device)


def fp8_enabled(cfg: TrainConfig, device: torch.device) -> bool:
    """FP8 head: config on, CUDA, and not switched off by DISABLE_FP8 (any value but "" or "0")."""
    return cfg.fp8 and device.type == "cuda" and os.environ.get("DISABLE_FP8", "0") in ("", "0")


def check_train_supply(cfg: TrainConfig) -> None:
    """Fail before compiling when the training files cannot possibly last the run."""
    have = shards_total_tokens(cfg.train_files, "train")
    need = cfg.total_steps * cfg.train_batch_tokens
    if not cfg.data_cycle and have < need:
        raise DataError(f"the training files ({cfg.train_files}) hold {have:,} tokens, fewer than the {need:,} "
                        f"that {cfg.total_steps} steps of {cfg.train_batch_tokens:,} tokens consume (BOS alignment "
                        "skips more): add shards, run fewer steps, or opt in to reuse with --set data_cycle=true")


class AttnArgs:
    """Window (tokens) and scale arguments of the forward pass: Python numbers for FA3, which compiles one graph
    per window like the record, else cached 0-dim tensors so one compiled graph serves every window."""

    def __init__(self, backend: str, block_size: int, device: torch.device):
        self.backend, self.block_size, self.device = backend, block_size, device
        self._cache: dict[tuple, tuple] = {}

    def __call__(self, ws_short: int, ws_long: int, scale: float) -> tuple:
        short, long = ws_short * self.block_size, ws_long * self.block_size
        if self.backend == "fa3":
            return short, long, scale
        key = (short, long, scale)
        if key not in self._cache:
            self._cache[key] = (torch.tensor(short, device=self.device), torch.tensor(long, device=self.device),
                                torch.tensor(scale, dtype=torch.float32, device=self.device))
        return self._cache[key]


def build_optimizers(model: GPT, cfg: TrainConfig) -> tuple[DistAdam, Muon]:
    adam = DistAdam(model.adam_groups(), lr=cfg.adam_lr, betas=(0.8, 0.95), eps=1e-8, compile=cfg.compile)
    params, kinds = model.muon_params()
    muon = Muon(params, kinds, lr=cfg.muon_lr, momentum=0.95)
    return adam, muon


def set_hyperparameters(adam: DistAdam, muon: Muon, cfg: TrainConfig, step: int) -> tuple[float, float]:
    lrm, momentum = lr_multiplier(step, cfg), muon_momentum(step, cfg)
    for group in adam.param_groups:
        group["lr"] = cfg.adam_lr * lrm  # DistAdam multiplies by the group's lr_mul, as the record does
    for group in muon.param_groups:
        group["lr"] = cfg.muon_lr * lrm
        group["momentum"] = momentum
    return lrm, momentum


def accumulate_gradients(forward, model: GPT, loader: TrainLoader, grad_accum: int, device: torch.device,
                         attn_args: tuple) -> None:
    """grad_accum forward/backward micro-steps (summed losses), then grads / grad_accum; see the module docstring."""
    model.refresh_step_weights()  # the weights the optimizers last wrote, cast to bf16 once for the micro-steps
    for _ in range(grad_accum):
        b = loader.next_batch().to(device)
        forward(b.inputs, b.targets, b.doc_bounds, *attn_args).backward()
    if grad_accum > 1:
        torch._foreach_div_([p.grad for p in model.parameters() if p.grad is not None], grad_accum)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def validate(forward, model: GPT, cfg: TrainConfig, env: DistEnv, micro_steps: int, attn_args: tuple) -> float:
    model.eval()
    loader = ValLoader(cfg.val_files, cfg.val_tokens_per_slot, env.world_size, env.rank, micro_steps)
    total = torch.zeros((), device=env.device)
    with torch.no_grad():
        for _ in range(micro_steps):
            b = loader.next_batch().to(env.device)
            total += forward(b.inputs, b.targets, b.doc_bounds, *attn_args)
    loss = total / micro_steps
    if env.world_size > 1:
        dist.all_reduce(loss, op=dist.ReduceOp.SUM)  # gloo has no AVG all-reduce
        loss /= env.world_size
    model.train()
    return loss.item()


@dataclass(kw_only=True)
class Run:
    """Everything one training run holds; the optimizers are rebuilt after the warm-up."""

    cfg: TrainConfig
    env: DistEnv
    model: GPT
    forward: object  # the compiled model, or the model itself
    adam: DistAdam
    muon: Muon
    attn_args: AttnArgs
    log: RunLog
    grad_accum: int

    def loader(self) -> TrainLoader:
        cfg, env = self.cfg, self.env
        return TrainLoader(cfg.train_files, cfg.train_tokens_per_slot, cfg.train_max_seq_len, cfg.batch_slots,
                           env.world_size, env.rank, cycle=cfg.data_cycle)


def set_up(cfg: TrainConfig, env: DistEnv, log: RunLog) -> Run:
    """Check the data (before anything is compiled), build the model on rank 0's init, optimizers, compile."""
    grad_accum = cfg.grad_accum(env.world_size)
    check_train_supply(cfg)
    ValLoader(cfg.val_files, cfg.val_tokens_per_slot, env.world_size, env.rank,
              grad_accum * cfg.val_tokens // cfg.val_batch_tokens)
    TrainLoader(cfg.train_files, cfg.train_tokens_per_slot, cfg.train_max_seq_len, cfg.batch_slots, env.world_size,
                env.rank)

    backend, fp8 = select_backend(cfg.attention, env.device), fp8_enabled(cfg, env.device)
    # The record seeds nothing and draws its weights on the CPU, whose default generator starts from a new seed
    # in every process (CUDA's from one fixed seed): each of its runs starts from other weights. Ours draw on the
    # device, so unseeded they would all start alike and a set of runs would sample only kernel nondeterminism.
    # So a run without a seed draws one, logged (rank 0's weights are broadcast: its seed is the run's).
    seed = cfg.seed if cfg.seed is not None else secrets.randbits(63)
    torch.manual_seed(seed)
    with torch.device(env.device):
        model = GPT(cfg, attention_backend=backend, fp8=fp8, world_size=env.world_size)
    if env.world_size > 1:
        for p in model.parameters():  # rank 0's initialisation everywhere
            dist.broadcast(p.detach(), 0)
    adam, muon = build_optimizers(model, cfg)
    forward = model
    if cfg.compile:
        dynamo = torch._dynamo.config
        setattr(dynamo, "recompile_limit" if hasattr(dynamo, "recompile_limit") else "cache_size_limit", 64)
        forward = torch.compile(model, dynamic=False, fullgraph=True)

    log.header()
    log.event("config", config=dataclasses.asdict(cfg), world_size=env.world_size, grad_accum=grad_accum,
              attention=backend, fp8=fp8, device=str(env.device), torch=torch.__version__, init_seed=seed,
              parameters=sum(p.numel() for p in model.parameters()))
    log.event("muon_plan", plan=muon.plan.to_dict() if hasattr(muon.plan, "to_dict") else str(muon.plan))
    log.note(str(muon.plan))
    log.note(f"init seed {seed}" + ("" if cfg.seed is not None else " (drawn; --set seed=N repeats it)"))
    return Run(cfg=cfg, env=env, model=model, forward=forward, adam=adam, muon=muon,
               attn_args=AttnArgs(backend, cfg.block_size, env.device), log=log, grad_accum=grad_accum)


def warm_up(run: Run) -> None:
    """Untimed: train warmup_steps single micro-steps on real batches, cycling the window sizes (with YaRN) so
    every graph compiles; then restore the initial model, fresh optimizers and YaRN (the data restarts too), and
    run one validation micro-step so that its graph compiles as well."""
    model, cfg = run.model, run.cfg
    initial_state = copy.deepcopy(model.state_dict())
    loader = run.loader()
    ws_long = cfg.ws_schedule[0]
    for i in range(cfg.warmup_steps):
        new_long = warmup_long_window(i, cfg)
        if new_long > ws_long:
            model.yarn.extend(ws_long, new_long)
        elif new_long < ws_long:
            model.yarn.reset()
        ws_long = new_long
        b = loader.next_batch().to(run.env.device)
        args = run.attn_args(ws_long // 2, ws_long, model.yarn.attn_scale)
        model.refresh_step_weights()
        run.forward(b.inputs, b.targets, b.doc_bounds, *args).backward()
        run.adam.step()
        run.muon.step()
        model.zero_grad(set_to_none=True)
        if i == 0:  # the first step holds tracing and compiling (or loading them from the caches)
            synchronize(run.env.device)
            run.log.event("warmup_first_step")
    model.yarn.reset()
    model.load_state_dict(initial_state)
    run.adam, run.muon = build_optimizers(model, cfg)
    # the validation graph (eval mode, no autograd) compiles here too: left to step 0's validation it followed a start
    # gate's opening (sidebyside --gate-native), 8.4 s of a gated pair's 18 s overhead on an H200 (2026-12-06)
    validate(run.forward, model, cfg, run.env, 1, run.attn_args(*window_blocks(0, cfg), model.yarn.attn_scale))


def timed_run(run: Run, profiler: StepProfiler | None = None) -> tuple[float, list[tuple[int, float]]]:
    """Steps 0..total: validation at step 0, every val_every and at the end with the clock stopped; otherwise
    grad_accum micro-steps, schedules, optimizer steps. Returns (training ms, [(step, val loss)])."""
    cfg, env, model, log = run.cfg, run.env, run.model, run.log
    profiler = profiler or StepProfiler(None, False)
    loader = run.loader()
    val_micro_steps = run.grad_accum * cfg.val_tokens // cfg.val_batch_tokens
    total_steps, training_ms, val_losses = cfg.total_steps, 0.0, []
    _, ws_long = window_blocks(0, cfg)
    synchronize(env.device)
    t0 = time.perf_counter()
    for step in range(total_steps + 1):
        last = step == total_steps
        ws_short, new_long = window_blocks(step, cfg)
        if new_long != ws_long:
            model.yarn.extend(ws_long, new_long)
            ws_long = new_long

        if validates(step, cfg):
            synchronize(env.device)
            training_ms += 1000 * (time.perf_counter() - t0)
            val_long = cfg.ws_final_long if last else ws_long  # the final validation widens the long window
            loss = validate(run.forward, model, cfg, env, val_micro_steps,
                            run.attn_args(ws_short, val_long, model.yarn.attn_scale))
            val_losses.append((step, loss))
            log.val(step, total_steps, loss, training_ms)
            log.event("val", step=step, val_loss=loss, train_time_ms=round(training_ms, 3),
                      step_avg_ms=training_ms / max(step, 1), ws_short=ws_short, ws_long=val_long,
                      attn_scale=model.yarn.attn_scale)
            synchronize(env.device)
            t0 = time.perf_counter()
        if last:
            break

        profiler.before_step(step)
        accumulate_gradients(run.forward, model, loader, run.grad_accum, env.device,
                             run.attn_args(ws_short, ws_long, model.yarn.attn_scale))
        lrm, momentum = set_hyperparameters(run.adam, run.muon, cfg, step)
        run.adam.step()
        run.muon.step()
        model.zero_grad(set_to_none=True)
        profiler.after_step(step)
        elapsed = training_ms + 1000 * (time.perf_counter() - t0)
        log.step(step + 1, total_steps, elapsed)
        log.event("step", step=step + 1, train_time_ms=round(elapsed, 3), step_avg_ms=elapsed / (step + 1),
                  lr_mult=lrm, muon_momentum=momentum, ws_short=ws_short, ws_long=ws_long)
    return training_ms, val_losses


START_GATE_ENV = "REPRO_START_GATE"


def wait_at_start_gate(env: DistEnv, log: RunLog) -> None:
    """REPRO_START_GATE=PATH (benchmarks/sidebyside.py --gate-native, where two programs take turns on one GPU):
    after the untimed warm-up, rank 0 writes PATH.ready and every rank waits until PATH exists, so that the timed
    steps begin only once the GPU is free. The wait is neither startup nor training time: it is logged apart."""
    gate = os.environ.get(START_GATE_ENV)
    if not gate:
        return
    synchronize(env.device)  # every rank's warm-up kernels are done before the controller is told so
    if dist.is_initialized():
        dist.barrier()
    if env.is_main:
        ready = Path(gate + ".ready")
        ready.write_text(f"{os.getpid()}\n")
    began = time.perf_counter()
    while not os.path.exists(gate):
        time.sleep(0.05)
    log.event("start_gate", waited_s=round(time.perf_counter() - began, 3))


def train(cfg: TrainConfig, log_path: Path | None, metrics_path: Path | None, env: DistEnv | None = None,
          save_model: Path | None = None, console: bool = True, profile_dir: Path | None = None) -> RunResult:
    started = time.perf_counter()
    env = env or init_distributed()
    cfg.validate()
    log = RunLog(log_path, metrics_path, enabled=env.is_main, console=console)
    try:
        run = set_up(cfg, env, log)
        warm_up(run)
        warmup_s = time.perf_counter() - started
        log.event("warmup", seconds=round(warmup_s, 2), steps=cfg.warmup_steps)
        wait_at_start_gate(env, log)
        training_ms, val_losses = timed_run(run, StepProfiler(profile_dir and Path(profile_dir), env.is_main))

        peak = (0, 0)  # no allocator statistics on CPU
        if env.device.type == "cuda":
            peak = (torch.cuda.max_memory_allocated() // MiB, torch.cuda.max_memory_reserved() // MiB)
        log.peak_memory(*peak)
        result = RunResult(final_val_loss=val_losses[-1][1], val_losses=tuple(val_losses), steps=cfg.total_steps,
                           train_time_ms=training_ms, step_avg_ms=training_ms / cfg.total_steps,
                           warmup_s=warmup_s, peak_allocated_mib=peak[0], peak_reserved_mib=peak[1],
                           world_size=env.world_size, grad_accum=run.grad_accum,
                           attention=run.attn_args.backend, fp8=run.model.head.fp8)
        log.event("end", **dataclasses.asdict(result))
    finally:
        log.close()
    if save_model is not None and env.is_main:
        Path(save_model).parent.mkdir(parents=True, exist_ok=True)
        torch.save({k: v.cpu() for k, v in run.model.state_dict().items()}, save_model)
    return result
