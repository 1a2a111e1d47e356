"""Which Triton compiles each record's own Triton kernels: the data `--plan` reads (manifests/triton-kernels.yaml).

    python benchmarks/triton_kernels_check.py --registry R --upstream /path/to/modded-nanogpt \
        --triton 3.6.0= --triton 3.5.1=/tmp/py3.5.1 --triton 3.4.0=/tmp/py3.4.0 --out manifests/triton-kernels.yaml

`--triton VERSION=DIR` puts DIR (a `pip install --no-deps --target DIR triton==VERSION`) first on the path of
this Python (an empty DIR: this Python's own Triton); the version the import reports is what is written. For
every record of the registry whose selected log holds a program with @triton.jit kernels, each launch of a kernel
(pipeline/records/triton_launches.py) is compiled by Triton's frontend for sm_90 on this CPU
(pipeline/records/triton_compile.py), its Python floats typed fp32 (Triton's launcher, torch <= 2.10's inductor)
and fp64 (torch >= 2.11's inductor). Keyed by the sha256 of the program file holding the kernels, so a plan
finds its result from the file's pin alone. Newest record first; the file is rewritten after each record.
Takes 20 to 60 s per record for two Tritons on 2 shared cores (63 records hold kernels at f411b3d).
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.atomic import write_yaml  # noqa: E402
from pipeline.records.model import load_record  # noqa: E402
from pipeline.records.program import cut_program  # noqa: E402
from pipeline.records.program_files import split_program  # noqa: E402
from pipeline.records.triton_compile import FLOAT_TYPES, TARGET, compile_launches  # noqa: E402
from pipeline.records.triton_launches import kernel_launches  # noqa: E402

HEADER = ("# Which Triton compiles each record's own Triton kernels (frontend, sm_90, on CPU), Python floats typed\n"
          "# fp32 (Triton's launcher, torch <= 2.10's inductor) and fp64 (torch >= 2.11's inductor).\n"
          "# Written by benchmarks/triton_kernels_check.py; read by `repro reproduce --plan`. docs/triton-kernels.md\n")


def _program(record, upstream: Path) -> bytes | None:
    log = next((x for x in record.logs if x.program_sha256), None)
    path = upstream / record.upstream.folder / log.file if log else None
    return cut_program(path.read_bytes()) if path and path.is_file() else None


def _entry(record, program: bytes, tritons: list[tuple[str, str]]) -> dict:
    launches = kernel_launches(program)
    files = {f.name: f.sha256 for f in split_program(program) if b"triton.jit" in f.text}
    entry = {"records": [record.name], "files": files,
             "launches": [{"kernel": x.kernel, "file": x.file, "line": x.line, "floats": list(x.floats),
                           **({"skipped": x.skipped} if x.skipped else {}),
                           **({"assumed_fp32_pointers": list(x.assumed)} if x.assumed else {})} for x in launches],
             "results": {}}
    for _, folder in tritons:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([p for p in (folder, str(ROOT)) if p]))
        version, results = compile_launches(sys.executable, program, launches, FLOAT_TYPES, env=env)
        for float_type in FLOAT_TYPES:
            mine = [r for r in results if r["float_type"] == float_type]
            failed = [{"kernel": r["kernel"], "file": r["file"], "error": r["error"]} for r in mine if not r["ok"]]
            entry["results"].setdefault(version, {})[float_type] = {"compiled": len(mine) - len(failed),
                                                                    "failed": failed}
    return entry


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--registry", type=Path, required=True, help="a registry (records/ of `repro records import`)")
    ap.add_argument("--upstream", type=Path, required=True, help="upstream's files at the imported commit")
    ap.add_argument("--triton", action="append", default=[], help="VERSION=DIR (DIR empty: this Python's Triton)")
    ap.add_argument("--record", action="append", default=[], help="only these records (default: every one)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    tritons = [tuple(t.split("=", 1)) for t in args.triton] or [("", "")]
    entries = {}
    # newest first, and the file rewritten after each record: a sweep cut short keeps what it did
    for path in sorted((args.registry / "records").glob("*.yaml"), reverse=True):
        if args.record and path.stem not in args.record:
            continue
        record = load_record(path.stem, args.registry / "records")
        program = _program(record, args.upstream)
        if program is None or b"triton.jit" not in program:
            continue
        started = time.monotonic()
        entry = _entry(record, program, tritons)
        for sha256 in entry.pop("files").values():
            # a file several records share is one entry naming them all (its results are the file's)
            records = entries[sha256]["records"] + entry["records"] if sha256 in entries else entry["records"]
            entries[sha256] = copy.deepcopy(entry) | {"records": sorted(records)}  # no YAML aliases
        print(f"{record.name}: " + "; ".join(f"{v} {t} {r['compiled']} ok {len(r['failed'])} failed"
                                            for v, by in entry["results"].items() for t, r in by.items())
              + f" ({time.monotonic() - started:.0f} s)", flush=True)
        write_yaml(args.out, {"schema_version": 1, "target": list(TARGET), "files": entries}, HEADER)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
