"""The record's own program (the test fixture) as a Python module (its text and the side-by-side patch of that text:
benchmarks/record_patch.py).

    from benchmarks.record_program import load_record, bind_globals, RecordSetup
    rec = load_record("cpu")                        # the program above `args = Hyperparameters()`, exec'd once
    bind_globals(rec, rec.Hyperparameters(block_size=8), torch.device("cpu"), grad_accum_steps=8)
    model = rec.GPT(vocab_size=50257, num_layers=12, num_heads=2, head_dim=32, model_dim=64, max_seq_len=256)
    setup = RecordSetup(rec, model)                 # the program's own optimizer setup, get_lr, get_ws, ...

Used by tests/test_train_vs_record.py (CPU) and benchmarks/device_diff.py (GPU).
The program is tests/fixtures/record-program/2025-09-23_MuonCustomSizing/train_gpt.py, byte for byte the program
of the record's log (README.md there). Everything done to it to run outside its own main section:

- Cut: the text from `args = Hyperparameters()` on (process group, logging, model build, warm-up, loop) is not
  run. The statements the tests need from it (optimizer setup, get_lr, get_ws, warmup_steps, the per-step lr and
  Muon momentum assignments) are picked out of that text by AST and exec'd on request (RecordSetup), unchanged.
- Globals the top reads at call time, set by bind_globals: `args` (a Hyperparameters), `device`,
  `grad_accum_steps`, and `rank`, `world_size` from the process group (which the caller starts).
- `flash_attn_interface`: FA3 when it imports, else pipeline/runs/fa3_standin (dense float32 on CPU, the trainer's
  FlexAttention on CUDA). Installed in sys.modules only while the program text executes.
- CPU only:
  * `import triton` / `import triton.language as tl` become names bound to a stub (never put in sys.modules,
    where torch's own probe for Triton would find it) whose jit/autotune decorators return the function, so the
    Triton kernels' definitions execute; `ns_line_1`, `ns_line_2` (the launchers of the two symmetric-matmul kernels)
    are replaced by torch code with the kernels' arithmetic: float32 accumulation, one rounding to bf16 at the
    store (C = A·Aᵀ and C = alpha·A·Aᵀ + beta·A).
  * the program's `torch.compile` wrappers on `newton_schulz_triton` and `DistAdam.step` are removed (eager): the
    CPU test has neither the time nor the need to compile.
  * text substitutions: `torch.empty(1, device="cuda", ...).backward()` (a CUDA start-up workaround) and the
    data generator's three `.to(device="cuda", ...)` run on "cpu"; the shard reader's pin_memory=True is False.
- Everywhere: text substitution `open(sys.argv[0])` -> `open(__file__)` (the program logs its own source).
- gloo: reduce-scatter Work has no `get_future()` ("Work::getFuture not implemented"), which the record's
  optimizers call. `dist` in the module becomes a proxy whose reduce_scatter_tensor/all_gather_into_tensor run
  the same collective synchronously and return an already completed future: same arithmetic, no overlap.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib.util
import os
import sys
import types
from pathlib import Path

import torch
import torch.distributed as dist

from benchmarks.record_patch import (
    FIXTURE,
    MUON_SPLIT,
    STANDIN_DIR,
    PatchError,
    program_text,
    split_program,
    substitute,
)
from train.model import layer_plan

# ---- stand-ins -------------------------------------------------------------------------------------------------

def _triton_stub() -> types.ModuleType:
    """Just enough of triton for the kernel definitions to execute: they are never launched on CPU."""
    triton = types.ModuleType("triton")
    language = types.ModuleType("triton.language")
    language.constexpr = int  # only read in the kernels' annotations
    triton.language = language
    triton.jit = lambda fn=None, **_: fn if fn is not None else (lambda f: f)
    triton.autotune = lambda *_, **__: (lambda fn: fn)
    triton.Config = lambda *a, **k: (a, k)
    triton.cdiv = lambda a, b: -(-a // b)
    triton.__version__ = "stub"
    return triton


def ns_line_1_torch(A: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """out = A @ A.mT with float32 accumulation and one rounding, as the record's ns_line_1 kernel."""
    Af = A.float()
    out.copy_(Af @ Af.mT)
    return out


def ns_line_2_torch(A: torch.Tensor, alpha: float, beta: float, out: torch.Tensor) -> torch.Tensor:
    """out = alpha * A @ A.mT + beta * A in float32, rounded once, as the record's ns_line_2 kernel."""
    Af = A.float()
    out.copy_(alpha * (Af @ Af.mT) + beta * Af)
    return out


class _Done:
    """A finished collective: what the record's code expects of a Work (wait, get_future)."""

    def wait(self):
        return True

    def get_future(self):
        fut = torch.futures.Future()
        fut.set_result(None)
        return fut


class _SyncDist(types.ModuleType):
    """torch.distributed, but the two tensor collectives the record calls with `.get_future()` run synchronously
    (gloo's reduce-scatter Work cannot make a future)."""

    def __init__(self):
        super().__init__("record_dist_proxy")

    def __getattr__(self, name):
        return getattr(dist, name)

    def reduce_scatter_tensor(self, output, input, op=dist.ReduceOp.SUM, group=None, async_op=False):
        dist.reduce_scatter_tensor(output, input, op=op, group=group)
        return _Done() if async_op else None

    def all_gather_into_tensor(self, output_tensor, input_tensor, group=None, async_op=False):
        dist.all_gather_into_tensor(output_tensor, input_tensor, group=group)
        return _Done() if async_op else None


def _load_standin() -> types.ModuleType:
    import train.attention  # noqa: F401  # bind train/'s own FA3 probe before the stand-in is visible

    spec = importlib.util.spec_from_file_location("flash_attn_interface", STANDIN_DIR / "flash_attn_interface.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fa3_module() -> tuple[types.ModuleType, bool]:
    """(flash_attn_interface, is_real_fa3): FA3's module when it imports and is not a stand-in, else ours."""
    try:
        import flash_attn_interface as fa3

        if not getattr(fa3, "REPRO_STANDIN", None):
            return fa3, True
    except ImportError:
        pass
    return _load_standin(), False


@contextlib.contextmanager
def _modules(extra: dict[str, types.ModuleType]):
    """Make `extra` importable while the program text runs; restore sys.modules and the environment after."""
    saved = {name: sys.modules.get(name) for name in extra}
    env = os.environ.get("PYTORCH_CUDA_ALLOC_CONF")
    sys.modules.update(extra)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        if env is None:
            os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        else:
            os.environ["PYTORCH_CUDA_ALLOC_CONF"] = env


@functools.cache
def load_record(device_type: str = "cpu", path: Path = FIXTURE) -> types.ModuleType:
    """The program's top, exec'd as module `record_train_gpt` (once per process: it registers custom ops)."""
    text = program_text(path)
    top, _ = split_program(text)
    cpu = device_type == "cpu"
    changes = [("with open(sys.argv[0]) as f:", "with open(__file__) as f:",
                "the program logs its own text; here it is a module, not sys.argv[0]")]
    if cpu:
        changes.append(('1, device="cuda", requires_grad=True', '1, device="cpu", requires_grad=True',
                        "a CUDA start-up workaround; no CUDA here"))
        changes.append(("import triton\nimport triton.language as tl\n",
                        "triton = _TRITON_STUB\ntl = triton.language\n",
                        "no Triton on CPU: a stub lets the kernel definitions execute (never launched)"))
        changes.append(("dtype=torch.uint16, pin_memory=True)", "dtype=torch.uint16, pin_memory=False)",
                        "pinned memory needs CUDA"))
        changes += [(f'{name}.to(device="cuda"', f'{name}.to(device="cpu"', "the data loader's batches stay on CPU")
                    for name in ("_inputs", "_targets", "_cum_lengths")]
    top = substitute(top, changes)

    fa3, real_fa3 = fa3_module()
    mod = types.ModuleType("record_train_gpt")
    mod.__file__ = str(path)
    if cpu:  # bound by name, never put in sys.modules: torch probes `import triton` and would find the stub
        mod._TRITON_STUB = _triton_stub()
    sys.modules[mod.__name__] = mod  # dataclasses and torch.compile look the module up by name
    with _modules({"flash_attn_interface": fa3}):
        exec(compile(top, str(path), "exec"), mod.__dict__)

    if cpu:
        mod.ns_line_1, mod.ns_line_2 = ns_line_1_torch, ns_line_2_torch
        mod.newton_schulz_triton = mod.newton_schulz_triton._torchdynamo_orig_callable
        mod.DistAdam.step = mod.DistAdam.step._torchdynamo_orig_callable
    mod.REAL_FA3 = real_fa3
    mod.CHANGES = changes
    return mod


def bind_globals(mod: types.ModuleType, args, device: torch.device, grad_accum_steps: int) -> None:
    """The main section's globals that the top's functions read: args, device, rank, world_size, grad_accum_steps."""
    mod.args, mod.device, mod.grad_accum_steps = args, device, grad_accum_steps
    mod.rank, mod.world_size = dist.get_rank(), dist.get_world_size()
    mod.dist = _SyncDist() if dist.get_backend() == "gloo" else dist


# ---- statements of the main section, exec'd unchanged --------------------------------------------------------

def _main_statements(text: str) -> list[ast.stmt]:
    """The main section's top-level statements (parsed from the whole text so line numbers stay true)."""
    tree = ast.parse(text)
    start = next(i for i, s in enumerate(tree.body)
                 if isinstance(s, ast.Assign) and ast.unparse(s) == "args = Hyperparameters()")
    return tree.body[start:]


def _assigned_names(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, ast.Assign | ast.AnnAssign):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return {t.id for t in targets if isinstance(t, ast.Name)}
    return set()


def run_main_statement(rec: types.ModuleType, contains: str, path: Path = FIXTURE, **bindings) -> None:
    """Exec the one top-level statement of the main section whose text contains `contains`, unchanged, in the
    record module with `bindings` as globals (e.g. the bf16 cast loop: contains="m.bfloat16()", model=...)."""
    body = _main_statements(program_text(path))
    hits = [s for s in body if contains in ast.unparse(s)]
    if len(hits) != 1:
        raise PatchError(f"expected one statement containing {contains!r} in the main section, found {len(hits)}")
    rec.__dict__.update(bindings)
    exec(compile(ast.Module(body=hits, type_ignores=[]), str(path), "exec"), rec.__dict__)


class RecordSetup:
    """The record's optimizer setup, schedules and per-step hyperparameter assignments, run on `model`.

    optimizer1 (DistAdam) / optimizer2 (Muon): built by the program's own statements from `model`.
    get_lr(step), get_ws(step): the program's functions (reading rec.args).
    apply_step_hyperparameters(step): the program's loop statements that set each group's lr and Muon momentum.
    warmup_steps: the program's constant.
    """

    SETUP_NAMES = {"hidden_matrix_params", "embed_params", "scalar_params", "head_params", "gate_params",
                   "optimizer1", "optimizer2", "optimizers"}

    def __init__(self, rec: types.ModuleType, model, path: Path = FIXTURE):
        self.rec = rec
        body = _main_statements(program_text(path))
        setup = [s for s in body if _assigned_names(s) & self.SETUP_NAMES]
        setup += [s for s in body if isinstance(s, ast.For) and "initial_lr" in ast.unparse(s)
                  and "get_lr" not in ast.unparse(s)]
        functions = [s for s in body if isinstance(s, ast.FunctionDef) and s.name in ("get_lr", "get_ws")]
        warmup = [s for s in body if _assigned_names(s) == {"warmup_steps"}]
        step_loop = next(s for s in body if isinstance(s, ast.For) and ast.unparse(s.target) == "step"
                         and "train_steps" in ast.unparse(s.iter))
        self._per_step = [s for s in step_loop.body if isinstance(s, ast.For)
                          and any(f"group['{k}'] =" in ast.unparse(s) for k in ("lr", "momentum"))]
        if len(setup) != 9 or len(functions) != 2 or len(warmup) != 1 or len(self._per_step) != 2:
            raise PatchError("the record's main section does not have the expected optimizer setup, schedule "
                             f"functions and per-step assignments ({len(setup)}, {len(functions)}, {len(warmup)}, "
                             f"{len(self._per_step)})")
        self.ns = rec.__dict__
        self.ns["model"] = model
        self._run(setup + functions + warmup, path)
        self.optimizer1, self.optimizer2 = self.ns["optimizer1"], self.ns["optimizer2"]
        self.get_lr, self.get_ws, self.warmup_steps = self.ns["get_lr"], self.ns["get_ws"], self.ns["warmup_steps"]
        self.sources = [ast.unparse(s) for s in setup + functions + warmup + self._per_step]

    def _run(self, statements: list[ast.stmt], path: Path) -> None:
        code = compile(ast.Module(body=statements, type_ignores=[]), str(path), "exec")
        exec(code, self.ns)

    def apply_step_hyperparameters(self, step: int, path: Path = FIXTURE) -> None:
        self.ns["step"] = step
        self._run(self._per_step, path)


# ---- the world-size-8 Muon patch (record_patch.MUON_SPLIT) on a built Muon ------------------------------------------

def split_mixed_muon_groups(muon) -> list[int]:
    """The world-size-8 Muon patch (MUON_SPLIT, above) executed on the record's built Muon; the new group sizes."""
    exec(MUON_SPLIT, {"optimizer2": muon})
    return [len(g["params"]) for g in muon.param_groups]


def random_weights(ours, seed: int = 0) -> dict[str, torch.Tensor]:
    """train/'s parameter name -> non-zero random values for every parameter (zero-initialised ones too, so every
    gradient flows), made on CPU from one seed so every rank and both models get the same."""
    gen = torch.Generator().manual_seed(seed)
    D = ours.cfg.model_dim
    out = {}
    for name, p in ours.named_parameters():
        noise = torch.randn(p.shape, generator=gen)
        if name == "scalars":  # around the init values: skip logits -1.5, lambdas (1, 0), SA (0.5, 0.5), smear 0
            out[name] = p.detach().float().cpu() + 0.3 * noise
        elif "embed" in name:
            out[name] = noise
        elif name == "head.weight":
            out[name] = 0.1 * noise
        elif "gate" in name:
            out[name] = 0.5 * noise
        else:  # qkvo, fc, proj: the record's init scale
            out[name] = 0.5 * D ** -0.5 * noise
    return out


def name_map(num_layers: int) -> dict[str, str]:
    """train/'s parameter name -> the record's, family by family (the differential test and benchmark)."""
    names = {"embed.weight": "embed.weight", "smear_gate.weight": "smear_gate.weight",
             "head.weight": "lm_head.weight", "scalars": "scalars"}
    names |= {f"value_embeds.{i}.weight": f"value_embeds.{i}.weight" for i in range(3)}
    for i, spec in enumerate(layer_plan(num_layers)):
        if spec.has_attn:
            names[f"blocks.{i}.attn.qkvo"] = f"blocks.{i}.attn.qkvo_w"
            names[f"blocks.{i}.attn.gate.weight"] = f"blocks.{i}.attn.attn_gate.weight"
        if spec.has_mlp:
            names[f"blocks.{i}.mlp.fc"] = f"blocks.{i}.mlp.c_fc"
            names[f"blocks.{i}.mlp.proj"] = f"blocks.{i}.mlp.c_proj"
    return names
