"""Both training loops run step by step with recording stand-ins, for tests/test_train_loop_vs_record.py.

    traces = record_loop(rec, program_text, files)     # the record's own loop statements, exec'd unchanged
    ours = native_loop(cfg)                             # train.loop.timed_run, the loop every native run uses
    assert first_differences(traces, ours) == []

What each loop applies is what this records, per step (a step = the optimizer steps completed before it):
every training forward's windows (short, long, in blocks), YaRN scale and micro-batch (token count and a checksum),
every validation forward's the same, each YaRN extension (old, new), and at the optimizer steps each parameter's
learning rate and Muon momentum. The model and the optimizers' update are stand-ins (no arithmetic: this is about
the schedule); the data loaders, the YaRN objects and the optimizers' parameter groups are the real ones.

On the record's side the statements come from its program text (optionally patched: smoke, side by side), picked
out by AST: grad_accum_steps, the optimizer setup, get_lr and get_ws, and the timed loop from its
`train_loader = distributed_data_generator(...)` on. They run in a copy of the record module's namespace where
`model` is the recording stand-in, `torch.cuda.synchronize` a no-op (CPU), `dist.all_reduce` a no-op (one rank) and
`print0` silent. Its data generator and Yarn are the program's own, reading `args` from the module.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import types
from dataclasses import dataclass, field

import torch

from benchmarks.record_program import _main_statements, name_map
from train.config import TrainConfig
from train.log import RunLog
from train.loop import AttnArgs, DistEnv, Run, build_optimizers, timed_run
from train.model import GPT, Yarn

CPU = torch.device("cpu")


@dataclass
class StepTrace:
    train: list = field(default_factory=list)  # per forward: (ws_short, ws_long, attn_scale, tokens, checksum)
    val: list = field(default_factory=list)  # the same for the validation's forwards
    yarn: list = field(default_factory=list)  # (old, new) window extensions
    hparams: dict = field(default_factory=dict)  # parameter name -> (lr, Muon momentum or None)


class Tracer:
    """Collects StepTraces; `window_unit`: tokens per window unit the loop passes (the record passes blocks)."""

    def __init__(self, window_unit: int):
        self.window_unit, self.done, self.steps = window_unit, 0, {}

    def now(self) -> StepTrace:
        return self.steps.setdefault(self.done, StepTrace())

    def forward(self, training: bool, ws_short, ws_long, scale, inputs: torch.Tensor) -> None:
        blocks = tuple(int(w) // self.window_unit for w in (ws_short, ws_long))
        # the scale as the attention kernels take it, in float32 (train/ passes a float32 tensor, the record a float)
        scale = torch.as_tensor(scale, dtype=torch.float32).item()
        row = (*blocks, scale, inputs.numel(), int(inputs.long().sum()))
        (self.now().train if training else self.now().val).append(row)

    def optimizer_step(self, rows: dict, ends_step: bool) -> None:
        self.now().hparams.update(rows)
        self.done += ends_step


class YarnSpy:
    """The loop's YaRN object, with its extensions recorded (the record calls apply, train/ extend)."""

    def __init__(self, yarn, tracer: Tracer):
        self._yarn, self._tracer = yarn, tracer
        self._method = "extend" if isinstance(yarn, Yarn) else "apply"  # train/'s Yarn, or the record's

    def _extend(self, old: int, new: int) -> None:
        self._tracer.now().yarn.append((old, new))
        getattr(self._yarn, self._method)(old, new)

    apply = extend = _extend

    def reset(self) -> None:
        self._yarn.reset()

    @property
    def attn_scale(self) -> float:
        return self._yarn.attn_scale


class _Loss:
    def backward(self) -> None:
        pass


class ModelSpy:
    """Stands in for the (compiled) model: records each call, computes nothing."""

    def __init__(self, yarn, tracer: Tracer):
        self.yarn, self._tracer, self.training = YarnSpy(yarn, tracer), tracer, True
        self._param = torch.zeros(1, requires_grad=True)  # train/ divides the accumulated grads
        self._param.grad = torch.zeros(1)

    def record_call(self, inputs, targets, bounds, ws_short, ws_long):  # the record's forward signature
        self._tracer.forward(self.training, ws_short, ws_long, self.yarn.attn_scale, inputs)
        return _Loss() if self.training else torch.zeros(())

    def native_call(self, inputs, targets, bounds, ws_short, ws_long, scale):  # train/'s
        self._tracer.forward(self.training, ws_short, ws_long, scale, inputs)
        return _Loss() if self.training else torch.zeros(())

    __call__ = record_call

    def eval(self):
        self.training = False
        return self

    def train(self, mode: bool = True):
        self.training = mode
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        pass

    def refresh_step_weights(self) -> None:  # GPT's bf16 casts, before each step's micro-steps: no weights here
        pass

    def parameters(self):
        return [self._param]


def spy_on_step(optimizer, names: dict[int, str], tracer: Tracer, ends_step: bool) -> None:
    """Replace optimizer.step (on the instance) by a recorder of each parameter's lr and momentum."""

    def step(closure=None):
        rows = {}
        for group in optimizer.param_groups:
            for p in group["params"]:
                lr = group["lr"] * getattr(p, "lr_mul", group.get("lr_mul", 1.0))
                rows[names[id(p)]] = (lr, group.get("momentum"))
        tracer.optimizer_step(rows, ends_step)

    optimizer.step = step


# ---- train/'s loop ------------------------------------------------------------------------------------------------

def native_loop(cfg: TrainConfig, grad_accum: int | None = None) -> dict[int, StepTrace]:
    """train.loop.timed_run over cfg's whole schedule at world size 1, with a real (unused) tiny model behind the
    optimizers so their parameter groups are the trainer's. grad_accum: what the Run is handed (default: cfg's)."""
    tracer = Tracer(cfg.block_size)
    torch.manual_seed(0)
    model = GPT(cfg, attention_backend="dense", fp8=False)
    adam, muon = build_optimizers(model, cfg)
    names = {id(p): n for n, p in model.named_parameters()}
    spy_on_step(adam, names, tracer, ends_step=False)
    spy_on_step(muon, names, tracer, ends_step=True)
    spy = ModelSpy(model.yarn, tracer)
    run = Run(cfg=cfg, env=DistEnv(0, 0, 1, CPU), model=spy, forward=spy.native_call, adam=adam, muon=muon,
              attn_args=AttnArgs("dense", cfg.block_size, CPU),
              log=RunLog(None, None, enabled=False), grad_accum=grad_accum or cfg.grad_accum(1))
    timed_run(run)
    return tracer.steps


# ---- the record's loop --------------------------------------------------------------------------------------------

def record_hyperparameters(text: str):
    """A Hyperparameters instance of the program `text` (its own class, patched or not)."""
    import uuid

    (cls,) = [s for s in ast.parse(text).body if isinstance(s, ast.ClassDef) and s.name == "Hyperparameters"]
    ns = {"dataclass": dataclasses.dataclass, "uuid": uuid}
    exec(compile(ast.Module(body=[cls], type_ignores=[]), "<record Hyperparameters>", "exec"), ns)
    return ns["Hyperparameters"]()


def _loop_statements(body: list[ast.stmt]) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """(setup, loop): grad_accum_steps, optimizers, get_lr/get_ws; the timed loop with what precedes it."""
    src = [ast.unparse(s) for s in body]
    setup_names = {"grad_accum_steps", "hidden_matrix_params", "embed_params", "scalar_params", "head_params",
                   "gate_params", "optimizer1", "optimizer2", "optimizers"}
    setup = [s for s, text in zip(body, src)
             if (isinstance(s, ast.Assign) and {getattr(t, "id", None) for t in s.targets} & setup_names)
             or (isinstance(s, ast.For) and "initial_lr" in text and "get_lr" not in text)
             or (isinstance(s, ast.FunctionDef) and s.name in ("get_lr", "get_ws"))]
    loop_at = next(i for i, s in enumerate(body) if isinstance(s, ast.For) and ast.unparse(s.target) == "step"
                   and "train_steps" in ast.unparse(s.iter))
    start = max(i for i in range(loop_at) if src[i].startswith("train_loader = distributed_data_generator"))
    return setup, body[start:loop_at + 1]


class _TorchOnCpu(types.ModuleType):
    """torch, with cuda.synchronize a no-op: the record's loop stops its clock with it."""

    cuda = types.SimpleNamespace(synchronize=lambda *a, **k: None)

    def __getattr__(self, name):
        return getattr(torch, name)


def record_loop(rec, text: str, args, model_dims: dict) -> dict[int, StepTrace]:
    """The record's timed loop from `text` (the program, patched or not) with `args` (its Hyperparameters)."""
    body = _main_statements(text)
    setup, loop = _loop_statements(body)
    rec.args, rec.device = args, CPU  # its Yarn and data generator read these module globals
    ns = dict(rec.__dict__, world_size=1, rank=0, master_process=True)
    exec(compile(ast.Module(body=[s for s in setup if "grad_accum_steps" in ast.unparse(s)][:1], type_ignores=[]),
                 "<record>", "exec"), ns)
    rec.grad_accum_steps = ns["grad_accum_steps"]
    model = rec.GPT(vocab_size=50257, num_layers=12, max_seq_len=max(args.train_batch_size, args.val_batch_size)
                    // ns["grad_accum_steps"], **model_dims)
    ns["model"] = model
    exec(compile(ast.Module(body=setup, type_ignores=[]), "<record>", "exec"), ns)

    tracer = Tracer(1)
    ours_by_record = {v: k for k, v in name_map(12).items()}
    names = {id(p): ours_by_record[n] for n, p in model.named_parameters()}
    spy_on_step(ns["optimizer1"], names, tracer, ends_step=False)
    spy_on_step(ns["optimizer2"], names, tracer, ends_step=True)
    ns.update(model=ModelSpy(model.yarn, tracer), torch=_TorchOnCpu("torch"), print0=lambda *a, **k: None,
              dist=types.SimpleNamespace(all_reduce=lambda *a, **k: None, ReduceOp=torch.distributed.ReduceOp))
    exec(compile(ast.Module(body=loop, type_ignores=[]), "<record loop>", "exec"), ns)
    return tracer.steps


# ---- comparison ---------------------------------------------------------------------------------------------------

def _rows_equal(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(
        math.isclose(x, y, rel_tol=1e-12) if isinstance(x, float) or isinstance(y, float) else x == y
        for x, y in zip(a, b))


def first_differences(want: dict[int, StepTrace], got: dict[int, StepTrace], limit: int = 5) -> list[str]:
    """Where `got` (train/'s loop) departs from `want` (the record's), step by step; [] when it never does."""
    out = []
    for step in sorted(set(want) | set(got)):
        w, g = want.get(step, StepTrace()), got.get(step, StepTrace())
        for what in ("train", "val", "yarn"):
            rows_w, rows_g = getattr(w, what), getattr(g, what)
            if len(rows_w) != len(rows_g) or not all(map(_rows_equal, rows_w, rows_g)):
                out.append(f"step {step} {what}: record {rows_w[:2]}{'...' if len(rows_w) > 2 else ''} "
                           f"({len(rows_w)}), train/ {rows_g[:2]}{'...' if len(rows_g) > 2 else ''} ({len(rows_g)})")
        if set(w.hparams) != set(g.hparams):
            out.append(f"step {step} hparams: parameters {sorted(set(w.hparams) ^ set(g.hparams))[:4]} on one side")
        else:
            bad = [n for n in sorted(w.hparams) if not _rows_equal(tuple(x or 0.0 for x in w.hparams[n]),
                                                                  tuple(x or 0.0 for x in g.hparams[n]))]
            if bad:
                out.append(f"step {step} hparams of {bad[:3]}: record {w.hparams[bad[0]]}, "
                           f"train/ {g.hparams[bad[0]]}")
        if len(out) >= limit:
            break
    return out
