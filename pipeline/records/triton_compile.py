"""Whether a Triton compiles a record's own Triton kernels: Triton's frontend (AST -> TTIR) for an sm_90 target,
which needs no GPU, run by the Python whose Triton is tested.

    version, results = compile_launches(python, program, kernel_launches(program))
    # "3.6.0", [{"kernel": ..., "float_type": "fp64", "ok": False, "error": "AssertionError('Loop-carried ...')"}]

Each launch (pipeline/records/triton_launches.py) is compiled with the types its program passes, its Python
floats typed each of FLOAT_TYPES: "fp32" as Triton's own launcher and torch <= 2.10's inductor type them, "fp64" as
torch >= 2.11's inductor does (docs/triton-kernels.md: the cause of the 2026-02-10 and 2026-04-08 smoke failures).
The program's files are written to a temporary folder and the file defining each kernel is imported. The main
program trains when imported, so of it only its definitions are (main_kernels): its imports and top-level
assignments, each one that fails left out, its @triton.jit functions and its other functions (an autotune's
configs), as train_gpt_kernels.py. Another file whose import fails on this CPU (2026-07-17 builds a CUDA kernel
with nvrtc at import) is imported the same way.
"""

from __future__ import annotations

import ast
import json
import subprocess
import tempfile
from pathlib import Path

from pipeline.errors import MissingDependency
from pipeline.records.program_files import MAIN, split_program
from pipeline.records.triton_launches import FLOAT, KernelLaunch

FLOAT_TYPES = ("fp32", "fp64")
TARGET = ("cuda", 90, 32)  # an H100/H200: the records' GPUs
MARKER = "REPRO-TRITON "
# Runs in the tested Python: argv[1] the folder of program files, stdin the launches as JSON.
SNIPPET = r"""
import importlib, inspect, json, sys, traceback
sys.path.insert(0, sys.argv[1])
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, make_backend
from triton._C.libtriton import ir
target = GPUTarget(*json.loads(sys.argv[2]))
backend = make_backend(target)
def frontend(fn, signature, constexprs):
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs)
    options = backend.parse_options({})
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    args = [options, backend.get_codegen_implementation(options), backend.get_module_map(), context]
    if "target" in inspect.signature(src.make_ir).parameters:
        args.insert(0, target)
    src.make_ir(*args)
out = []
for launch in json.load(sys.stdin):
    result = {k: launch[k] for k in ("kernel", "file", "line", "float_type")}
    try:
        try:
            module = importlib.import_module(launch["module"])
        except Exception:  # its top level needs a GPU (an nvrtc build): its definitions only
            module = importlib.import_module(launch["definitions"])
        fn = getattr(module, launch["kernel"])
        constexprs = launch["constexprs"]
        if hasattr(fn, "configs"):  # an Autotuner: its first config gives the constexprs the launch leaves out
            first = fn.configs[0].kwargs
            constexprs = {k: first[k] if v == "<first autotune config>" else v for k, v in constexprs.items()}
            fn = fn.fn
        frontend(fn, launch["signature"], constexprs)
        result["ok"] = True
    except BaseException as exc:
        text = str(exc).strip().splitlines()
        result["ok"], result["error"] = False, (text[-1] if text else type(exc).__name__)[:500]
    out.append(result)
print("REPRO-TRITON " + json.dumps({"triton": triton.__version__, "results": out}))
"""


MAIN_KERNELS = "train_gpt_kernels"
DEFINITIONS = "_definitions"  # beside each other file, its definitions only: imported when the file itself fails


def _literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node.args[0] if isinstance(node, ast.Call) and node.args else node)
        return not isinstance(node, ast.Call) or ast.unparse(node.func).endswith("constexpr")
    except ValueError:
        return False


def _guarded(source: str) -> str:
    return "try:\n" + "\n".join("    " + line for line in source.splitlines()) + "\nexcept Exception:\n    pass"


def main_kernels(text: bytes) -> str:
    """A program file's kernels as a module that runs nothing of its own: imports, top-level assignments (each
    guarded: a literal always binds, a training object fails and is left out), the @triton.jit functions and the
    other functions (guarded), in source order."""
    keep = []
    try:
        body = ast.parse(text).body
    except SyntaxError:  # not parsed by this Python: its launches are skipped (triton_launches.py), so no kernel
        return ""
    for node in body:
        source = ast.unparse(node)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            keep.append(_guarded(source))
        elif isinstance(node, ast.Assign):  # only a name bound to a literal is sure to bind
            plain = all(isinstance(t, ast.Name) for t in node.targets) and _literal(node.value)
            keep.append(source if plain else _guarded(source))
        elif isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
            keep.append(source)
        elif isinstance(node, ast.FunctionDef):  # a helper a decorator may call (autotune's configs)
            keep.append(_guarded(source))
    return "\n\n".join(keep) + "\n"


def _payload(launches: tuple[KernelLaunch, ...], float_types: tuple[str, ...]) -> list[dict]:
    return [{"kernel": launch.kernel, "file": launch.file, "line": launch.line, "constexprs": launch.constexprs,
             "module": MAIN_KERNELS if launch.file == MAIN else launch.file[:-3], "float_type": float_type,
             "definitions": MAIN_KERNELS if launch.file == MAIN else launch.file[:-3] + DEFINITIONS,
             "signature": {k: float_type if v == FLOAT else v for k, v in launch.signature.items()}}
            for launch in launches if launch.skipped is None for float_type in float_types]


def compile_launches(python: str, program: bytes, launches: tuple[KernelLaunch, ...],
                     float_types: tuple[str, ...] = FLOAT_TYPES, env: dict | None = None,
                     timeout_s: float = 900) -> tuple[str, list[dict]]:
    """(the Triton version, one result per compiled launch) from `python`'s Triton; `env` replaces the
    environment (PYTHONPATH to put another Triton first)."""
    with tempfile.TemporaryDirectory(prefix="repro-triton-") as folder:
        for file in split_program(program):
            if file.name == MAIN:
                (Path(folder) / f"{MAIN_KERNELS}.py").write_text(main_kernels(file.text))
            else:
                (Path(folder) / file.name).write_bytes(file.text)
                (Path(folder) / f"{file.name[:-3]}{DEFINITIONS}.py").write_text(main_kernels(file.text))
        argv = [python, "-c", SNIPPET, folder, json.dumps(TARGET)]
        try:
            done = subprocess.run(argv, input=json.dumps(_payload(launches, float_types)), capture_output=True,
                                  text=True, timeout=timeout_s, env=env, cwd=folder)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise MissingDependency(f"cannot run {python} to compile the program's Triton kernels: {exc}",
                                    "give a Python that imports triton and torch") from None
    line = next((x for x in done.stdout.splitlines() if x.startswith(MARKER)), None)
    if line is None:
        raise MissingDependency(f"{python} did not compile the program's Triton kernels: "
                                f"{done.stderr.strip()[-400:]}", "give a Python that imports triton and torch")
    data = json.loads(line[len(MARKER):])
    return str(data["triton"]), list(data["results"])
