"""Whether the node's torch and cuBLAS do the FP8 matmul a record's program does, asked before the run.

    uses = fp8_uses(program)                    # ("train_gpt.py:78 torch._scaled_mm", ...), () when none
    check = check_fp8_matmul(python, program)   # a preflight Check: skip (no FP8, no GPU), pass, or fail with why

2026-07-17_FP8DownProjection failed on an H200 under torch 2.11.0+cu130 at its first FP8 matmul, after the
build, the download and a 331 s compile: `CUBLAS_STATUS_NOT_SUPPORTED when calling cublasLtMatmul ... m 768
n 16384 k 3072`. The program's own torch (2.10.0+cu128) could not be installed there. That is known in
seconds: the same call (`torch._scaled_mm` of an e4m3 row-major A by an e4m3 column-major B, bf16 out, fp32
scales of one element, fast accumulation) at the same m, n and k. On the H200 of 2026-12-02 the same call with
0-d scales ran and with one-element scales (`scales[i:i+1]`, as that program passes them) failed exactly so
(docs/device-runs/2026-12-02-h200-history-2/fp8_variants.txt), while a fresh one-element tensor ran (the third
lease: the probe passed, the run failed). So the probe asks with 0-d scales, and also with one-element slices at
an offset into a longer tensor, as the program's are, when a one-element scale may reach _scaled_mm
(`one_element_scales`: of the whole history, only 2026-07-17). Either failing refuses the run. It runs in the
Python that trains, only when the program's syntax tree uses FP8 (`_scaled_mm`, or a `float8_*` dtype).
"""

from __future__ import annotations

import ast
import functools
import json
import subprocess

from pipeline.preflight.facts import Check
from pipeline.records.identity import parse_program
from pipeline.records.program_files import split_program

NAME = "fp8_matmul"
ROWS, INNER, COLS = 16384, 3072, 768  # m k n: the failing call's (48 MiB of FP8 operands, milliseconds)
MARKER = "REPRO-FP8 "
SNIPPET = r"""
import json, sys
import torch
out = {"torch": torch.__version__, "cuda": torch.version.cuda}
if not torch.cuda.is_available():
    out["skip"] = "torch %s sees no CUDA GPU" % torch.__version__
else:
    m, k, n = (int(v) for v in sys.argv[1:4])
    try:
        x = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        w = torch.randn(k, n, device="cuda").to(torch.float8_e4m3fn)
        for shape in json.loads(sys.argv[4]):  # the scales' shapes the program passes: [] (0-d), [1]
            # [1]: a one-element view at an offset into a longer tensor, as `scales[i:i+1]` hands it (a fresh
            # one-element tensor ran where the program's slice failed, H200 2026-12-02)
            one = torch.ones(shape, device="cuda") if shape == [] else torch.ones(12, device="cuda")[3:4]
            out["scales"] = shape
            out.setdefault("asked", []).append(shape)
            y = torch._scaled_mm(x, w.T.contiguous().T, out_dtype=torch.bfloat16, scale_a=one, scale_b=one,
                                 use_fast_accum=True)
        torch.cuda.synchronize()
        out["ok"] = list(y.shape)
        out["device"] = torch.cuda.get_device_name(0)
    except Exception as exc:
        out["error"] = ("%s: %s" % (type(exc).__name__, exc)).strip().splitlines()[0][:400]
print("REPRO-FP8 " + json.dumps(out))
"""


def fp8_uses(program: bytes) -> tuple[str, ...]:
    """Where the program's files use FP8, from their syntax trees: `file:line what`, the matmuls first."""
    found = []
    for file in split_program(program):
        try:
            tree = parse_program(file.text)
        except SyntaxError:  # a 3.12-only file under this 3.11: its lines that name FP8, read as text
            found += [(file.name, n, "torch._scaled_mm" if b"_scaled_mm" in line else "float8 (text)")
                      for n, line in enumerate(file.text.splitlines(), 1) if b"_scaled_mm" in line
                      or b"float8_" in line]
            continue
        for node in ast.walk(tree):
            name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
            if name == "_scaled_mm" or name.startswith("float8_"):
                found.append((file.name, node.lineno, f"torch.{name}"))
    ordered = sorted(set(found), key=lambda use: (use[2] != "torch._scaled_mm", use))
    return tuple(f"{file}:{line} {what}" for file, line, what in ordered)


def _one_element_slice(node: ast.AST) -> bool:
    """`<...scale...>[e:e+1]`: a scale tensor cut to one element."""
    if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice)):
        return False
    lower, upper, name = node.slice.lower, node.slice.upper, node.value
    label = name.attr if isinstance(name, ast.Attribute) else name.id if isinstance(name, ast.Name) else ""
    return "scale" in label.lower() and lower is not None and isinstance(upper, ast.BinOp) \
        and isinstance(upper.op, ast.Add) and ast.dump(upper.left) == ast.dump(lower) \
        and isinstance(upper.right, ast.Constant) and upper.right.value == 1


def _scalar(value: ast.expr, made: set[str]) -> bool:
    """A scale the tree shows 0-d: `x.new_tensor(s)` / `torch.tensor(s)`, or a name bound to one."""
    if isinstance(value, ast.Call) and getattr(value.func, "attr", getattr(value.func, "id", "")) in (
            "new_tensor", "tensor"):
        return True
    return isinstance(value, ast.Name) and value.id in made


def _unshown_scales(tree: ast.Module) -> bool:
    """Whether some _scaled_mm call takes a scale whose shape the tree does not show (a parameter, a buffer)."""
    made = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and _scalar(node.value, set())
            for t in node.targets if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        name = getattr(node.func, "attr", getattr(node.func, "id", "")) if isinstance(node, ast.Call) else ""
        if name == "_scaled_mm" and any(k.arg in ("scale_a", "scale_b") and not _scalar(k.value, made)
                                        for k in node.keywords):
            return True
    return False


def one_element_scales(program: bytes) -> bool:
    """Whether a one-element scale may reach _scaled_mm: the program cuts a scale tensor to one element
    (`self._mlp_down_proj_scales[i:i+1]`) and some _scaled_mm call takes a scale whose shape its tree does not
    show (2026-07-17's `scale_b=W2_scale`, a parameter). A program whose every _scaled_mm scale is made 0-d where it
    is used (`grad.new_tensor(grad_s)`, 2026-05-19, whose one-element scales go to a Triton kernel) is not asked."""
    sliced = unshown = False
    for file in split_program(program):
        try:
            tree = parse_program(file.text)
        except SyntaxError:
            continue
        sliced = sliced or any(_one_element_slice(node) for node in ast.walk(tree))
        unshown = unshown or _unshown_scales(tree)
    return sliced and unshown


def _verdict(data: dict, uses: tuple[str, ...]) -> Check:
    torch = f"torch {data.get('torch')} (CUDA {data.get('cuda')})"
    if "skip" in data:
        return Check(NAME, "skip", f"the program does FP8 matmuls ({uses[0]}), but {data['skip']}: not asked",
                     "unknown")
    if "error" in data and data.get("scales") == [1]:  # the 0-d form ran
        return Check(NAME, "fail", f"{torch} does FP8 matmuls with 0-d scales but not with one-element scales "
                     f"(torch._scaled_mm e4m3 x e4m3 -> bf16, {ROWS}x{INNER} by {INNER}x{COLS}): {data['error']}; "
                     "the program cuts a scale to one element and hands _scaled_mm a scale of a shape its code "
                     "does not fix there, as 2026-07-17_FP8DownProjection does (it failed so at its first FP8 matmul)",
                     "the run would fail at its first FP8 matmul: use the record's own torch/CUDA build")
    if "error" in data:
        return Check(NAME, "fail", f"{torch} cannot do the program's FP8 matmul (torch._scaled_mm e4m3 x e4m3 "
                     f"-> bf16, {ROWS}x{INNER} by {INNER}x{COLS}): {data['error']}",
                     "the run would fail at its first FP8 matmul: use the record's own torch/CUDA build "
                     f"({uses[0]} needs it)")
    forms = " and ".join("0-d" if shape == [] else "one-element sliced" for shape in data.get("asked", [[]]))
    return Check(NAME, "pass", f"{torch} on {data.get('device')} does the program's FP8 matmul ({forms} scales)",
                 "none")


def check_fp8_matmul(python: str, program: bytes, timeout_s: float = 300) -> Check:
    """The probe, in the Python that trains; skipped without running anything when the program uses no FP8."""
    uses = fp8_uses(program)
    if not uses:
        return Check(NAME, "skip", "the program does no FP8 matmul", "none")
    shapes = [[], [1]] if one_element_scales(program) else [[]]
    answer, failure = _ask(python, json.dumps(shapes), timeout_s)
    if failure is not None:
        return Check(NAME, "fail", failure, "unknown")
    return _verdict(json.loads(answer), uses)


@functools.cache
def _ask(python: str, shapes: str, timeout_s: float) -> tuple[str | None, str | None]:
    """(the probe's JSON answer, None) or (None, why it gave none): asked once per Python and scale forms in a
    process, since the answer is the node's, not the program's (`--plan --all` on a node plans dozens of them)."""
    argv = [python, "-c", SNIPPET, str(ROWS), str(INNER), str(COLS), shapes]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{python} did not answer the FP8 probe: {exc}"
    line = next((x for x in done.stdout.splitlines() if x.startswith(MARKER)), None)
    if line is None:
        why = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1][:400]
        return None, f"{python} did not run the FP8 probe: {why}"
    return line[len(MARKER):], None
