"""What a record's program needs of the node's software beyond its pins, said by `--plan` before anything is paid.

    needs = program_needs(files, text)    # ["FP8 matmuls: ...", "Triton kernels: ..."], [] when nothing to say
    why = triton_refusal(files, "3.6.0", "2.11.0+cu130")   # an environment that cannot compile them, or None
    why = system_refusal(files, "2.10.0")   # the same for the Python running repro (--python-env system), or ""
    line = system_float_args(program, "2.10.0")   # the float typing that Python's run sets back, or ""
    why = system_fp8_refusal(program)     # this node's answer to the program's FP8 matmul, asked now, or ""
    line = system_fp8_scales(program)     # the FP8 scales that Python's run hands aligned, or ""

- FP8: a program whose syntax tree uses `_scaled_mm` or a `float8_*` dtype needs a torch and cuBLAS that do
  its FP8 matmul; the run asks the node first (preflight fp8_matmul, pipeline/preflight/fp8.py).
- World size: a program that asserts `world_size == N` runs with N processes only (pipeline/records/world_size.py).
- Triton kernels: manifests/triton-kernels.yaml (benchmarks/triton_kernels_check.py) says, for each program
  file by its sha256, which Triton compiles its kernels, with Python floats typed fp32 (Triton's launcher,
  torch <= 2.10's inductor) and fp64 (torch >= 2.11's inductor). A failure is named with its kernel and error,
  and so is the torch line it means (docs/triton-kernels.md).
"""

from __future__ import annotations

import functools
from pathlib import Path

from pipeline.runs.float_args import float_type_of, fp32_float_args, typings_differ
from pipeline.runs.float_args import why as float_args_why
from pipeline.yamlio import load_mapping

DATA_NAME = "triton-kernels.yaml"
TYPED_BY = {"fp32": "as Triton's launcher and torch <= 2.10's inductor type them (fp32)",
            "fp64": "as torch >= 2.11's inductor types them (fp64)"}


def _data() -> dict:
    """The committed results by file sha256; none when the file is absent (a broken one is an error)."""
    from pipeline.workspace import shipped

    path = Path(shipped("manifests")) / DATA_NAME
    return load_mapping(path, "manifest", DATA_NAME).get("files") or {} if path.is_file() else {}


def _triton_lines(files: list[dict]) -> list[str]:
    """One line per kernel and float typing that some Triton does not compile (the versions, the first's error),
    then the line of what to run it on."""
    data, lines = _data(), []
    for pin in files:
        entry = data.get(pin.get("sha256"))
        if not isinstance(entry, dict):
            continue
        failing: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for version, by_type in (entry.get("results") or {}).items():
            for float_type, result in by_type.items():
                for failed in result["failed"]:
                    failing.setdefault((failed["kernel"], float_type), []).append((version, failed["error"]))
        for (kernel, float_type), found in failing.items():
            versions = ", ".join(version for version, _ in found)
            lines.append(f"Triton {versions} does not compile {pin['name']}'s {kernel} with its Python floats "
                         f"{TYPED_BY[float_type]}: {found[0][1]}")
        floats = sorted({f"{x['kernel']}({', '.join(x['floats'])})" for x in entry.get("launches", [])
                         if x["floats"] and (x["kernel"], "fp64") in failing})
        if floats:
            lines.append(f"{pin['name']} passes Python floats to " + ", ".join(floats) + ": torch <= 2.10 types them "
                         "fp32; on torch >= 2.11 a host run sets torch._inductor.config._use_fp64_for_unbacked_floats "
                         "= False first, a declared deviation (pipeline/runs/float_args.py)")
    return lines


def program_needs(files: list[dict], text: bytes | None) -> list[str]:
    """The plan's `needs` lines from the pinned files (always here) and the program text (when it is)."""
    from pipeline.preflight.fp8 import fp8_uses, one_element_scales
    from pipeline.records.world_size import required_world_size

    lines = _triton_lines(files)
    world = required_world_size(text) if text is not None else None
    if world is not None:
        lines.append(f"{world[0]} processes, one per GPU: train_gpt.py asserts world_size == {world[0]} (line "
                     f"{world[1]})")
    uses = fp8_uses(text) if text is not None else ()
    if uses:
        lines.append(f"FP8 matmuls ({', '.join(uses[:3])}{', ...' if len(uses) > 3 else ''}): the node's torch and "
                     "cuBLAS must do them; asked on the node before the run (preflight fp8_matmul)"
                     + ("; its one-element scale slices are handed aligned by a host run where the node's cuBLAS "
                        "needs it (pipeline/runs/fp8_scales.py)" if one_element_scales(text) else ""))
    return lines


def triton_refusal(files: list[dict], triton: str, torch: str, fp32_floats: bool = False) -> str | None:
    """Why an environment of this Triton and torch cannot compile the program's kernels, by the committed results;
    None when they compile or no result says. `fp32_floats`: the run types Python floats fp32 whatever the torch
    (pipeline/runs/float_args.py)."""
    float_type, data = "fp32" if fp32_floats else float_type_of(torch), _data()
    for pin in files:
        entry = data.get(pin.get("sha256"))
        result = ((entry or {}).get("results") or {}).get(triton, {}).get(float_type) if isinstance(entry, dict) \
            else None
        if result and result["failed"]:
            first = result["failed"][0]
            return (f"Triton {triton} under torch {torch} does not compile {pin['name']}'s {first['kernel']}: "
                    f"{first['error']}")
    return None


def pinned_files(record, pinned=None) -> list[dict]:
    """The program files a record's pinned log carries ({name, sha256, bytes}): `pinned`, else its first log that
    pins a program; [] when none does. `record`: a pipeline.records.model.Record."""
    from dataclasses import asdict

    pinned = pinned or next((log for log in record.logs if log.program_sha256), None)
    if pinned is None:
        return []
    return [asdict(p) for p in pinned.files] or [{"name": "train_gpt.py", "sha256": pinned.program_sha256,
                                                  "bytes": pinned.program_bytes}]


@functools.cache  # the packages beside this Python do not change while it runs; a plan of many records asks often
def installed_versions() -> tuple[str, str] | None:
    """(torch, Triton) installed beside the Python running repro, from their metadata (torch is not imported: it
    takes seconds); None when either is absent (a CPU build of torch ships no Triton)."""
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for names in (("torch",), ("triton", "pytorch-triton")):
        for name in names:
            try:
                found.append(version(name))
                break
            except PackageNotFoundError:
                continue
    return (found[0], found[1]) if len(found) == 2 else None


def system_float_args(program: bytes | None, record_torch: str) -> str:
    """The deviation a run in the Python running repro (--python-env system) declares for the program's Python
    float kernel arguments, typed as the record's torch typed them (pipeline/runs/float_args.py); "" for none."""
    versions = installed_versions()
    if versions is None or not fp32_float_args(program, record_torch=record_torch, training_torch=versions[0]):
        return ""
    return float_args_why(record_torch, versions[0])


def system_refusal(files: list[dict], record_torch: str) -> str:
    """Why the Python running repro, which `--runtime host --python-env system` trains with, cannot compile the
    program's Triton kernels by the committed results ("" when it can, or nothing says). Where its torch types
    Python floats otherwise than the record's, the run types them back (system_float_args): judged so."""
    versions = installed_versions()
    if versions is None:
        return ""
    typed_back = typings_differ(record_torch=record_torch, training_torch=versions[0])
    why = triton_refusal(files, versions[1], versions[0], typed_back)
    if why is None:
        return ""
    return (f"environment: this Python's {why}; run it in the record's own environment (drop --python-env "
            "system), or on a Python whose torch and Triton compile them")


def _node_python(program: bytes | None) -> str | None:
    """The Python running repro, where `--plan` runs on the node that trains (a GPU driver here: nvidia-smi on
    the path) and the program does FP8 matmuls; else None (nothing to ask)."""
    import shutil
    import sys

    from pipeline.preflight.fp8 import fp8_uses

    return sys.executable if program is not None and shutil.which("nvidia-smi") and fp8_uses(program) else None


def system_fp8_refusal(program: bytes | None) -> str:
    """The FP8 preflight (pipeline/preflight/fp8.py) asked by `--plan` itself on the node that trains, as the
    host run asks it (which hands one-element scales aligned where the node needs it): its refusal, or "" (no
    FP8, no GPU, or the node does the matmul). Seconds, and only for a program that does FP8 matmuls."""
    from pipeline.preflight.fp8 import check_fp8_matmul

    python = _node_python(program)
    if python is None:
        return ""
    check = check_fp8_matmul(python, program, aligned_scales=True)
    return f"preflight {check.name} (asked on this node now): {check.reason}" if check.status == "fail" else ""


def system_fp8_scales(program: bytes | None) -> str:
    """The deviation a host run in the Python running repro declares when this node's cuBLAS does the program's
    FP8 matmul only with its one-element scales aligned (pipeline/runs/fp8_scales.py); "" for none."""
    from pipeline.preflight.fp8 import needs_aligned_scales
    from pipeline.runs.fp8_scales import why

    python = _node_python(program)
    if python is None or not needs_aligned_scales(python, program):
        return ""
    versions = installed_versions()
    return why(versions[0] if versions else "(this Python's)")
