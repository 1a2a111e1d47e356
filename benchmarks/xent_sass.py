"""What train/xent_kernels.py's kernels compile to for an H100/H200 (sm_90a), counted on any machine, GPU or not.

    python benchmarks/xent_sass.py       # per element: instructions issued, special-function ops, per pass

Both passes are bound by instruction issue and the special-function unit (SFU), not by memory: an SM issues
128 thread-instructions per clock but only 16 SFU ops (ex2, rcp), so 3 SFU ops per element cost as much as
24 instructions. These counts are how the kernels are kept near that bound without a GPU: Triton compiles to
PTX and its bundled ptxas and cuobjdump turn that into the machine code counted here (no GPU needed).
tests/test_xent_triton.py holds the counts to their budgets.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a file: the repo root for train/

# the record's shape; the counts do not depend on T (pass 1 is per row, pass 2 per tile)
V = 50304
# one line of cuobjdump's listing: /*address*/ [predicate] OPCODE[.modifiers] operands
INSTRUCTION = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[0-9T] )?([A-Z0-9]+)(\.[A-Z0-9_.]+)?([^;]*);", re.M)


def _compile(fn, signature: dict, constants: dict, aligned: list[str], num_warps: int, num_stages: int = 3):
    """Compile as Triton's launcher would for 16-byte-aligned pointers and sizes divisible by 16 (the record's)."""
    import triton
    from triton.backends.compiler import GPUTarget

    attrs = {(fn.arg_names.index(a),): [["tt.divisibility", 16]] for a in aligned}
    src = triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=constants, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options=dict(num_warps=num_warps, num_stages=num_stages))


def _opcodes(cubin: bytes, loop_only: bool = False) -> Counter:
    """Opcodes (loads, stores and SFU ops with their width or function); loop_only: those of the first loop's body,
    from its backward branch's target to the branch."""
    import triton

    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        sass = subprocess.run([cuobjdump, "-sass", f.name], capture_output=True, text=True, check=True).stdout
    lines = [(int(addr, 16), op + (suffix if op in ("MUFU", "LDG", "STG") else ""), operands)
             for addr, op, suffix, operands in INSTRUCTION.findall(sass)]
    if loop_only:
        end, start = next((addr, int(m.group(1), 16)) for addr, op, operands in lines if op == "BRA"
                          and (m := re.search(r"0x([0-9a-f]+)", operands)) and int(m.group(1), 16) < addr)
        lines = [line for line in lines if start <= line[0] <= end]
    return Counter(op for _, op, _ in lines)


def kernel_opcodes(fn, signature: dict, constants: dict, aligned: list[str], num_warps: int = 4,
                   num_stages: int = 3) -> Counter:
    """Any of train/'s kernels compiled for sm_90a: its opcodes, counted (loads and stores with their width)."""
    return _opcodes(_compile(fn, signature, constants, aligned, num_warps, num_stages).asm["cubin"])


def _per_element(ops: Counter, elements: int) -> dict:
    total = sum(n for op, n in ops.items() if op not in ("NOP", "BRA", "EXIT"))
    return dict(instructions=round(total / elements, 2),
                sfu=round(sum(n for op, n in ops.items() if op.startswith("MUFU")) / elements, 2),
                vector_loads=sum(n for op, n in ops.items() if op == "LDG.E.128"),
                scalar_loads=sum(n for op, n in ops.items() if op in ("LDG.E.U16", "LDG.E.U8")))


def profile(fast: bool = True) -> dict:
    """Per element of each pass, for one thread: pass 2 straight-line over its tile (pass2_t: writing the
    transposed copy too, shared-memory traffic included), pass 1 its loop's body."""
    from train import xent_kernels as k
    from train.xent_triton import ROWS_BLOCK_V, TILE_T, TILE_V

    ptr = {"logits": "*bf16", "targets": "*i64", "row_max": "*fp32", "row_logsum": "*fp32"}
    out = {}
    sig = dict(ptr, row_loss="*fp32", stride="i32", V="constexpr", BLOCK_V="constexpr", FAST="constexpr")
    c = _compile(k.row_stats_kernel, sig, dict(V=V, BLOCK_V=ROWS_BLOCK_V, FAST=fast),
                 [*ptr, "row_loss", "stride"], num_warps=8)
    out["pass1"] = _per_element(_opcodes(c.asm["cubin"], loop_only=True), ROWS_BLOCK_V // (8 * 32))
    sig = dict(ptr, out="*fp8e5", out_t="*fp8e5", T="i32", V="i32", stride="i32", grad_s="fp32",
               BLOCK_T="constexpr", BLOCK_V="constexpr", EVEN="constexpr", FAST="constexpr", TRANSPOSED="constexpr")
    for name, transposed in (("pass2", False), ("pass2_t", True)):
        c = _compile(k.grad_kernel, sig, dict(BLOCK_T=TILE_T, BLOCK_V=TILE_V, EVEN=fast, FAST=fast,
                                              TRANSPOSED=transposed),
                     [*ptr, "out", "out_t", "T", "V", "stride"], num_warps=4)
        ops = _opcodes(c.asm["cubin"])
        out[name] = dict(_per_element(ops, TILE_T * TILE_V // (4 * 32)), stores=dict(
            (op, n) for op, n in sorted(ops.items()) if op.startswith(("STG", "STS", "LDS"))))
    return out


if __name__ == "__main__":
    print(dict(fast=profile(True), portable=profile(False)))
