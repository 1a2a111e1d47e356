"""What a record's program needs of the node's software beyond its pins, said by `--plan` before anything is paid.

    needs = program_needs(files, text)    # ["FP8 matmuls: ...", "Triton kernels: ..."], [] when nothing to say
    why = triton_refusal(files, "3.6.0", "2.11.0+cu130")   # an environment that cannot compile them, or None
    why = system_refusal(files)           # the same for the Python running repro (--python-env system), or ""

- FP8: a program whose syntax tree uses `_scaled_mm` or a `float8_*` dtype needs a torch and cuBLAS that do
  its FP8 matmul; the run asks the node first (preflight fp8_matmul, pipeline/preflight/fp8.py).
- World size: a program that asserts `world_size == N` runs with N processes only (pipeline/records/world_size.py).
- Triton kernels: manifests/triton-kernels.yaml (benchmarks/triton_kernels_check.py) says, for each program
  file by its sha256, which Triton compiles its kernels, with Python floats typed fp32 (Triton's launcher,
  torch <= 2.10's inductor) and fp64 (torch >= 2.11's inductor). A failure is named with its kernel and error,
  and so is the torch line it means (docs/triton-kernels.md).
"""

from __future__ import annotations

from pathlib import Path

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
            lines.append(f"{pin['name']} passes Python floats to " + ", ".join(floats) + ": run it on torch <= 2.10 "
                         "(or torch >= 2.11 with torch._inductor.config._use_fp64_for_unbacked_floats = False)")
    return lines


def program_needs(files: list[dict], text: bytes | None) -> list[str]:
    """The plan's `needs` lines from the pinned files (always here) and the program text (when it is)."""
    from pipeline.preflight.fp8 import fp8_uses
    from pipeline.records.world_size import required_world_size

    lines = _triton_lines(files)
    world = required_world_size(text) if text is not None else None
    if world is not None:
        lines.append(f"{world[0]} processes, one per GPU: train_gpt.py asserts world_size == {world[0]} (line "
                     f"{world[1]})")
    uses = fp8_uses(text) if text is not None else ()
    if uses:
        lines.append(f"FP8 matmuls ({', '.join(uses[:3])}{', ...' if len(uses) > 3 else ''}): the node's torch and "
                     "cuBLAS must do them; asked on the node before the run (preflight fp8_matmul)")
    return lines


def float_type_of(torch: str) -> str:
    """How the inductor of `torch` ("2.11.0+cu130", "2.10.0.dev20251210") types a Python float launched into a
    user Triton kernel: fp64 from 2.11 on, fp32 before."""
    parts = torch.split("+")[0].split(".")
    major_minor = (int(parts[0]), int(parts[1])) if len(parts) > 1 and parts[0].isdigit() and parts[1].isdigit() \
        else (0, 0)
    return "fp64" if major_minor >= (2, 11) else "fp32"


def triton_refusal(files: list[dict], triton: str, torch: str) -> str | None:
    """Why an environment of this Triton and torch cannot compile the program's kernels, by the committed results;
    None when they compile or no result says (for the environment rule: pipeline/records/environment_choice.py)."""
    float_type, data = float_type_of(torch), _data()
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


def system_refusal(files: list[dict]) -> str:
    """Why the Python running repro, which `--runtime host --python-env system` trains with, cannot compile the
    program's Triton kernels by the committed results ("" when it can, or nothing says)."""
    versions = installed_versions()
    why = triton_refusal(files, versions[1], versions[0]) if versions else None
    if why is None:
        return ""
    hint = (" (torch >= 2.11 types a Python float kernel argument fp64; the record's own torch typed it fp32, "
            "docs/triton-kernels.md)" if float_type_of(versions[0]) == "fp64" else "")
    return (f"environment: this Python's {why}{hint}; run it in the record's own environment (drop --python-env "
            "system), or on a Python whose torch and Triton compile them")
