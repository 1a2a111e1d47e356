"""A synthetic record whose "program" is tests/standin/train_gpt.py, served by a real HTTP server.

    manifests = standin_manifests(tmp_path, server.base)   # REPRO_REGISTRY=manifests
    server.files[url_path()] = standin_log()
    data = write_data(tmp_path / "data", steps=20, step_s=0.1, fail_at=3, exit_code=3)

The record manifest is the real one with the stand-in's pins: one log (the stand-in's source +
separator + output, as logfactory lays it out) with its sha256 and program sha256, the stand-in's
fingerprint, a 20-step schedule, and a raw_url_template pointing at the test server.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from pipeline.records.identity import program_fingerprint
from tests.logfactory import make_log
from tests.paths import REPO_ROOT

NAME = "2099-01-01_StandIn"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
FOLDER = "records/010199_StandIn"
LOG_FILE = "00000000-0000-4000-8000-000000000000.txt"
STEPS = 20
PROGRAM_PATH = Path(__file__).with_name("train_gpt.py")


MULTIFILE_DIR = Path(__file__).with_name("multifile")


def program_bytes() -> bytes:
    return PROGRAM_PATH.read_bytes()


def multifile_program() -> bytes:
    """The two-file stand-in (tests/standin/multifile/) as its log carries it: train_gpt.py, divider, kernels."""
    from pipeline.records.program_files import ProgramFile, join_program

    return join_program(tuple(ProgramFile(name, (MULTIFILE_DIR / name).read_bytes())
                              for name in ("train_gpt.py", "triton_kernels.py")))


def standin_log(program: bytes | None = None) -> bytes:
    """The published log of the stand-in record: its program, the separator, a 20-step run."""
    return make_log((program or program_bytes()).decode(), steps=STEPS, val_every=10, final_loss=3.275).encode()


def url_path(file: str = LOG_FILE) -> str:
    return f"/{COMMIT}/{FOLDER}/{file}"


def standin_manifests(tmp: Path, base_url: str, log: bytes | None = None, program_sha256: str | None = None,
                      program: bytes | None = None) -> Path:
    """A copy of manifests/ with the stand-in record added; pins `log` (default: standin_log(program)) and
    `program` (default: the one-file stand-in)."""
    out = tmp / "manifests"
    shutil.copytree(REPO_ROOT / "manifests", out)
    program = program or program_bytes()
    log = log if log is not None else standin_log(program)
    data = yaml.safe_load((out / "records" / "2025-09-23_MuonCustomSizing.yaml").read_text())
    data.update(name=NAME, title="stand-in record for tests", date="2099-01-01")
    data["upstream"].update(commit=COMMIT, folder=FOLDER, folder_after_rename=f"records/track_1_short/{NAME}",
                            raw_url_template=base_url + "/{commit}/{folder}/{file}")
    data["logs"] = [{"file": LOG_FILE, "sha256": hashlib.sha256(log).hexdigest(),
                     "program_sha256": program_sha256 or hashlib.sha256(program).hexdigest(),
                     "program_bytes": len(program), "val_loss": 3.275, "train_time_ms": 1782}]
    data["program"]["fingerprint"] = program_fingerprint(program)
    data["published"].update(steps=STEPS, losses=[3.275, 3.276, 3.274, 3.275], times_s=[1.78, 1.79, 1.78, 1.77],
                             mean_time_s=1.78)
    (out / "records" / f"{NAME}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def write_data(folder: Path, **options) -> Path:
    """A data folder the stand-in accepts: one empty train and val shard, and its options file."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "fineweb_train_000001.bin").write_bytes(b"")
    (folder / "fineweb_val_000000.bin").write_bytes(b"")
    (folder / "standin.json").write_text(json.dumps({"steps": STEPS, **options}))
    return folder


def repro_env(manifests: Path, state: Path) -> dict:
    """The environment for a `python -m pipeline` subprocess that sees the stand-in record."""
    # the workspace root is state's parent: its state/ (image.json) and cache/ are the test's own
    return {**os.environ, "REPRO_REGISTRY": str(manifests), "REPRO_HOME": str(Path(state).parent),
            "PYTHONUNBUFFERED": "1"}


@contextlib.contextmanager
def served_record(tmp: Path, program: bytes):
    """The stand-in record pinning `program`, its log served on 127.0.0.1 at the pinned URL: yields the
    environment for a `python -m pipeline` subprocess that sees it (see `repro`)."""
    from tests.helpers_http import FileServer

    with FileServer({url_path(): standin_log(program)}) as server:
        yield repro_env(standin_manifests(tmp, server.base, program=program), tmp / "state")


def repro(env: dict, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m pipeline ARGS` as a user runs it, output captured."""
    return subprocess.run([sys.executable, "-m", "pipeline", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)
