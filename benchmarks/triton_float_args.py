"""On a GPU: the cause of the 2026-02-10/2026-04-08 smoke failures, failing and fixed, in well under 2 minutes.

    python benchmarks/triton_float_args.py [--kernels triton_kernels.py|LOG] [--out DIR]

The records' fused_softcapped_entropy_fwd_kernel takes the softcap constants A, B, C as Python floats
(23.0, 5.0, 7.5) and carries a running max, initialised fp32, through a loop that multiplies by A. Launched by
Triton (eager) or from torch.compile under torch <= 2.10, a Python float is an fp32 argument. torch 2.11's
inductor types it fp64 (torch/_inductor/codegen/triton_utils.py signature_of, under
config._use_fp64_for_unbacked_floats, default True), so the running max turns fp64 in the loop and Triton's
frontend refuses: "Loop-carried variable max_val has initial type fp32 but is re-assigned to fp64 in loop!".
Cases, each printed as PASS/FAIL with the error's last line:

  1 eager       a kernel of the same shape as the record's (written here), launched by Triton: passes everywhere
  2 compiled    the same launch inside torch.compile, inductor's defaults: FAILS on torch >= 2.11
  3 fixed       the same, with torch._inductor.config._use_fp64_for_unbacked_floats = False: passes
  4-6 record    with --kernels: the record's own fwd kernel, as the record launches it, in cases 1-3
  7 fp8         the FP8 matmul preflight (pipeline/preflight/fp8.py's call): 2026-07-17's first FP8 matmul

Writes DIR/triton_float_args.json (default: this folder's ../work/triton_float_args) and exits 0 when every
case behaved as the cause predicts (2 fails exactly when the flag exists and is on).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parent.parent


@triton.jit
def scaled_row_max(x_ptr, out_ptr, n_cols, scale, BLOCK: tl.constexpr):
    """Row max of x * scale, the running max carried fp32 through the loop as the record's kernel does."""
    row = tl.program_id(0).to(tl.int64)
    best = -float("inf")
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        best = tl.maximum(best, tl.max(v * scale, axis=0))
    tl.store(out_ptr + row, best)


def own_launch(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape[0], device=x.device, dtype=torch.float32)
    scaled_row_max[(x.shape[0],)](x, out, x.shape[1], 23.0, BLOCK=1024)
    return out


def record_launch(kernels):
    fwd = kernels.fused_softcapped_entropy_fwd_kernel

    def launch(logits: torch.Tensor, targets: torch.Tensor, mtp: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = logits.shape
        losses = torch.empty(n_rows, dtype=torch.float32, device=logits.device)
        lse = torch.empty(n_rows, dtype=torch.float32, device=logits.device)
        fwd[(n_rows,)](logits, losses, lse, targets, mtp, logits.stride(0), logits.stride(1), n_rows, n_cols,
                       mtp.shape[0], 23.0, 5.0, 7.5, BLOCK_SIZE=2048, num_warps=2)
        return losses
    return launch


def run_case(name: str, fn, args, compiled: bool, fp64_floats: bool | None) -> dict:
    import torch._inductor.config as inductor

    torch._dynamo.reset()
    started = time.monotonic()
    patch = {"force_disable_caches": True}  # each case compiles anew
    if fp64_floats is not None and hasattr(inductor, "_use_fp64_for_unbacked_floats"):
        patch["_use_fp64_for_unbacked_floats"] = fp64_floats
    try:
        with inductor.patch(patch):
            out = (torch.compile(fn) if compiled else fn)(*args)
            torch.cuda.synchronize()
        result = {"case": name, "ok": True, "finite": bool(torch.isfinite(out).all())}
    except Exception as exc:  # the compile error is the finding
        # the compile's own error line (dynamo appends a hint after it)
        lines = [line.strip() for line in str(exc).splitlines() if "Error" in line and "TORCHDYNAMO" not in line]
        result = {"case": name, "ok": False, "error": lines[-1][:400] if lines else f"{type(exc).__name__}: {exc}"}
    result["seconds"] = round(time.monotonic() - started, 1)
    print(f"{name:<22} {'PASS' if result['ok'] else 'FAIL'} {result['seconds']:>6} s  {result.get('error', '')}",
          flush=True)
    return result


def load_kernels(path: Path):
    """The record's triton_kernels.py: the file itself, or cut from a log (pipeline/records/program_files.py)."""
    text = path.read_bytes()
    if not path.name.endswith(".py"):
        sys.path.insert(0, str(ROOT))
        from pipeline.records.program import cut_program
        from pipeline.records.program_files import split_program

        text = next(f.text for f in split_program(cut_program(text)) if f.name == "triton_kernels.py")
    folder = Path(tempfile.mkdtemp(prefix="record-kernels-"))
    (folder / "record_triton_kernels.py").write_bytes(text)
    spec = importlib.util.spec_from_file_location("record_triton_kernels", folder / "record_triton_kernels.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fp8_case() -> dict:
    sys.path.insert(0, str(ROOT))
    from pipeline.preflight.fp8 import COLS, INNER, MARKER, ROWS, SNIPPET

    forms = json.dumps(["0-d", "slice", "slice copied"])  # each scale form the preflight asks of 2026-07-17
    done = subprocess.run([sys.executable, "-c", SNIPPET, str(ROWS), str(INNER), str(COLS), forms],
                          capture_output=True, text=True, timeout=300)
    line = next((x for x in done.stdout.splitlines() if x.startswith(MARKER)), "")
    data = json.loads(line[len(MARKER):]) if line else {"error": done.stderr.strip()[-400:]}
    answers = data.get("forms", {})
    ok = bool(answers) and all(answers.get(form) == "ok" for form in ("0-d", "slice copied"))
    said = ", ".join(f"{form}: {answer}" for form, answer in answers.items()) or data.get("error", data.get("skip"))
    print(f"{'7 fp8':<22} {'PASS' if ok else 'FAIL'}  {said}", flush=True)
    return {"case": "7 fp8", "ok": ok, **data}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kernels", type=Path, help="the record's triton_kernels.py, or a record log holding it")
    ap.add_argument("--out", type=Path, default=ROOT / "work" / "triton_float_args")
    args = ap.parse_args()
    import torch._inductor.config as inductor

    flag = getattr(inductor, "_use_fp64_for_unbacked_floats", None)
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), Triton {triton.__version__}, "
          f"inductor _use_fp64_for_unbacked_floats = {flag}", flush=True)
    x = torch.randn(64, 50304, device="cuda", dtype=torch.bfloat16)
    cases = [run_case("1 eager", own_launch, (x,), False, None),
             run_case("2 compiled", own_launch, (x,), True, None),
             run_case("3 fixed", own_launch, (x,), True, False)]
    if args.kernels:
        launch = record_launch(load_kernels(args.kernels))
        inputs = (x, torch.randint(0, 50304, (64,), device="cuda"), torch.ones(1, device="cuda"))
        cases += [run_case("4 record eager", launch, inputs, False, None),
                  run_case("5 record compiled", launch, inputs, True, None),
                  run_case("6 record fixed", launch, inputs, True, False)]
    cases.append(fp8_case())
    by = {c["case"]: c["ok"] for c in cases}
    expected = {name: not (flag and "compiled" in name) for name in by if name != "7 fp8"}
    as_predicted = all(by[name] == ok for name, ok in expected.items())
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "triton_float_args.json").write_text(json.dumps(
        {"torch": torch.__version__, "triton": triton.__version__, "flag": flag, "cases": cases,
         "as_predicted": as_predicted}, indent=2))
    print(f"as predicted by the cause: {as_predicted}; written {args.out / 'triton_float_args.json'}")
    return 0 if as_predicted else 1


if __name__ == "__main__":
    raise SystemExit(main())
