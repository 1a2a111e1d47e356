"""The verified record bundle: `repro archive RUN_DIR... --record NAME [--sign-key PEM]`.

One deterministic tar.gz under `bundles/<name>.tar.gz`, all inside one folder `<name>/`:

    manifest.yaml                   the typed manifest (pipeline/bundle/manifest.py): record pin, verdict
                                    as findings, runs, environment, hardware, data shards, program identity
    SHA256SUMS  [SHA256SUMS.sig]    sha256 of every other member; optional ed25519 signature of it
    runs/<run-id>/...               each run's directory (the run-directory contract's files)
    attempts/<run-id>/...           runs that crashed and were replaced: kept, listed, not judged
    preflight.json                  the node's preflight report
    environment/                    the environment lock, the image state, `pip freeze` of the trainer
    data/data.lock.yaml             the data folder's lock: every shard's size and sha256
    manifests/records/*.yaml        a copy of the record (and its parent) the verdict was judged against;
                                    pinned by sha256 in manifest.yaml, never used by `bundle verify` to judge
    report.md, plots/*.png          the report (pipeline/report/render.py)

The bundle is assembled in memory. Every text member is scanned for secrets (pipeline/redact.py) and
for the writer's absolute paths (the work folder becomes relative, the home folder `<home>`), then
hashed; the verdict and every derived section are computed from those very bytes by the same code
`bundle verify` runs (pipeline/bundle/judging.py), so the two agree by construction. The same runs
always give the same bytes: sorted members, fixed owner/mode/mtime, gzip header without name or time.
The archive is written atomically (pipeline/atomic.py); a full disk is reported as such, naming the
path, and leaves nothing behind.
"""

from __future__ import annotations

import base64
import errno
import gzip
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pipeline import __version__
from pipeline.bundle.judging import (
    ATTEMPTS,
    RUNS,
    Judged,
    attempt_rows,
    data_section,
    hardware_section,
    judge_members,
    program_section,
    run_meta,
    run_rows,
    verdict_section,
)
from pipeline.bundle.manifest import (
    KIND,
    SCHEMA_VERSION,
    BundleManifest,
    EnvironmentSection,
    HardwareSection,
    RecordPin,
    Redaction,
    SignatureInfo,
    Tool,
    _plain,
)
from pipeline.bundle.trust import SIGNATURE, SUMS, load_private_key, public_key_b64
from pipeline.clock import STAMP, utc_at
from pipeline.errors import InputError
from pipeline.hashing import sha256_bytes
from pipeline.preflight.run import MAX_REPORT_BYTES
from pipeline.records.model import Record, load_parent
from pipeline.redact import Redactor
from pipeline.regular_file import read_bounded
from pipeline.runs.rundir import RunMeta
from pipeline.sha256sums import format_sums
from pipeline.yamlio import LIMITS

MANIFEST = "manifest.yaml"
# node.json: where a campaign task ran (pipeline/campaign/model.py TaskRecord); absent for other runs
RUN_FILES = ("status", "run.yaml", "log.txt", "stdout.txt", "metrics.jsonl", "preflight.json", "node.json")
MAX_MEMBER_BYTES = 256 << 20  # a run's stdout is megabytes; anything this large is not a run's record
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,120}\Z")  # \Z: `$` would also take a name ending in "\n"


def check_bundle_name(name: str) -> None:
    """A bundle's name (its file and its one folder): NAME_RE, with a message that says which rule it breaks."""
    if NAME_RE.match(name):
        return
    if len(name) > 121:
        why = f"is {len(name)} characters long, over 121"
    elif not re.match(r"^[A-Za-z0-9]", name):
        why = "does not start with a letter or a digit" if name else "is empty"
    else:
        why = "has characters other than letters, digits, '.', '_' and '-'"
    raise InputError(f"bundle name {name!r} {why}", "choose a plain name with --name")


FIRST = (MANIFEST, SUMS, SIGNATURE)  # read first, so `bundle show` finds them at the head of the stream
PATHS = "relative to the bundle; run files' paths relative to the work folder that held the runs"


@dataclass(frozen=True, kw_only=True)
class ArchiveSources:
    """What goes into a bundle besides the runs; anything None is looked up from the runs' run.yaml."""

    preflight: Path | None = None
    env_lock: Path | None = None
    image_state: Mapping | None = None  # state/image.json of the docker runtime
    pip_freeze: str | None = None
    data_dir: Path | None = None
    extra: Mapping[str, bytes] | None = None  # more members by name, e.g. a campaign's per-node table


@dataclass(frozen=True, kw_only=True)
class ArchiveResult:
    path: Path
    name: str
    sha256: str
    members: tuple[str, ...]
    outcome: str
    reasons: tuple[str, ...]
    redactions: tuple[tuple[str, int], ...]
    signed: bool


# ---- what goes in: redacted, without the writer's absolute paths -----------------------------------------

class LocalPaths:
    """The writer's absolute paths, rewritten: the work folder to relative paths, home and the tool's own
    folders to placeholders (a bundle read elsewhere must not reveal, or depend on, where it was made)."""

    def __init__(self, work_dir: Path, environ: Mapping[str, str]):
        pairs: dict[str, tuple[str, str]] = {}
        home = environ.get("HOME") or os.path.expanduser("~")
        from pipeline.workspace import CHECKOUT_ROOT

        for folder, slash, bare in ((work_dir, "", "."), (CHECKOUT_ROOT, "<repro>/", "<repro>"),
                                    (Path(sys.prefix), "<python-prefix>/", "<python-prefix>"),
                                    (Path(home) if home else None, "<home>/", "<home>")):
            if folder is None:
                continue
            for form in {str(Path(folder)), str(Path(folder).resolve())}:
                if form.count("/") >= 2 or (form.count("/") == 1 and len(form) > 4):  # never "/" or "/tmp"
                    pairs.setdefault(form, (slash, bare))
        self._subs = [(re.compile(re.escape(p.encode()) + rb"(/|(?![A-Za-z0-9._-]))"), s.encode(), b.encode())
                      for p, (s, b) in sorted(pairs.items(), key=lambda kv: -len(kv[0]))]

    def scrub(self, data: bytes) -> bytes:
        for pattern, slash, bare in self._subs:
            data = pattern.sub(lambda m, s=slash, b=bare: s if m.group(1) == b"/" else b, data)
        return data


class _Stage:
    """The bundle's members being assembled in memory; every text member is redacted and scrubbed first."""

    def __init__(self, redactor: Redactor, paths: LocalPaths):
        self.redactor, self.paths = redactor, paths
        self.files: dict[str, bytes] = {}
        self.redactions: dict[str, int] = {}

    def put(self, rel: str, data: bytes, *, verbatim: bool = False) -> None:
        if len(data) > MAX_MEMBER_BYTES:
            raise InputError(f"{rel} is {len(data)} bytes, over the bundle's {MAX_MEMBER_BYTES}-byte member limit",
                             "remove or truncate that file before archiving")
        if not verbatim and not rel.endswith(".png"):
            data, count = self.redactor.data(data)
            if count:
                self.redactions[rel] = self.redactions.get(rel, 0) + count
            data = self.paths.scrub(data)
        self.files[rel] = data

    def put_text(self, rel: str, text: str) -> None:
        self.put(rel, text.encode("utf-8"))


# ---- reading the runs ---------------------------------------------------------------------------------

def _iso(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        value = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc).strftime(STAMP)
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
    metas = [RunMeta.load_if_present(Path(p)) for p in run_dirs]
    names = {m.record for m in metas if m is not None and m.record}
    if len(names) != 1:
        found = ", ".join(sorted(names)) or "none"
        raise InputError(f"cannot tell the record from the runs' run.yaml (found: {found})",
                         "give --record NAME")
    return names.pop()


# ---- environment ----------------------------------------------------------------------------------------

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


def image_freeze(image: str) -> tuple[str | None, str]:
    """(`name==version` of every distribution installed in a docker image, how it was read or why not).

    The record image's venv is made --without-pip, so the list comes from the runtime probe's reading of
    the installed distributions' metadata (pipeline/probe.py, in a container that is always removed),
    sorted as pip freeze sorts them."""
    try:
        from pipeline.probe import probe_image

        facts = probe_image(image, gpus=False, packages=True)
    except Exception as exc:  # no engine, no image, no python in it: the bundle says why
        return None, f"could not list the packages inside image {image}: {type(exc).__name__}: {exc}"
    out = "".join(f"{n}=={v}\n" for n, v in sorted(facts.packages, key=lambda p: p[0].lower()))
    return out, f"installed distributions inside image {image} (importlib.metadata; its venv has no pip)"


def _environment(stage: _Stage, metas: list[RunMeta], sources: ArchiveSources, record: Record,
                 local_metas: list[RunMeta]) -> EnvironmentSection:
    """`metas` are the bundled (redacted, path-scrubbed) run.yaml; `local_metas` the originals, whose
    interpreter paths are real on this machine (pip freeze runs them)."""
    runtimes = tuple(sorted({m.runtime for m in metas if m.runtime}))
    image_ids = tuple(sorted({m.image_id for m in metas if m.image_id}))
    envs = tuple(sorted({m.environment for m in metas if m.environment})) or (record.environment,)
    claimed = tuple(sorted({m.environment_lock_sha256 for m in metas if m.environment_lock_sha256}))
    # the environment lock of the registry the record came from (records/ and environments/ are siblings)
    lock = sources.env_lock or record.path.parent.parent / "environments" / f"{envs[0]}.lock.yaml"
    lock_file = lock_sha256 = image_state = freeze_file = None
    if lock and Path(lock).is_file():
        data = read_bounded(Path(lock), LIMITS["lock"], "environment lock", "lock it again: `repro env lock`")
        lock_file = f"environment/{Path(lock).name}"
        stage.put(lock_file, data, verbatim=True)  # hashed as the lock's own bytes
        lock_sha256 = sha256_bytes(data)
    if sources.image_state:
        image_state = "environment/image.json"
        stage.put_text(image_state, json.dumps(dict(sources.image_state), indent=2, sort_keys=True, default=str) + "\n")
    freeze, how = sources.pip_freeze, "given by the caller"
    if freeze is None and sources.image_state and sources.image_state.get("pip_freeze"):
        freeze, how = str(sources.image_state["pip_freeze"]), "the image state (pip freeze inside the image)"
    if freeze is None and "host" in runtimes:
        hosts = [m.host_environment for m in local_metas if m.runtime == "host" and m.host_environment]
        python = next((h.probe.executable for h in hosts if h.probe.executable), sys.executable)
        freeze, how = pip_freeze(python)
    elif freeze is None and image_ids:
        freeze, how = image_freeze(image_ids[0])
    elif freeze is None:
        how = "none: the runs name neither a host Python nor an image"
    if freeze is not None:
        freeze_file = "environment/pip-freeze.txt"
        stage.put_text(freeze_file, freeze)
    hosts = [m.host_environment.to_dict() for m in metas if m.host_environment]
    keep = ("python", "torch", "torch_cuda", "triton", "device_count", "venv")
    host = _plain({k: hosts[0].get(k) for k in keep if k in hosts[0]}, "host_environment") if hosts else None
    return EnvironmentSection(runtimes=runtimes, image_ids=image_ids, environments=envs, lock_file=lock_file,
                              lock_sha256=lock_sha256, runs_claim_lock_sha256=claimed, image_state=image_state,
                              pip_freeze=freeze_file, pip_freeze_source=stage.paths.scrub(how.encode()).decode(),
                              host_environment=host)


def _stage_runs(stage: _Stage, run_dirs: list[Path], folder: str) -> dict[str, tuple[str, ...]]:
    """Each run's contract files into <folder>/<id>/; returns what else each run folder held (not archived)."""
    left_out = {}
    for run in run_dirs:
        left_out[run.name] = tuple(sorted(p.name for p in run.iterdir()
                                          if p.name not in RUN_FILES and not p.name.startswith(".")))
        for name in RUN_FILES:
            src = run / name
            if src.is_symlink():
                raise InputError(f"{src} is a symbolic link", "replace it with the file itself before archiving")
            if src.is_file():
                stage.put(f"{folder}/{run.name}/{name}", read_bounded(src, MAX_MEMBER_BYTES, f"run's {name}",
                                                                      "archive runs written by `repro train`"))
    return left_out


def _data_lock(sources: ArchiveSources, metas: list[RunMeta], work_dir: Path) -> Path | None:
    if sources.data_dir:
        dirs = [Path(sources.data_dir)]
    else:  # run.yaml names its data folder absolute, or (after archiving) relative to the work folder
        dirs = sorted({Path(m.data_dir) if Path(m.data_dir).is_absolute() else work_dir / m.data_dir
                       for m in metas if m.data_dir})
    return next((d / "data.lock.yaml" for d in dirs if (d / "data.lock.yaml").is_file()), None)


# ---- signing and writing --------------------------------------------------------------------------

def sums_text(files: dict[str, bytes]) -> str:
    return format_sums({name: sha256_bytes(data) for name, data in files.items()})


def member_order(names: list[str]) -> list[str]:
    head = [n for n in FIRST if n in names]
    return head + sorted(n for n in names if n not in FIRST)


def write_tar_gz(path: Path, top: str, files: dict[str, bytes], mtime: int) -> str:
    """Write the members deterministically to path (atomically: pipeline/atomic.py); returns the archive's sha256."""
    from pipeline.atomic import write_bytes, write_error

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
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(path.parent, exc) from None
    write_bytes(path, data)
    return sha256_bytes(data)


def default_name(record: Record, metas: list[RunMeta | None], run_ids: list[str], *, failed: int = 0,
                 aside: int = 0) -> str:
    """<record>-<last run's end>-<N>runs, N the judged runs that succeeded, then -<F>failed for judged runs that
    did not and -<A>aside for attempts kept outside the verdict: the name says what the bundle holds."""
    ends = sorted(e for e in (_iso(m.ended_at) for m in metas if m is not None) if e)
    stamp = re.sub(r"[^0-9TZ]", "", ends[-1]) if ends else sha256_bytes("\n".join(run_ids).encode())[:12]
    return (f"{record.name}-{stamp}-{len(run_ids) - failed}runs" + (f"-{failed}failed" if failed else "")
            + (f"-{aside}aside" if aside else ""))


def name_for(record: Record, run_dirs: list[Path], attempts: list[Path]) -> str:
    """default_name of these runs and attempts, their statuses read from their folders."""
    from pipeline.runs.rundir import read_status

    failed = sum(read_status(p) != "succeeded" for p in run_dirs)
    return default_name(record, [RunMeta.load_if_present(p) for p in run_dirs], [p.name for p in run_dirs],
                        failed=failed, aside=len(attempts))


def same_name_bundles(out_dir: Path, name: str) -> list[Path]:
    """The bundles already written under this name: <name>.tar.gz, then <name>-v2.tar.gz, -v3, ..."""
    found, version = [], 1
    while (path := Path(out_dir) / (f"{name}.tar.gz" if version == 1 else f"{name}-v{version}.tar.gz")).exists():
        found.append(path)
        version += 1
    return found


def unused_name(out_dir: Path, name: str) -> str:
    """A bundle is never rewritten (someone may have signed, sent or checked it): a new archive whose name is
    taken gets the next free -vN."""
    taken = len(same_name_bundles(out_dir, name))
    return name if taken == 0 else f"{name}-v{taken + 1}"


# ---- the stage function -----------------------------------------------------------------------------

def archive(record: Record, run_dirs: list[Path], out_dir: Path, *, work_dir: Path | None = None,
            name: str | None = None, sources: ArchiveSources = ArchiveSources(), sign_key: Path | None = None,
            environ: Mapping[str, str] | None = None, attempts: list[Path] = ()) -> ArchiveResult:
    """Bundle the runs with everything needed to check them later; returns where it went and its verdict.

    `work_dir` is the folder the runs' paths are made relative to (default: the folder above the runs'
    folder). `attempts` are earlier runs that failed and were replaced by later ones (`repro reproduce`
    after a crash): they go into `attempts/` with their status and findings, outside the verdict.
    """
    all_dirs = _check_run_dirs([Path(p) for p in run_dirs] + [Path(p) for p in attempts])
    attempt_ids = sorted(Path(p).name for p in attempts)
    run_dirs = [p for p in all_dirs if p.name not in attempt_ids]
    if not run_dirs:
        raise InputError("every run given is an attempt; nothing to judge", "pass the runs to judge as RUN_DIR")
    work_dir = Path(work_dir) if work_dir else Path(os.path.commonpath([str(p.resolve().parent) for p in all_dirs]))
    key = load_private_key(sign_key) if sign_key else None
    environ = os.environ if environ is None else environ
    attempt_dirs = [p for p in all_dirs if p.name in attempt_ids]
    if name:  # checked first: a name of 300 characters would fail the look-up below (ENAMETOOLONG)
        check_bundle_name(name)
        if (Path(out_dir) / f"{name}.tar.gz").exists():
            raise InputError(f"{Path(out_dir) / (name + '.tar.gz')} exists: a bundle is never rewritten",
                             "choose another --name (or leave it out: the default name is always new)")
    name = name or unused_name(out_dir, name_for(record, run_dirs, attempt_dirs))
    check_bundle_name(name)
    request = _Request(record=record, name=name, run_dirs=run_dirs, attempt_dirs=attempt_dirs, work_dir=work_dir,
                       sources=sources, key=key, environ=environ)
    try:
        members, manifest, mtime, redactions = _assemble(request)
    except OSError as exc:  # a full /tmp while judging or rendering, an unreadable run file
        from pipeline.atomic import write_error
        from pipeline.errors import os_error

        where = Path(exc.filename) if exc.filename else Path(tempfile.gettempdir())
        raise (write_error(where, exc) if exc.errno == errno.ENOSPC else os_error(where, exc)) from None
    path = Path(out_dir) / f"{name}.tar.gz"
    digest = write_tar_gz(path, name, members, mtime)
    return ArchiveResult(path=path, name=name, sha256=digest, members=tuple(member_order(list(members))),
                         outcome=manifest.verdict.outcome,
                         reasons=manifest.verdict.reasons, redactions=redactions, signed=key is not None)


@dataclass(frozen=True, kw_only=True)
class _Request:
    """One archive() call with its inputs settled: checked run folders, the bundle's name, the signing key."""

    record: Record
    name: str
    run_dirs: list[Path]  # the runs the verdict judges, sorted by id
    attempt_dirs: list[Path]  # failed runs that later ones replaced, sorted by id: kept, not judged
    work_dir: Path  # the runs' paths are written relative to it
    sources: ArchiveSources
    key: Any  # the ed25519 private key, or None for an unsigned bundle
    environ: Mapping[str, str]  # where secrets to redact and the home folder to hide are found

    @property
    def run_ids(self) -> list[str]:
        return [p.name for p in self.run_dirs]

    @property
    def attempt_ids(self) -> list[str]:
        return [p.name for p in self.attempt_dirs]


def _assemble(request: _Request) -> tuple[dict[str, bytes], BundleManifest, int, tuple[tuple[str, int], ...]]:
    """Every member's bytes and the manifest, the archive's mtime (the last run's end) and the redactions."""
    record, run_ids = request.record, request.run_ids
    stage = _Stage(Redactor.from_environ(request.environ), LocalPaths(request.work_dir, request.environ))
    left_out = _stage_runs(stage, request.run_dirs, RUNS)
    _stage_runs(stage, request.attempt_dirs, ATTEMPTS)
    metas = [run_meta(stage.files, f"{RUNS}/{i}") for i in run_ids]  # the redacted, scrubbed copies
    parent = _stage_records(stage, record)
    environment = _stage_surroundings(stage, request, [m for m in metas if m is not None])
    hardware = hardware_section(stage.files)

    # the verdict, the report and the rows are all read from the staged bytes, as `bundle verify` reads them
    with judge_members(stage.files, record, run_ids, request.attempt_ids) as judged:
        verdict = verdict_section(judged.verdict)
        _stage_report(stage, request, judged, _report_environment(environment, hardware))
        runs = run_rows(stage.files, judged, left_out)
        attempts = attempt_rows(stage.files, judged)
        program = program_section(stage.files, record, judged)
    signature = (SignatureInfo(algorithm="ed25519", file=SIGNATURE, public_key=public_key_b64(request.key))
                 if request.key else None)
    mtime = max([e for e in (_epoch(r.ended_at) for r in runs) if e is not None], default=0)
    manifest = BundleManifest(
        schema_version=SCHEMA_VERSION, kind=KIND, name=request.name,
        created=utc_at(mtime) if mtime else None,
        tool=Tool(name="repro-speedrun", version=__version__), paths=PATHS,
        record=_record_pin(stage, record, parent),
        verdict=verdict, runs=runs, attempts=attempts, environment=environment, hardware=hardware,
        data=data_section(stage.files, metas), program=program,
        redactions=tuple(Redaction(member=k, count=v) for k, v in sorted(stage.redactions.items())),
        signature=signature)
    stage.put(MANIFEST, manifest.dump())
    return _sealed(stage.files, request.key), manifest, mtime, tuple(sorted(stage.redactions.items()))


def _record_member(record: Record) -> str:
    return f"manifests/records/{record.path.name}"


def _manifest_bytes(record: Record) -> bytes:
    return read_bounded(record.path, LIMITS["manifest"], "record manifest", "restore it from the registry")


def _stage_records(stage: _Stage, record: Record) -> Record | None:
    """A copy of the record (and its parent) as judged, byte for byte; returns the parent, if any."""
    stage.put(_record_member(record), _manifest_bytes(record), verbatim=True)
    parent = load_parent(record)
    if parent is not None:
        stage.put(_record_member(parent), _manifest_bytes(parent), verbatim=True)
    return parent


def _record_pin(stage: _Stage, record: Record, parent: Record | None) -> RecordPin:
    record_member = _record_member(record)
    return RecordPin(name=record.name, title=record.title, parent=record.parent or None, manifest=record_member,
                     manifest_sha256=sha256_bytes(stage.files[record_member]),
                     parent_manifest=_record_member(parent) if parent else None,
                     parent_manifest_sha256=sha256_bytes(_manifest_bytes(parent)) if parent else None,
                     target_val_loss=record.rules.target_val_loss, p_value_max=record.rules.p_value_max,
                     rules_version=record.rules.version)


def _stage_surroundings(stage: _Stage, request: _Request, metas: list[RunMeta]) -> EnvironmentSection:
    """What the runs ran on and with: the environment, the data lock, preflight and the caller's extras.

    `metas` are the bundled run.yaml; the originals are read again because their paths are real here."""
    sources = request.sources
    local_metas = [m for m in (RunMeta.load_if_present(p) for p in request.run_dirs) if m is not None]
    environment = _environment(stage, metas, sources, request.record, local_metas)
    lock = _data_lock(sources, metas, request.work_dir)
    if lock is not None:
        stage.put("data/data.lock.yaml", read_bounded(lock, LIMITS["lock"], "data lock", "fetch the data again"),
                  verbatim=True)  # its digest is over its own bytes
    preflight = sources.preflight or next((p / "preflight.json" for p in request.run_dirs
                                           if (p / "preflight.json").is_file()), None)
    if preflight is not None:
        stage.put("preflight.json", read_bounded(Path(preflight), MAX_REPORT_BYTES, "preflight report",
                                                 "run `repro preflight` again"))
    for rel, data in sorted((sources.extra or {}).items()):
        stage.put(rel, data)
    return environment


def _report_environment(environment: EnvironmentSection, hardware: HardwareSection) -> dict[str, str]:
    """The report's environment lines, from the manifest's sections."""
    env_lines = {"runtime": ", ".join(environment.runtimes) or "unknown",
                 "image": ", ".join(environment.image_ids) or "none (host runtime)",
                 "environment lock sha256": environment.lock_sha256 or "none"}
    cpu = (hardware.facts or {}).get("cpu") or {}
    if cpu.get("model"):  # CPU records judge time on the CPU model; GPU runs' CPUs are worth knowing too
        env_lines["CPU"] = f"{cpu['model']} ({cpu.get('logical_cpus') or '?'} logical CPUs)"
    return env_lines


def _stage_report(stage: _Stage, request: _Request, judged: Judged, env_lines: dict[str, str]) -> None:
    """report.md and its plots, rendered from the judged (staged) run logs in a scratch folder."""
    from pipeline.report.render import REPORT_FILES, read_run_logs, write_report

    run_ids = request.run_ids
    with tempfile.TemporaryDirectory(prefix="repro-report-") as rep:
        logs = read_run_logs([judged.folders[f"{RUNS}/{i}"] for i in run_ids], run_ids)
        write_report(request.record, judged.verdict, logs, Path(rep), env_lines)
        for rel in REPORT_FILES:
            stage.put(rel, read_bounded(Path(rep) / rel, MAX_MEMBER_BYTES, "report file", "archive again"))


def _sealed(files: dict[str, bytes], key) -> dict[str, bytes]:
    """The members with SHA256SUMS over all of them, and its signature when there is a key."""
    members = dict(files)
    members[SUMS] = sums_text(members).encode()
    if key is not None:
        members[SIGNATURE] = base64.b64encode(key.sign(members[SUMS])).decode().encode() + b"\n"
    return members
