"""The verified record bundle: `repro archive RUN_DIR... --record NAME [--sign-key PEM]`.

One deterministic tar.gz under `bundles/<name>.tar.gz`, all inside one folder `<name>/`:

    manifest.yaml                   schema-versioned summary: record, verdict, runs, environment,
                                    hardware, data shards, program identity, redactions
    SHA256SUMS  [SHA256SUMS.sig]    sha256 of every other member; optional ed25519 signature of it
    runs/<run-id>/...               each run's directory (the run-directory contract's files)
    preflight.json                  the node's preflight report
    environment/                    the environment lock, the image state, `pip freeze` of the trainer
    data/data.lock.yaml             the data folder's lock: every shard's size and sha256
    manifests/records/*.yaml        the record (and its parent) the verdict was judged against
    report.md, plots/*.png          the report (pipeline/report/render.py)

The verdict is computed from the staged copies of the runs, exactly as `repro bundle verify`
recomputes it from the extracted bundle, so the two agree byte for byte. Every text member is
scanned for secrets before it is hashed (pipeline/redact.py); the environment is never copied.
The same runs always give the same bytes: sorted members, fixed owner/mode/mtime, gzip header
without name or time. The archive is written as `<name>.tar.gz.partial` and renamed when complete.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import gzip
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import yaml

from pipeline import __version__
from pipeline.errors import InputError
from pipeline.hashing import sha256_bytes
from pipeline.records.model import Record, load_parent, load_record_file
from pipeline.redact import Redactor
from pipeline.verdict.judge import Verdict, assess_run, verify_runs

SCHEMA_VERSION = 1
KIND = "repro-record-bundle"
MANIFEST = "manifest.yaml"
SUMS = "SHA256SUMS"
SIGNATURE = "SHA256SUMS.sig"
ATTEMPTS = "attempts"  # runs that were retried: archived, listed, not judged
RUN_FILES = ("status", "run.yaml", "log.txt", "stdout.txt", "metrics.jsonl", "preflight.json")
MAX_MEMBER_BYTES = 256 << 20  # a run's stdout is megabytes; anything this large is not a run's record
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,120}$")
FIRST = (MANIFEST, SUMS, SIGNATURE)  # read first, so `bundle show` finds them at the head of the stream


@dataclass(frozen=True)
class ArchiveSources:
    """What goes into a bundle besides the runs; anything None is looked up from the runs' run.yaml."""

    preflight: Path | None = None
    env_lock: Path | None = None
    image_state: Mapping | None = None  # state/image.json of the docker runtime
    pip_freeze: str | None = None
    data_dir: Path | None = None


@dataclass(frozen=True)
class ArchiveResult:
    path: Path
    name: str
    sha256: str
    members: tuple[str, ...]
    outcome: str
    reasons: tuple[str, ...]
    redactions: tuple[tuple[str, int], ...]
    signed: bool


# ---- judging a bundle tree (shared with bundle_verify) ------------------------------------------

@contextlib.contextmanager
def _manifests_at(folder: Path) -> Iterator[None]:
    """Point the record registry at a bundle's own manifests while judging (the parent is read from there)."""
    old = os.environ.get("REPRO_MANIFESTS")
    os.environ["REPRO_MANIFESTS"] = str(folder)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("REPRO_MANIFESTS", None)
        else:
            os.environ["REPRO_MANIFESTS"] = old


def _strip_root(value, prefix: str):
    if isinstance(value, str):
        return value.replace(prefix, "")
    if isinstance(value, tuple):
        return tuple(_strip_root(v, prefix) for v in value)
    if isinstance(value, list):
        return [_strip_root(v, prefix) for v in value]
    if isinstance(value, dict):
        return {k: _strip_root(v, prefix) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: _strip_root(getattr(value, f.name), prefix)
                                             for f in dataclasses.fields(value) if f.init})
    return value


def judge_tree(root: Path, record_name: str, run_ids: list[str]) -> tuple[Record, Verdict]:
    """The verdict on a bundle tree's runs against the record manifests inside the tree.

    Run sources read `runs/<id>` whatever folder the tree sits in, so an archive and a later
    verification of it produce the same verdict text.
    """
    root = Path(root)
    record_file = root / "manifests" / "records" / f"{record_name}.yaml"
    with _manifests_at(root / "manifests"):
        record = load_record_file(record_file)
        verdict = verify_runs(record, [root / "runs" / run_id for run_id in run_ids])
    return record, _strip_root(verdict, f"{root}/")


def verdict_for_manifest(verdict: Verdict) -> dict:
    """The verdict as plain data (what manifest.yaml holds and what verify compares)."""
    return json.loads(json.dumps(verdict.to_dict(), default=lambda o: None))


# ---- reading the runs ---------------------------------------------------------------------------

def _read_yaml(path: Path) -> dict:
    if not path.is_file():
        return {}
    from pipeline.yamlio import load_file

    try:
        data = load_file(path, "run")
    except InputError:
        return {}
    return data if isinstance(data, dict) else {}


def _iso(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        value = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return str(value)


def _epoch(iso: str | None) -> int | None:
    if not iso:
        return None
    try:
        when = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return None
    return int((when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp())


def _check_run_dirs(run_dirs: list[Path]) -> list[Path]:
    if not run_dirs:
        raise InputError("no run directories given", "pass run directories: repro archive runs/<record>/*")
    seen: dict[str, Path] = {}
    for run in run_dirs:
        if not run.is_dir():
            raise InputError(f"{run} is not a run directory",
                             "give folders written by `repro train` (runs/<record>/<id>)")
        if not (run / "status").is_file() and not (run / "run.yaml").is_file():
            raise InputError(f"{run} has neither a status file nor run.yaml",
                             "give folders written by `repro train` (runs/<record>/<id>)")
        if not NAME_RE.match(run.name):
            raise InputError(f"run folder name {run.name!r} is not a run id", "keep the names `repro train` gave")
        if run.name in seen:
            raise InputError(f"two runs share the id {run.name}: {seen[run.name]} and {run}", "pass each run once")
        seen[run.name] = run
    return sorted(run_dirs, key=lambda p: p.name)


def record_of_runs(run_dirs: list[Path]) -> str:
    """The record named in the runs' run.yaml (for `--record` left out); all runs must agree."""
    names = {str(_read_yaml(Path(p) / "run.yaml").get("record") or "") for p in run_dirs} - {""}
    if len(names) != 1:
        found = ", ".join(sorted(names)) or "none"
        raise InputError(f"cannot tell the record from the runs' run.yaml (found: {found})",
                         "give --record NAME")
    return names.pop()


# ---- environment, data, hardware ----------------------------------------------------------------

def pip_freeze(python: str) -> tuple[str | None, str]:
    """(`pip freeze` of an interpreter, what it was run with or why it could not be)."""
    try:
        done = subprocess.run([python, "-m", "pip", "freeze"], capture_output=True, text=True, timeout=180,
                              env={"PATH": os.environ.get("PATH", ""), "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{python} -m pip freeze could not run: {exc}"
    if done.returncode != 0:
        return None, f"{python} -m pip freeze failed: {done.stderr.strip()[-200:]}"
    return done.stdout, f"{python} -m pip freeze"


# The record image's venv is made --without-pip, so the listing comes from the installed distributions'
# metadata: the same `name==version` lines pip freeze prints for them, sorted as pip sorts them.
FREEZE_PROBE = ("import importlib.metadata as m\n"
                "names = {(d.metadata['Name'] or '', d.version) for d in m.distributions()}\n"
                "print(''.join(f'{n}=={v}\\n' for n, v in sorted(names, key=lambda x: x[0].lower()) if n), end='')")


def image_freeze(image: str) -> tuple[str | None, str]:
    """(`name==version` of every distribution installed in a docker image, how it was read or why not)."""
    try:
        import docker

        client = docker.APIClient(timeout=300, **docker.utils.kwargs_from_env())
        container = client.create_container(image, entrypoint=["python3", "-c", FREEZE_PROBE],
                                            network_disabled=True, labels={"io.repro.role": "bundle-freeze"})
        try:
            client.start(container)
            status = client.wait(container, timeout=300)
            out = client.logs(container, stdout=True, stderr=False).decode("utf-8", errors="replace")
            err = client.logs(container, stdout=False, stderr=True).decode("utf-8", errors="replace")
        finally:
            client.remove_container(container, force=True)
    except Exception as exc:  # the SDK raises many types (no engine, no image, timeouts); the bundle says why
        return None, f"could not list the packages inside image {image}: {type(exc).__name__}: {exc}"
    if status.get("StatusCode") != 0:
        return None, f"listing the packages inside image {image} failed: {err.strip()[-200:]}"
    return out, f"installed distributions inside image {image} (python3 importlib.metadata; its venv has no pip)"




def _hardware(preflight: dict) -> dict:
    """The hardware section of the manifest: the preflight report's facts, without its check list."""
    if not preflight:
        return {"source": None, "note": "no preflight report was found for these runs"}
    facts = preflight.get("facts", preflight)
    if isinstance(facts, dict):
        facts = {k: v for k, v in facts.items() if k not in ("checks", "environment")}
    return {"source": "preflight.json", "facts": facts}


def _data_section(stage: Path, runs_meta: list[dict]) -> dict:
    lock_path = stage / "data" / "data.lock.yaml"
    claimed = sorted({m.get("data_lock_sha256") for m in runs_meta if m.get("data_lock_sha256")})
    if not lock_path.is_file():
        return {"lock_file": None, "lock_sha256": None, "runs_claim": claimed, "shards": [],
                "note": "no data lock was found in the runs' data folder"}
    from pipeline.data.verify import data_lock_digest

    lock = _read_yaml(lock_path)
    files = lock.get("files") or {}
    shards = [{"name": name, "size": entry.get("size"), "sha256": entry.get("sha256"), "tokens": entry.get("tokens")}
              for name, entry in sorted(files.items()) if isinstance(entry, dict)]
    return {"dataset": lock.get("dataset"), "lock_file": "data/data.lock.yaml",
            "lock_sha256": data_lock_digest(lock_path.parent), "runs_claim": claimed, "shards": shards,
            "generator": lock.get("generator") or None}


# ---- staging --------------------------------------------------------------------------------------

class _Stage:
    """The bundle tree being assembled in a temporary folder; every write is redacted first."""

    def __init__(self, root: Path, redactor: Redactor):
        self.root, self.redactor = root, redactor
        self.redactions: dict[str, int] = {}

    def put(self, rel: str, data: bytes) -> None:
        if len(data) > MAX_MEMBER_BYTES:
            raise InputError(f"{rel} is {len(data)} bytes, over the bundle's {MAX_MEMBER_BYTES}-byte member limit",
                             "remove or truncate that file before archiving")
        if not rel.endswith(".png"):
            data, count = self.redactor.data(data)
            if count:
                self.redactions[rel] = self.redactions.get(rel, 0) + count
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def put_text(self, rel: str, text: str) -> None:
        self.put(rel, text.encode("utf-8"))

    def files(self) -> list[str]:
        return sorted(p.relative_to(self.root).as_posix() for p in self.root.rglob("*") if p.is_file())


def _stage_runs(stage: _Stage, run_dirs: list[Path], folder: str = "runs") -> list[dict]:
    rows = []
    for run in run_dirs:
        extra = sorted(p.name for p in run.iterdir() if p.name not in RUN_FILES and not p.name.startswith("."))
        for name in RUN_FILES:
            src = run / name
            if src.is_symlink():
                raise InputError(f"{src} is a symbolic link", "replace it with the file itself before archiving")
            if src.is_file():
                stage.put(f"{folder}/{run.name}/{name}", src.read_bytes())
        rows.append({"id": run.name, "not_archived": extra})
    return rows


def attempt_rows(root: Path, record: Record, attempt_ids: list[str]) -> list[dict]:
    """Runs kept for the record but not judged (a crash before the wanted number of runs succeeded)."""
    rows = []
    for run_id in attempt_ids:
        folder = root / ATTEMPTS / run_id
        judged = _strip_root(assess_run(record, folder), f"{root}/")
        meta = _read_yaml(folder / "run.yaml")
        rows.append({"id": run_id, "status": judged.status, "exit_code": meta.get("exit_code"),
                     "steps": f"{judged.last_step}/{judged.scheduled_steps or '?'}", "problems": list(judged.problems),
                     "folder": f"{ATTEMPTS}/{run_id}"})
    return rows


def _stage_environment(stage: _Stage, runs_meta: list[dict], sources: ArchiveSources, record: Record) -> dict:
    from pipeline.records.model import manifests_dir

    runtimes = sorted({str(m.get("runtime")) for m in runs_meta if m.get("runtime")})
    image_ids = sorted({m["image_id"] for m in runs_meta if m.get("image_id")})
    envs = sorted({m["environment"] for m in runs_meta if m.get("environment")}) or [record.environment]
    claimed = sorted({m["environment_lock_sha256"] for m in runs_meta if m.get("environment_lock_sha256")})
    out: dict = {"runtimes": runtimes, "image_ids": image_ids, "environment": envs[0] if len(envs) == 1 else envs,
                 "lock_file": None, "lock_sha256": None, "runs_claim_lock_sha256": claimed}
    lock = sources.env_lock or manifests_dir() / "environments" / f"{envs[0]}.lock.yaml"
    if lock and Path(lock).is_file():
        data = Path(lock).read_bytes()
        stage.put(f"environment/{Path(lock).name}", data)
        out["lock_file"], out["lock_sha256"] = f"environment/{Path(lock).name}", sha256_bytes(data)
    if sources.image_state:
        stage.put_text("environment/image.json", json.dumps(dict(sources.image_state), indent=2, sort_keys=True,
                                                            default=str) + "\n")
        out["image_state"] = "environment/image.json"
    freeze, how = sources.pip_freeze, "given by the caller"
    if freeze is None and sources.image_state and sources.image_state.get("pip_freeze"):
        freeze, how = str(sources.image_state["pip_freeze"]), "the image state (pip freeze inside the image)"
    if freeze is None and "host" in runtimes:
        hosts = [m.get("host_environment") or {} for m in runs_meta if m.get("runtime") == "host"]
        python = next((h["executable"] for h in hosts if h.get("executable")), sys.executable)
        freeze, how = pip_freeze(python)
    elif freeze is None and image_ids:
        freeze, how = image_freeze(image_ids[0])
    elif freeze is None:
        how = "none: the runs name neither a host Python nor an image"
    if freeze is not None:
        stage.put_text("environment/pip-freeze.txt", freeze)
        out["pip_freeze"] = "environment/pip-freeze.txt"
    out["pip_freeze_source"] = how
    hosts = [m.get("host_environment") for m in runs_meta if m.get("host_environment")]
    if hosts:
        keep = ("python", "torch", "torch_cuda", "triton", "cuda_devices")
        out["host_environment"] = {k: hosts[0].get(k) for k in keep if k in hosts[0]}
    return out


def _run_rows(stage_root: Path, rows: list[dict], verdict: Verdict) -> list[dict]:
    by_id = {Path(r.source).name: r for r in verdict.runs}
    out = []
    for row in rows:
        meta = _read_yaml(stage_root / "runs" / row["id"] / "run.yaml")
        status_file = stage_root / "runs" / row["id"] / "status"
        judged = by_id[row["id"]]
        out.append({
            "id": row["id"],
            "status": status_file.read_text().strip() if status_file.is_file() else "unknown",
            "exit_code": meta.get("exit_code"), "trainer": meta.get("trainer", judged.trainer),
            "runtime": meta.get("runtime"), "preset": meta.get("preset"), "world_size": meta.get("world_size"),
            "final_val_loss": judged.final_val_loss, "train_time_s": judged.train_time_s,
            "steps": f"{judged.last_step}/{judged.scheduled_steps or '?'}",
            "started_at": _iso(meta.get("started_at")), "ended_at": _iso(meta.get("ended_at")),
            "problems": list(judged.problems), "not_archived": row["not_archived"],
        })
    return out


def _program_section(record: Record, runs_meta: list[dict], verdict: Verdict) -> dict:
    return {
        "record_accepted_sha256": sorted(record.accepted_program_sha256),
        "record_fingerprint": record.program.fingerprint or None,
        "runs": [{"id": Path(r.source).name, "trainer": r.trainer, "status": r.program.status,
                  "sha256_in_log": r.program.sha256, "fingerprint_in_log": r.program.fingerprint,
                  "sha256_run_yaml": m.get("program_sha256"), "fingerprint_run_yaml": m.get("program_fingerprint"),
                  "source": m.get("program_source")}
                 for r, m in zip(verdict.runs, runs_meta)],
    }


# ---- signing and writing --------------------------------------------------------------------------

def load_private_key(path: Path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    except FileNotFoundError:
        raise InputError(f"signing key {path} not found", "give the path of an ed25519 private key in PEM") from None
    except (ValueError, TypeError) as exc:
        raise InputError(f"{path} is not an unencrypted PEM private key ({exc})",
                         "create one with `openssl genpkey -algorithm ed25519 -out key.pem`") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InputError(f"{path} holds a {type(key).__name__}, not an ed25519 key",
                         "create one with `openssl genpkey -algorithm ed25519 -out key.pem`")
    return key


def public_key_b64(key) -> str:
    from cryptography.hazmat.primitives import serialization

    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode()


def sums_text(files: dict[str, bytes]) -> str:
    return "".join(f"{sha256_bytes(files[name])}  {name}\n" for name in sorted(files))


def member_order(names: list[str]) -> list[str]:
    head = [n for n in FIRST if n in names]
    return head + sorted(n for n in names if n not in FIRST)


def write_tar_gz(path: Path, top: str, files: dict[str, bytes], mtime: int) -> str:
    """Write the members deterministically to path (atomically: pipeline/atomic.py); returns the archive's sha256."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, compresslevel=9, mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in member_order(list(files)):
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mtime, info.mode = len(files[name]), mtime, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(files[name]))
    data = buffer.getvalue()
    path.parent.mkdir(parents=True, exist_ok=True)
    from pipeline.atomic import write_bytes

    write_bytes(path, data)
    return sha256_bytes(data)


def default_name(record: Record, runs_meta: list[dict], run_ids: list[str]) -> str:
    ends = sorted(e for e in (_iso(m.get("ended_at")) for m in runs_meta) if e)
    stamp = re.sub(r"[^0-9TZ]", "", ends[-1]) if ends else sha256_bytes("\n".join(run_ids).encode())[:12]
    return f"{record.name}-{stamp}-{len(run_ids)}runs"


# ---- the stage function -----------------------------------------------------------------------------

def archive(record: Record, run_dirs: list[Path], out_dir: Path, *, name: str | None = None,
            sources: ArchiveSources = ArchiveSources(), sign_key: Path | None = None,
            environ: Mapping[str, str] | None = None, attempts: list[Path] = ()) -> ArchiveResult:
    """Bundle the runs with everything needed to check them later; returns where it went and its verdict.

    `attempts` are earlier runs that failed and were replaced by later ones (`repro reproduce` after a
    crash): they go into `attempts/` with their status and problems, outside the verdict.
    """
    from pipeline.report.render import read_run_logs, write_report

    all_dirs = _check_run_dirs([Path(p) for p in run_dirs] + [Path(p) for p in attempts])
    attempt_ids = sorted(Path(p).name for p in attempts)
    run_dirs = [p for p in all_dirs if p.name not in attempt_ids]
    if not run_dirs:
        raise InputError("every run given is an attempt; nothing to judge", "pass the runs to judge as RUN_DIR")
    run_ids = [p.name for p in run_dirs]
    key = load_private_key(sign_key) if sign_key else None
    redactor = Redactor.from_environ(os.environ if environ is None else environ)
    originals = [_read_yaml(p / "run.yaml") for p in run_dirs]
    name = name or default_name(record, originals, run_ids)
    if not NAME_RE.match(name):
        raise InputError(f"bundle name {name!r} has characters other than letters, digits, '.', '_' and '-'",
                         "choose a plain name with --name")
    with tempfile.TemporaryDirectory(prefix="repro-archive-") as tmp:
        stage = _Stage(Path(tmp) / name, redactor)
        rows = _stage_runs(stage, run_dirs)
        _stage_runs(stage, [p for p in all_dirs if p.name in attempt_ids], ATTEMPTS)
        runs_meta = [_read_yaml(stage.root / "runs" / i / "run.yaml") for i in run_ids]  # the redacted copies
        stage.put("manifests/records/" + record.path.name, record.path.read_bytes())
        parent = load_parent(record)
        if parent is not None:
            stage.put("manifests/records/" + parent.path.name, parent.path.read_bytes())
        environment = _stage_environment(stage, runs_meta, sources, record)
        data_dirs = [sources.data_dir] if sources.data_dir else sorted({Path(m["data_dir"]) for m in runs_meta
                                                                       if m.get("data_dir")})
        lock = next((d / "data.lock.yaml" for d in data_dirs if (d / "data.lock.yaml").is_file()), None)
        if lock is not None:
            stage.put("data/data.lock.yaml", lock.read_bytes())
        preflight_src = sources.preflight or next(
            (p / "preflight.json" for p in run_dirs if (p / "preflight.json").is_file()), None)
        if preflight_src is not None:
            stage.put("preflight.json", Path(preflight_src).read_bytes())
        try:
            preflight = json.loads((stage.root / "preflight.json").read_text()) if preflight_src else {}
        except ValueError:  # kept as it is in the bundle; the manifest just cannot summarise it
            preflight = {}

        record_staged, verdict = judge_tree(stage.root, record.name, run_ids)
        env_lines = {"runtime": ", ".join(environment["runtimes"]) or "unknown",
                     "image": ", ".join(environment["image_ids"]) or "none (host runtime)",
                     "environment lock sha256": environment["lock_sha256"] or "none"}
        with tempfile.TemporaryDirectory(prefix="repro-report-") as rep:
            files = write_report(record_staged, verdict, read_run_logs([stage.root / "runs" / i for i in run_ids]),
                                 Path(rep), env_lines)
            for rel in files.files:
                stage.put(rel, (Path(rep) / rel).read_bytes())

        runs = _run_rows(stage.root, rows, verdict)
        mtime = max([e for e in (_epoch(r["ended_at"]) for r in runs) if e is not None], default=0)
        manifest = {
            "schema_version": SCHEMA_VERSION, "kind": KIND, "name": name,
            "created": datetime.fromtimestamp(mtime, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ") if mtime else None,
            "tool": {"name": "repro-speedrun", "version": __version__},
            "record": {"name": record.name, "title": record.title, "parent": record.parent or None,
                       "manifest": f"manifests/records/{record.path.name}",
                       "target_val_loss": record.rules.target_val_loss, "p_value_max": record.rules.p_value_max,
                       "rules_version": record.rules.version},
            "verdict": verdict_for_manifest(verdict),
            "runs": runs,
            "attempts": attempt_rows(stage.root, record_staged, attempt_ids),
            "environment": environment,
            "hardware": _hardware(preflight),
            "data": _data_section(stage.root, runs_meta),
            "program": _program_section(record_staged, runs_meta, verdict),
            "redactions": [{"member": k, "count": v} for k, v in sorted(stage.redactions.items())],
            "signature": {"algorithm": "ed25519", "file": SIGNATURE, "public_key": public_key_b64(key)}
            if key else None,
        }
        stage.put_text(MANIFEST, yaml.safe_dump(manifest, sort_keys=False, allow_unicode=True, width=120))
        members = {rel: (stage.root / rel).read_bytes() for rel in stage.files()}
    members[SUMS] = sums_text(members).encode()
    if key is not None:
        members[SIGNATURE] = base64.b64encode(key.sign(members[SUMS])).decode().encode() + b"\n"
    path = Path(out_dir) / f"{name}.tar.gz"
    digest = write_tar_gz(path, name, members, mtime)
    return ArchiveResult(path, name, digest, tuple(member_order(list(members))), verdict.outcome, verdict.reasons,
                         tuple(sorted(stage.redactions.items())), key is not None)

