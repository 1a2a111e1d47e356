"""The whole flow: `repro reproduce --record NAME --runs N` (what `make reproduce` calls), or `--demo`.

    repro reproduce --record 2025-09-23_MuonCustomSizing --runs 4      # image, data, preflight, 4 runs, bundle
    repro reproduce --demo --runs 2                                   # the same on a CPU: host runtime,
                                                                      # native trainer, generated data

Stages, in order: image (build, or load a tarball; docker runtime only) -> data (fetch, or generate
for the demo; then verify every shard) -> preflight -> runs -> verify -> archive -> report -> bundle
check. Everything lives in a work folder (default `work/<record>/`) with `reproduce-state.json`
saying what each stage produced. A second invocation resumes: each stage first checks its outputs
(recomputing hashes, never trusting the state file) and is skipped when they hold up; the runs
stage counts the run directories of the requested configuration (trainer, runtime, preset, --set)
that succeeded with a complete log, and runs only the ones still missing. A failed run
stops the runs (unless --keep-going), and the runs so far are archived anyway, so the bundle keeps
the crash and the verdict says why; when a later invocation replaces a failed run, the failed one
stays in the bundle under `attempts/`, outside the verdict.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from pipeline import REPO_ROOT
from pipeline.errors import CheckFailed, InputError
from pipeline.hashing import sha256_file
from pipeline.records.logparse import parse_log
from pipeline.records.model import Record, load_record
from pipeline.runs.rundir import atomic_write_json, read_status

STATE_FILE = "reproduce-state.json"
STATE_SCHEMA = 1
DEMO_RECORD = "demo-cpu-synth"
# The demo's data: generated shards (pipeline/data/synth.py), enough for the demo preset's steps.
DEMO_SYNTH = {"train_tokens": 262_144, "val_tokens": 16_384, "seed": 0}


@dataclass(frozen=True)
class ReproduceRequest:
    record: str
    runs: int
    trainer: str = "record"
    runtime: str = "docker"
    preset: str | None = None  # native trainer only
    overrides: tuple[str, ...] = ()
    nproc: int | None = None
    keep_going: bool = False
    work_dir: Path | None = None  # default work/<record>
    bundle_dir: Path | None = None  # default bundles/
    data_dir: Path | None = None  # default data/<dataset>, or <work>/data/synth for generated data
    data_source: str = "hub"  # repro data fetch --source
    synth: dict | None = None  # generate the data with these parameters instead of fetching it
    image_tarball: Path | None = None  # load this `repro env save` tarball instead of building
    sign_key: Path | None = None

    @property
    def work(self) -> Path:
        return Path(self.work_dir or REPO_ROOT / "work" / self.record)


def demo_request(runs: int = 2, **changes) -> ReproduceRequest:
    """`make demo`: the demo record, on this machine's Python, with the native trainer on generated data."""
    base = ReproduceRequest(record=DEMO_RECORD, runs=runs, trainer="native", runtime="host", preset="demo", nproc=1,
                            synth=dict(DEMO_SYNTH))
    return replace(base, **changes)


@dataclass(frozen=True)
class StageOutcome:
    stage: str
    action: str  # done | skipped | not needed | stopped
    detail: str


@dataclass(frozen=True)
class ReproduceResult:
    record: str
    work_dir: str
    stages: tuple[StageOutcome, ...]
    runs: tuple[str, ...]  # judged
    attempts: tuple[str, ...]  # archived, not judged
    stopped_by: str | None  # the run whose failure or interruption ended the runs stage, as "<id>: <status>"
    outcome: str | None
    reasons: tuple[str, ...]
    bundle: str | None
    bundle_sha256: str | None
    bundle_verified: bool
    report: str | None
    state_file: str


# ---- the state file: what each stage produced (a record, not a source of truth) -----------------

def _read_state(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and data.get("schema_version") == STATE_SCHEMA else {}


class _State:
    def __init__(self, path: Path, req: ReproduceRequest):
        self.path = path
        self.data = _read_state(path)
        if self.data.get("record") not in (None, req.record):
            raise InputError(f"{path} belongs to record {self.data['record']!r}, not {req.record!r}",
                             "use another --work folder for each record")
        self.data.update(schema_version=STATE_SCHEMA, record=req.record, runs_wanted=req.runs,
                         trainer=req.trainer, runtime=req.runtime)
        self.data.setdefault("stages", {})

    def set(self, stage: str, **values) -> None:
        self.data["stages"][stage] = values
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.path, self.data)




# ---- stages ---------------------------------------------------------------------------------------

def stage_image(req: ReproduceRequest, record: Record, state: _State, say) -> tuple[StageOutcome, dict | None]:
    """The docker runtime needs the pinned image: reuse the recorded one if the engine still has it and
    its lock label matches today's lock, else load the given tarball or build it."""
    if req.runtime != "docker":
        return StageOutcome("image", "not needed", "host runtime: each run records the Python environment found"), None
    from pipeline.env.build import build_image
    from pipeline.env.image import connect, load_image, load_image_state
    from pipeline.env.lock import load_lock
    from pipeline.env.manifest import load_environment

    lock_sha = load_lock(load_environment(record.environment)).sha256
    client = connect()
    try:
        current = load_image_state()
    except InputError:
        current = None
    if current is not None and current.lock_sha256 == lock_sha and req.image_tarball is None:
        try:
            info = client.inspect_image(current.image_id)
        except Exception:  # the engine lost it (pruned, another node): rebuild below
            info = None
        if info is not None:
            state.set("image", image_id=current.image_id, lock_sha256=lock_sha)
            return StageOutcome("image", "skipped", f"{current.image_id[:19]}… is on the engine with lock "
                                                    f"{lock_sha[:12]}…"), asdict(current)
    if req.image_tarball is not None:
        say(f"loading image tarball {req.image_tarball}")
        loaded = load_image(req.image_tarball, client=client)
        if loaded.lock_sha256 != lock_sha:
            raise CheckFailed(f"the image in {req.image_tarball} was built from lock {loaded.lock_sha256[:12]}…, "
                              f"not {record.environment}'s current lock {lock_sha[:12]}…",
                              "save the image built from this checkout's lock, or build it here (drop --image)")
        state.set("image", image_id=loaded.image_id, lock_sha256=lock_sha, source=str(req.image_tarball))
        return StageOutcome("image", "done", f"loaded {loaded.image_id[:19]}…"), asdict(loaded)
    say(f"building the {record.environment} image (the first build takes a while; later builds reuse layers)")
    built = build_image(record.environment, log=say)
    state.set("image", image_id=built.image_id, lock_sha256=built.lock_sha256)
    return StageOutcome("image", "done", f"built {built.image_id[:19]}… in {built.seconds:.0f} s"), \
        asdict(load_image_state())


def _data_dir(req: ReproduceRequest, record: Record) -> Path:
    if req.data_dir is not None:
        return Path(req.data_dir).resolve()
    if req.synth is not None:
        return (req.work / "data" / record.dataset.name).resolve()
    from pipeline.data.fetch import default_data_dir

    return default_data_dir(record.dataset.name)


def _synth_matches(data_dir: Path, params: dict) -> bool:
    from pipeline.data.verify import read_local_lock

    lock = read_local_lock(data_dir) if (data_dir / "data.lock.yaml").is_file() else None
    if lock is None or lock.generator.get("seed") != params["seed"]:
        return False
    tokens = {name: entry.tokens for name, entry in lock.files.items()}
    return (sum(t or 0 for n, t in tokens.items() if "_train_" in n) == params["train_tokens"]
            and sum(t or 0 for n, t in tokens.items() if "_val_" in n) == params["val_tokens"])


def stage_data(req: ReproduceRequest, record: Record, state: _State, say) -> tuple[StageOutcome, Path]:
    """Fetch (or generate) the shards, then verify every one; an existing folder that verifies is kept."""
    from pipeline.data.verify import data_lock_digest, verify_dir

    data_dir = _data_dir(req, record)
    names: list[str] = []
    manifest = None
    if req.synth is None:
        from pipeline.data.fetch import plan

        manifest, names = plan(None, record.name, None, None)
    present = data_dir.is_dir() and all((data_dir / n).is_file() for n in names) and (
        _synth_matches(data_dir, req.synth) if req.synth is not None else bool(names))
    if present:
        report = verify_dir(data_dir, None if req.synth is not None else manifest.name)
        if report.ok:
            digest = data_lock_digest(data_dir)
            state.set("data", dir=str(data_dir), lock_sha256=digest)
            return StageOutcome("data", "skipped", f"{len(report.files)} shard(s) in {data_dir} verified "
                                                   f"(lock {digest[:12]}…)"), data_dir
        say(f"{len(report.bad)} shard(s) in {data_dir} failed verification: "
            + "; ".join(f"{f.name}: {f.problems[0]}" for f in report.bad[:3]) + " — getting them again")
    if req.synth is not None:
        from pipeline.data.synth import synth

        say(f"generating data in {data_dir} ({req.synth['train_tokens']} train + {req.synth['val_tokens']} val "
            "tokens)")
        synth(data_dir, **req.synth)
        action = "generated"
    else:
        from pipeline.data.fetch import fetch

        say(f"fetching {len(names)} shard(s) of {manifest.name} into {data_dir} from {req.data_source}")
        result = fetch(manifest, names, data_dir, source=req.data_source)
        if result.failures:
            first = result.failures[0]
            raise CheckFailed(f"{len(result.failures)} shard(s) could not be fetched; {first.name}: {first.what}",
                              first.fix or "run `repro reproduce` again to resume the download")
        action = "fetched"
    report = verify_dir(data_dir, None if req.synth is not None else manifest.name)
    if not report.ok:
        bad = report.bad[0]
        raise CheckFailed(f"{len(report.bad)} shard(s) in {data_dir} fail verification; {bad.name}: {bad.problems[0]}",
                          f"see `repro data verify {data_dir}`; delete the bad files and run again")
    digest = data_lock_digest(data_dir)
    state.set("data", dir=str(data_dir), lock_sha256=digest)
    return StageOutcome("data", "done", f"{action} and verified {len(report.files)} shard(s) "
                                        f"(lock {digest[:12]}…)"), data_dir


def _preflight_failures(report: dict) -> list[str]:
    """Failed checks, each with its reason."""
    out = []
    for check in report.get("checks") or []:
        if check.get("status") != "fail":
            continue
        out.append(f"{check.get('name')}: {check.get('detail') or check.get('summary') or check.get('message')}")
    return out


def stage_preflight(req: ReproduceRequest, record: Record, state: _State, data_dir: Path, say) -> StageOutcome:
    from pipeline.preflight.run import default_locations, preflight, read_report, write_report

    path = req.work / "preflight.json"
    if path.is_file():
        try:
            old = read_report(path)
        except InputError:
            old = {}
        if old.get("record") == record.name and old.get("runtime") == req.runtime and not _preflight_failures(old):
            state.set("preflight", path=str(path), outcome=old.get("outcome"))
            return StageOutcome("preflight", "skipped", f"{path} ({old.get('outcome')}) is for this record and "
                                                        "runtime")
    locations = default_locations(record.name, data_dir.parent, req.work / "runs")
    report = preflight(record.name, req.runtime, locations=locations)
    write_report(report, path)
    data = read_report(path)
    failures = _preflight_failures(data)
    state.set("preflight", path=str(path), outcome=data.get("outcome"))
    if failures and not req.keep_going:
        raise CheckFailed(f"preflight failed: {failures[0]}" + (f" (and {len(failures) - 1} more)" if len(failures) > 1
                                                                else ""),
                          f"see {path} or `repro preflight --record {record.name} --runtime {req.runtime}`; "
                          "--keep-going runs anyway")
    warned = sum(1 for c in data.get("checks") or [] if c.get("status") == "warn")
    return StageOutcome("preflight", "done", f"{data.get('outcome')}: {warned} warning(s)"
                        + (f", {len(failures)} failure(s) ignored (--keep-going)" if failures else "") + f"; {path}")


def _runs_folder(req: ReproduceRequest, record: Record) -> Path:
    return req.work / "runs" / record.name


def _configuration(meta: dict) -> tuple:
    """What makes two runs comparable: trainer, runtime, native preset and overrides, and for the native
    trainer its code (train/'s digest: an edited trainer is another program). The record trainer's program
    is checked against the record's pins by the verdict itself."""
    trainer = meta.get("trainer")
    native = trainer == "native"
    return (trainer, meta.get("runtime"), (meta.get("preset") or "record") if native else None,
            tuple(meta.get("overrides") or ()), meta.get("program_sha256") if native else None)


@functools.cache
def _native_program_sha256() -> str:
    from pipeline.runs.stage import native_program

    return native_program().sha256


def _wanted(req: ReproduceRequest) -> tuple:
    native = req.trainer == "native"
    return (req.trainer, req.runtime, (req.preset or "record") if native else None, tuple(req.overrides),
            _native_program_sha256() if native else None)


def _complete(run: Path) -> bool:
    """Status succeeded and a log that reached the final validation."""
    return (read_status(run) == "succeeded" and (run / "log.txt").is_file()
            and parse_log(run / "log.txt").completed)


def _good(run: Path, req: ReproduceRequest) -> bool:
    """A run that counts: complete, and of the configuration asked for."""
    return _configuration(_yaml(run / "run.yaml")) == _wanted(req) and _complete(run)


def existing_runs(req: ReproduceRequest, record: Record) -> list[Path]:
    folder = _runs_folder(req, record)
    return sorted((p for p in folder.iterdir() if p.is_dir() and (p / "status").is_file()),
                  key=lambda p: p.name) if folder.is_dir() else []


def stage_runs(req: ReproduceRequest, record: Record, state: _State, data_dir: Path, say,
               terminal=None) -> tuple[StageOutcome, str | None]:
    """Run until `req.runs` runs have succeeded; returns (outcome, '<id>: <status>' of a run that stopped it)."""
    from pipeline.runs.stage import TrainRequest, plan_train, run_train

    runs = existing_runs(req, record)
    good = [r for r in runs if _good(r, req)]
    if len(good) >= req.runs:
        state.set("runs", ids=[r.name for r in runs], good=[r.name for r in good])
        return StageOutcome("runs", "skipped", f"{len(good)} run(s) already succeeded with complete logs"), None
    missing = req.runs - len(good)
    stopped = None
    done = 0
    for i in range(missing):
        say(f"run {len(good) + 1} of {req.runs} ({req.trainer} trainer, {req.runtime} runtime)")
        plan = plan_train(TrainRequest(record=record.name, trainer=req.trainer, runtime=req.runtime, nproc=req.nproc,
                                       preset=req.preset, overrides=req.overrides, data_dir=data_dir,
                                       runs_dir=req.work / "runs"))
        result = run_train(plan, terminal=terminal)
        done += 1
        run = Path(result.run_dir)
        runs.append(run)
        state.set("runs", ids=[r.name for r in runs], good=[r.name for r in good + ([run] if _good(run, req) else [])])
        if _good(run, req):
            good.append(run)
            continue
        stopped = f"{run.name}: {result.status}" + (f" (exit code {result.exit_code})"
                                                    if result.exit_code is not None else "")
        if result.status == "aborted" or not req.keep_going:
            break
        say(f"run {run.name} {result.status}; --keep-going: {missing - i - 1} more to try")
    detail = f"{done} run(s) this time; {len(good)} of {req.runs} succeeded"
    return StageOutcome("runs", "stopped" if stopped and len(good) < req.runs else "done",
                        detail + (f"; stopped by {stopped}" if stopped and len(good) < req.runs else "")), stopped


def judged_and_attempts(req: ReproduceRequest, record: Record) -> tuple[list[Path], list[Path]]:
    """With enough good runs the verdict is on them and every run that failed is an attempt; otherwise the
    verdict is on every run of this configuration, so that a crash is judged. Succeeded runs of another
    configuration (an earlier --set) are neither."""
    runs = existing_runs(req, record)
    good = [r for r in runs if _good(r, req)]
    failed = [r for r in runs if not _complete(r)]
    if len(good) >= req.runs:
        return good, failed
    same = [r for r in runs if _configuration(_yaml(r / "run.yaml")) == _wanted(req)]
    return same, [r for r in failed if r not in same]


def stage_archive(req: ReproduceRequest, record: Record, state: _State, judged: list[Path], attempts: list[Path],
                  data_dir: Path, image_state: dict | None, say):
    from pipeline.bundle.archive import ArchiveSources, archive, default_name
    from pipeline.bundle.verify import show_bundle, verify_bundle

    out_dir = Path(req.bundle_dir or REPO_ROOT / "bundles")
    metas = [_yaml(r / "run.yaml") for r in judged]
    expected = out_dir / f"{default_name(record, metas, [r.name for r in judged])}.tar.gz"
    if expected.is_file():
        check = verify_bundle(expected)
        manifest = show_bundle(expected).manifest if check.ok else {}
        listed_attempts = sorted(a.get("id") for a in manifest.get("attempts") or [])
        same_runs = ([r.get("id") for r in manifest.get("runs") or []] == [r.name for r in judged]
                     and listed_attempts == sorted(p.name for p in attempts))
        signed = bool(manifest.get("signature"))
        if check.ok and same_runs and signed == (req.sign_key is not None):
            state.set("archive", path=str(expected), sha256=sha256_file(expected))
            return StageOutcome("archive", "skipped", f"{expected} holds these runs and verifies"), expected, \
                check.recomputed_outcome, tuple(manifest.get("verdict", {}).get("reasons") or ())
    sources = ArchiveSources(preflight=req.work / "preflight.json" if (req.work / "preflight.json").is_file()
                             else None, image_state=image_state, data_dir=data_dir)
    result = archive(record, judged, out_dir, sources=sources, sign_key=req.sign_key, attempts=attempts)
    state.set("archive", path=str(result.path), sha256=result.sha256)
    redacted = sum(c for _, c in result.redactions)
    return StageOutcome("archive", "done", f"{result.path} ({len(result.members)} members"
                        + (f", {redacted} secret value(s) redacted" if redacted else "") + ")"), result.path, \
        result.outcome, result.reasons


def _yaml(path: Path) -> dict:
    import yaml

    try:
        data = yaml.safe_load(path.read_text()) if path.is_file() else {}
    except yaml.YAMLError:
        data = {}
    return data if isinstance(data, dict) else {}


def stage_report(req: ReproduceRequest, state: _State, bundle: Path) -> tuple[StageOutcome, Path]:
    """The bundle's report.md and plots, copied out to <work>/report/ (byte for byte the archived ones)."""
    from pipeline.bundle.verify import read_members

    out = req.work / "report"
    files = read_members(bundle, 256 << 20, 2 << 30).files
    sums = {}
    for line in files.get("SHA256SUMS", b"").decode().splitlines():
        digest, _, name = line.partition("  ")
        sums[name] = digest
    wanted = sorted(n for n in files if n == "report.md" or n.startswith("plots/"))
    if wanted and all((out / n).is_file() and sha256_file(out / n) == sums.get(n) for n in wanted):
        state.set("report", path=str(out / "report.md"))
        return StageOutcome("report", "skipped", f"{out / 'report.md'} matches the bundle's"), out / "report.md"
    for name in wanted:
        target = out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(files[name])
    state.set("report", path=str(out / "report.md"))
    return StageOutcome("report", "done", f"{out / 'report.md'} and {len(wanted) - 1} plot(s)"), out / "report.md"


# ---- the flow ---------------------------------------------------------------------------------------

def reproduce(req: ReproduceRequest, say: Callable[[str], None] = lambda line: None, terminal=None) -> ReproduceResult:
    if req.runs < 1:
        raise InputError(f"--runs {req.runs}: at least one run is needed", "give --runs 1 or more (4+ for a verdict)")
    record = load_record(req.record)
    req.work.mkdir(parents=True, exist_ok=True)
    state = _State(req.work / STATE_FILE, req)
    stages: list[StageOutcome] = []

    def note(outcome: StageOutcome) -> None:
        stages.append(outcome)
        say(f"[{outcome.stage}] {outcome.action}: {outcome.detail}")

    image_outcome, image_state = stage_image(req, record, state, say)
    note(image_outcome)
    data_outcome, data_dir = stage_data(req, record, state, say)
    note(data_outcome)
    note(stage_preflight(req, record, state, data_dir, say))
    runs_outcome, stopped = stage_runs(req, record, state, data_dir, say, terminal)
    note(runs_outcome)
    judged, attempts = judged_and_attempts(req, record)
    if not judged:
        raise CheckFailed("no run directory to judge", f"see {req.work / 'runs'}; run `repro reproduce` again")
    archive_outcome, bundle, outcome, reasons = stage_archive(req, record, state, judged, attempts, data_dir,
                                                              image_state, say)
    note(StageOutcome("verify", "done", f"{outcome} over {len(judged)} run(s)"
                      + (f" ({len(attempts)} earlier attempt(s) kept aside)" if attempts else "")))
    note(archive_outcome)
    report_outcome, report = stage_report(req, state, bundle)
    note(report_outcome)
    from pipeline.bundle.verify import verify_bundle

    check = verify_bundle(bundle)
    note(StageOutcome("bundle verify", "done" if check.ok else "stopped",
                      "every hash, the manifest and the verdict check out" if check.ok else
                      "; ".join(map(str, check.problems[:3]))))
    state.set("bundle_verify", ok=check.ok, problems=[str(p) for p in check.problems])
    return ReproduceResult(record.name, str(req.work), tuple(stages), tuple(r.name for r in judged),
                           tuple(a.name for a in attempts), stopped, outcome, tuple(reasons), str(bundle),
                           sha256_file(bundle), check.ok, str(report), str(state.path))

