"""Whether the node's torch and cuBLAS do the FP8 matmul a record's program does, asked before the run.

    uses = fp8_uses(program)                    # ("train_gpt.py:78 torch._scaled_mm", ...), () when none
    check = check_fp8_matmul(python, program)   # a preflight Check: skip (no FP8, no GPU), pass, or fail with why
    copy = needs_aligned_scales(python, program)   # True: the node does it only with the scales copied aligned

2026-07-17_FP8DownProjection failed on an H200 under torch 2.11.0+cu130 at its first FP8 matmul, after the
build, the download and a 331 s compile: `CUBLAS_STATUS_NOT_SUPPORTED when calling cublasLtMatmul ... m 768
n 16384 k 3072`. The program's own torch (2.10.0+cu128) could not be installed there. That is known in
seconds: the same call (`torch._scaled_mm` of an e4m3 row-major A by an e4m3 column-major B, bf16 out, fp32
scales, fast accumulation) at the same m, n and k. On the H200 of 2026-12-02 it ran with 0-d scales and with
one-element scales at a 16-byte aligned address, and failed exactly so with a one-element slice 12 bytes into a
longer tensor (`scales[3:4]`, as the program's `scales[i:i+1]`; docs/device-runs/2026-12-02-h200-history-3/
fp8_scales.txt). So the probe asks each form the program may hand it, each on its own: 0-d, and where a
one-element scale may reach _scaled_mm (`one_element_scales`: of the whole history, only 2026-07-17) that slice,
and the same slice copied to its own tensor. A node that does only the copy runs the program when the run hands
its scales so (`aligned_scales`: a host run, pipeline/runs/fp8_scales.py); otherwise any failing form refuses the
run. It runs in the Python that trains, only when the program's syntax tree uses FP8 (`_scaled_mm`, or a
`float8_*` dtype).
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
    made = {"0-d": lambda: torch.ones((), device="cuda"),
            "slice": lambda: torch.ones(12, device="cuda")[3:4],  # 12 bytes in, as `scales[i:i+1]` hands it
            "slice copied": lambda: torch.ones(12, device="cuda")[3:4].clone()}
    out["device"] = torch.cuda.get_device_name(0)
    x = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    w = torch.randn(k, n, device="cuda").to(torch.float8_e4m3fn)
    out["forms"] = {}
    for form in json.loads(sys.argv[4]):
        try:
            one = made[form]()
            torch._scaled_mm(x, w.T.contiguous().T, out_dtype=torch.bfloat16, scale_a=one, scale_b=one,
                             use_fast_accum=True)
            torch.cuda.synchronize()
            out["forms"][form] = "ok"
        except Exception as exc:
            out["forms"][form] = ("%s: %s" % (type(exc).__name__, exc)).strip().splitlines()[0][:400]
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


def _verdict(data: dict, uses: tuple[str, ...], aligned_scales: bool = False) -> Check:
    torch, call = f"torch {data.get('torch')} (CUDA {data.get('cuda')})", \
        f"torch._scaled_mm e4m3 x e4m3 -> bf16, {ROWS}x{INNER} by {INNER}x{COLS}"
    if "skip" in data:
        return Check(NAME, "skip", f"the program does FP8 matmuls ({uses[0]}), but {data['skip']}: not asked",
                     "unknown")
    forms = data.get("forms", {})
    failed = {form: error for form, error in forms.items() if error != "ok"}
    if "0-d" in failed or ("slice" in failed and "slice copied" in failed):
        return Check(NAME, "fail", f"{torch} cannot do the program's FP8 matmul ({call}): "
                     f"{failed.get('0-d', failed.get('slice'))}",
                     f"the run would fail at its first FP8 matmul: use the record's own torch/CUDA build ({uses[0]} "
                     "needs it)")
    if _copy_only(forms) and not aligned_scales:
        return Check(NAME, "fail", f"{torch} does FP8 matmuls with 0-d and aligned one-element scales but not with a "
                     f"one-element slice 12 bytes into its tensor ({call}): {failed['slice']}; the program cuts a "
                     "scale to one element and hands it to _scaled_mm, as 2026-07-17_FP8DownProjection does (it "
                     "failed so at its first FP8 matmul)",
                     "the run would fail at its first FP8 matmul: run it on the host (--runtime host), which hands "
                     "such scales aligned, or in the record's own torch/CUDA build")
    if _copy_only(forms):
        return Check(NAME, "pass", f"{torch} on {data.get('device')} does the program's FP8 matmul with its "
                     "one-element scales copied to aligned tensors, as the run hands them (pipeline/runs/"
                     f"fp8_scales.py); at 12 bytes into their tensor it refuses them: {failed['slice']}", "none")
    asked = " and ".join({"0-d": "0-d", "slice": "one-element sliced"}.get(form, form) for form in forms)
    return Check(NAME, "pass", f"{torch} on {data.get('device')} does the program's FP8 matmul ({asked} scales)",
                 "none")


def _answer(python: str, program: bytes, timeout_s: float) -> tuple[dict | None, str | None]:
    forms = ["0-d", "slice", "slice copied"] if one_element_scales(program) else ["0-d"]
    answer, failure = _ask(python, json.dumps(forms), timeout_s)
    return (json.loads(answer), None) if answer is not None else (None, failure)


def check_fp8_matmul(python: str, program: bytes, timeout_s: float = 300, aligned_scales: bool = False) -> Check:
    """The probe, in the Python that trains; skipped without running anything when the program uses no FP8.
    `aligned_scales`: the run hands _scaled_mm its one-element scales aligned (pipeline/runs/fp8_scales.py)."""
    uses = fp8_uses(program)
    if not uses:
        return Check(NAME, "skip", "the program does no FP8 matmul", "none")
    data, failure = _answer(python, program, timeout_s)
    if data is None:
        return Check(NAME, "fail", failure, "unknown")
    return _verdict(data, uses, aligned_scales)


def needs_aligned_scales(python: str, program: bytes, timeout_s: float = 300) -> bool:
    """Whether the node does the program's FP8 matmul only with its one-element scales copied to aligned tensors
    (torch 2.11.0+cu130 on an H200): then a host run hands them so. Asked only of a program that cuts its scales
    to one element and hands them to _scaled_mm; the answer is cached with the preflight's."""
    if not fp8_uses(program) or not one_element_scales(program):
        return False
    data, _ = _answer(python, program, timeout_s)
    return _copy_only((data or {}).get("forms", {}))


def _copy_only(forms: dict) -> bool:
    """The probe's answer (form -> "ok" or the error) says: 0-d scales run, the program's one-element slice does
    not, the same slice copied to its own tensor does."""
    return forms.get("0-d") == "ok" and forms.get("slice", "ok") != "ok" and forms.get("slice copied") == "ok"


@functools.cache
def _ask(python: str, forms: str, timeout_s: float) -> tuple[str | None, str | None]:
    """(the probe's JSON answer, None) or (None, why it gave none): asked once per Python and scale forms in a
    process, since the answer is the node's, not the program's (`--plan --all` on a node plans dozens of them)."""
    argv = [python, "-c", SNIPPET, str(ROWS), str(INNER), str(COLS), forms]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{python} did not answer the FP8 probe: {exc}"
    line = next((x for x in done.stdout.splitlines() if x.startswith(MARKER)), None)
    if line is None:
        why = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1][:400]
        return None, f"{python} did not run the FP8 probe: {why}"
    return line[len(MARKER):], None
