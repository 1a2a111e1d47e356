"""The whole flow: `repro reproduce --record NAME --runs N` (what `make reproduce` calls), or `--demo`.

    repro reproduce --record 2025-09-23_MuonCustomSizing --runs 4     # preflight, image, data, 4 runs, bundle
    repro reproduce --demo --runs 2                                  # CPU: host runtime, native trainer, synth data
    repro reproduce --smoke 40 --runs 2 --runtime host               # the record's program, step count cut

Stages run in a fixed order, cheap checks first so that a node that cannot work fails in seconds, before
any image build or download: preflight (the node against the record) -> environment (the image or the
Python that will train) -> data (fetch or generate, verify every shard) -> runs -> verdict + archive ->
report -> bundle check. Every stage has one shape: look at its outputs, skip it when they hold up
(recomputing hashes, never trusting the state file), else run it. Everything lives in the work folder
(default `<root>/work/<record>/`): `reproduce-state.json` records what each stage produced, and a lock
file keeps a second `reproduce` out of the same folder.

Which runs count: run directories of the requested configuration (trainer, runtime, preset, --set, smoke
cut, and the native trainer's code) that succeeded with a complete log. A failed run stops the runs
(unless --keep-going); the runs so far are archived anyway so the bundle keeps the crash. When a later
invocation replaces a failed run, the failed one stays in the bundle under `attempts/`, outside the verdict.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from pipeline.errors import CheckFailed, InputError, MissingDependency
from pipeline.folderlock import FolderLock
from pipeline.hashing import sha256_file
from pipeline.records.logparse import parse_log
from pipeline.records.model import Record, load_record
from pipeline.runs.rundir import RunEnd, RunMeta, atomic_write_json, read_status
from pipeline.workspace import Workspace

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
    work_dir: Path | None = None  # default <root>/work/<record>
    bundle_dir: Path | None = None  # default <root>/bundles
    data_dir: Path | None = None  # default <root>/data/<dataset>, or <work>/data/synth for generated data
    dataset: str | None = None  # a dataset manifest other than the record's (smoke runs on small data)
    data_source: str = "hub"  # repro data fetch --source
    synth: dict | None = None  # generate the data with these parameters instead of fetching it
    image_tarball: Path | None = None  # load this `repro env save` tarball instead of building
    sign_key: Path | None = None
    program_source: str | None = None  # record trainer: URL, log/program file, or a clone
    smoke_steps: int | None = None  # a smoke run: the step count cut to this (a declared patch)
    smoke_val_tokens: int | None = None  # smoke only: validate on this many tokens
    python_env: str = "venv"  # host runtime: "venv" (built from the chosen lock) or "system" (the Python found)
    wheelhouse: Path | None = None  # locked files from this folder instead of their URLs

    def work(self, ws: Workspace) -> Path:
        return Path(self.work_dir or ws.work / self.record).resolve()


def demo_request(runs: int = 2, **changes) -> ReproduceRequest:
    """`make demo`: the demo record, on this machine's Python, with the native trainer on generated data."""
    base = ReproduceRequest(record=DEMO_RECORD, runs=runs, trainer="native", runtime="host", preset="demo", nproc=1,
                            synth=dict(DEMO_SYNTH), python_env="system")
    return replace(base, **changes)


@dataclass(frozen=True)
class StageOutcome:
    stage: str
    action: str  # done | skipped | not needed | stopped
    detail: str
    seconds: float = 0.0


@dataclass(frozen=True)
class ReproduceResult:
    record: str
    work_dir: str
    stages: tuple[StageOutcome, ...]
    runs: tuple[str, ...]  # judged
    attempts: tuple[str, ...]  # archived, not judged
    stopped_by: RunEnd | None  # the run whose failure or interruption ended the runs stage
    outcome: str | None
    reasons: tuple[str, ...]
    bundle: str | None
    bundle_sha256: str | None
    bundle_verified: bool
    report: str | None
    state_file: str


# ---- the state file: what each stage produced (a record, not a source of truth) -----------------

class State:
    def __init__(self, path: Path, req: ReproduceRequest):
        self.path = path
        self.data = self._read(path)
        if self.data.get("record") not in (None, req.record):
            raise InputError(f"{path} belongs to record {self.data['record']!r}, not {req.record!r}",
                             "use another --work folder for each record")
        self.data.update(schema_version=STATE_SCHEMA, record=req.record, runs_wanted=req.runs,
                         trainer=req.trainer, runtime=req.runtime)
        self.data.setdefault("stages", {})

    @staticmethod
    def _read(path: Path) -> dict:
        try:
            data = json.loads(path.read_text()) if path.stat().st_size < (1 << 20) else {}
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) and data.get("schema_version") == STATE_SCHEMA else {}

    def set(self, stage: str, **values) -> None:
        self.data["stages"][stage] = values
        atomic_write_json(self.path, self.data)


@dataclass
class Flow:
    """One `reproduce` in progress: the request, the record, and what the stages produced so far."""

    ws: Workspace
    req: ReproduceRequest
    record: Record
    state: State
    say: Callable[[str], None]
    terminal: object = None
    data_dir: Path | None = None
    image_state: dict | None = None
    choice: object = None  # the EnvironmentChoice (pipeline/env/choose.py), when one was made
    venv: dict | None = None  # host runtime: the venv's identity, recorded by every run
    extra_members: dict | None = None  # more bundle members (a campaign's per-node table, pipeline/campaign)
    stopped: RunEnd | None = None
    judged: list[Path] = field(default_factory=list)
    attempts: list[Path] = field(default_factory=list)
    bundle: Path | None = None
    outcome: str | None = None
    reasons: tuple[str, ...] = ()
    report: Path | None = None
    bundle_ok: bool = False

    @property
    def work(self) -> Path:
        return self.req.work(self.ws)

    @property
    def runs_folder(self) -> Path:
        return self.work / "runs" / self.record.name


# ---- stages ---------------------------------------------------------------------------------------

def stage_preflight(flow: Flow) -> StageOutcome:
    """The node against the record's hardware, in seconds, before anything expensive starts."""
    from pipeline.preflight.run import default_locations, preflight, read_report, write_report

    path = flow.work / "preflight.json"
    if path.is_file():
        try:
            old = read_report(path)
        except InputError:
            old = None
        if old is not None and old.record == flow.record.name and old.runtime == flow.req.runtime \
                and not old.failures():
            flow.state.set("preflight", path=str(path), outcome=old.outcome)
            return StageOutcome("preflight", "skipped", f"{path} ({old.outcome}) is for this record and runtime")
    locations = default_locations(flow.record, flow.data_dir.parent, flow.work / "runs")
    report = preflight(flow.record, flow.req.runtime, locations=locations)
    write_report(report, path)
    failures = report.failures()
    flow.state.set("preflight", path=str(path), outcome=report.outcome)
    if report.no_gpu and not flow.req.keep_going:  # as `repro preflight` says it: missing on the machine (exit 4)
        raise MissingDependency(f"preflight: no GPU visible; the record {flow.record.name} cannot be timed on this "
                                "machine", f"run on a GPU node (`make demo` runs the CPU demo here); see {path}")
    torch_missing = next((c for c in failures if c.name == "runtime" and "import torch failed" in c.reason), None)
    if torch_missing is not None and flow.req.runtime == "host" and not flow.req.keep_going:
        # `pip install .` installs the CLI without torch (the extra "train"): say what to install, not "see the report"
        raise MissingDependency(f"PyTorch is missing: {torch_missing.reason}",
                                "install it into this Python: `pip install '.[train]'` (CPU only: `pip install torch "
                                "--index-url https://download.pytorch.org/whl/cpu`), or run `make demo`, which builds "
                                ".venv with a CPU torch")
    if failures and not flow.req.keep_going:
        first = failures[0]
        raise CheckFailed(f"preflight failed: {first.name}: {first.reason}"
                          + (f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""),
                          f"see {path} or `repro preflight --record {flow.record.name} --runtime {flow.req.runtime}`"
                          "; --keep-going runs anyway")
    warned = len(report.by_status("warn"))
    return StageOutcome("preflight", "done", f"{report.outcome}: {warned} warning(s)"
                        + (f", {len(failures)} failure(s) ignored (--keep-going)" if failures else ""))


def stage_environment(flow: Flow) -> StageOutcome:
    """The software that trains, chosen in a fixed order and never silently (pipeline/env/choose.py): the
    record's own environment when its lock is usable here, else its declared fallback. The docker runtime
    builds (or reuses, or loads) the image of that lock; the host runtime builds (or reuses) a virtualenv
    from the same lock with every hash enforced, unless --python-env system asks for the Python found here,
    which each run then records as an unpinned environment."""
    req, record, say = flow.req, flow.record, flow.say
    if req.runtime == "host" and req.python_env == "system":
        return StageOutcome("environment", "not needed", "host runtime with --python-env system: each run records "
                                                         "the Python it trains with")
    from pipeline.env.choose import choose_environment

    choice = choose_environment(flow.ws, record, flow.work, wheelhouse=req.wheelhouse, say=say)
    flow.choice = choice
    flow.state.set("environment", **choice.to_dict())
    chosen = f"{choice.environment.name} ({choice.source}" + (", lock resolved on this node" if
                                                                choice.resolved_on_node else "") + ")"
    if req.runtime == "host":
        from pipeline.env.venv import build_venv

        identity = build_venv(flow.ws, choice.environment, choice.lock, wheelhouse=req.wheelhouse, log=say)
        flow.venv = identity.to_dict()
        return StageOutcome("environment", "skipped" if identity.reused else "done",
                            f"{chosen}: venv {identity.key} at {identity.path}")
    return _image_stage(flow, choice, chosen)


def _image_stage(flow: Flow, choice, chosen: str) -> StageOutcome:
    """Reuse the recorded image if the engine still has it and its lock matches, else load the tarball or build."""
    req, say = flow.req, flow.say
    from pipeline.env.build import build_image
    from pipeline.env.image import connect, load_image, load_image_state

    lock_sha = choice.lock.sha256
    client = connect()
    try:
        current = load_image_state(flow.ws.state)
    except InputError:
        current = None
    if current is not None and current.lock_sha256 == lock_sha and req.image_tarball is None:
        try:
            info = client.inspect_image(current.image_id)
        except Exception:  # the engine lost it (pruned, another node): rebuild below
            info = None
        if info is not None:
            flow.state.set("image", image_id=current.image_id, lock_sha256=lock_sha)
            flow.image_state = asdict(current)
            return StageOutcome("environment", "skipped", f"{chosen}: image {current.image_id[:19]}… is on the "
                                                          f"engine with lock {lock_sha[:12]}…")
    if req.image_tarball is not None:
        say(f"loading image tarball {req.image_tarball}")
        loaded = load_image(req.image_tarball, client=client, state_directory=flow.ws.state)
        if loaded.lock_sha256 != lock_sha:
            raise CheckFailed(f"the image in {req.image_tarball} was built from lock {loaded.lock_sha256[:12]}…, "
                              f"not {choice.environment.name}'s lock {lock_sha[:12]}…",
                              "save the image built from this checkout's lock, or build it here (drop --image)")
        flow.state.set("image", image_id=loaded.image_id, lock_sha256=lock_sha, source=str(req.image_tarball))
        flow.image_state = asdict(loaded)
        return StageOutcome("environment", "done", f"{chosen}: loaded {loaded.image_id[:19]}…")
    say(f"building the {choice.environment.name} image (the first build takes a while; later builds reuse layers)")
    built = build_image(flow.ws, choice.environment.name, wheelhouse=req.wheelhouse, log=say,
                        lock_file=choice.lock_path)
    flow.state.set("image", image_id=built.image_id, lock_sha256=built.lock_sha256)
    flow.image_state = asdict(load_image_state(flow.ws.state))
    return StageOutcome("environment", "done", f"{chosen}: built {built.image_id[:19]}… in {built.seconds:.0f} s")


def _data_dir(flow: Flow) -> Path:
    req = flow.req
    if req.data_dir is not None:
        return Path(req.data_dir).resolve()
    name = req.dataset or flow.record.dataset.name
    if req.synth is not None:
        return (flow.work / "data" / name).resolve()
    return (flow.ws.data / name).resolve()


def _synth_matches(data_dir: Path, params: dict) -> bool:
    from pipeline.data.verify import read_local_lock

    lock = read_local_lock(data_dir) if (data_dir / "data.lock.yaml").is_file() else None
    if lock is None or lock.generator.get("seed") != params["seed"]:
        return False
    tokens = {name: entry.tokens for name, entry in lock.files.items()}
    return (sum(t or 0 for n, t in tokens.items() if "_train_" in n) == params["train_tokens"]
            and sum(t or 0 for n, t in tokens.items() if "_val_" in n) == params["val_tokens"])


def stage_data(flow: Flow) -> StageOutcome:
    """Fetch (or generate) the shards, then verify every one; an existing folder that verifies is kept."""
    from pipeline.data.verify import data_lock_digest, verify_dir

    req, data_dir = flow.req, flow.data_dir
    names: list[str] = []
    manifest = None
    if req.synth is None:
        from pipeline.data.fetch import plan

        manifest, names = plan(req.dataset, flow.record.name if req.dataset is None else None, None, None,
                               registry=flow.ws.registry)
    dataset = None if req.synth is not None else manifest.name
    present = data_dir.is_dir() and all((data_dir / n).is_file() for n in names) and (
        _synth_matches(data_dir, req.synth) if req.synth is not None else bool(names))
    if present:
        report = verify_dir(data_dir, dataset, registry=flow.ws.registry)
        if report.ok:
            digest = data_lock_digest(data_dir)
            flow.state.set("data", dir=str(data_dir), lock_sha256=digest)
            return StageOutcome("data", "skipped", f"{len(report.files)} shard(s) in {data_dir} verified "
                                                   f"(lock {digest[:12]}…)")
        flow.say(f"{len(report.bad)} shard(s) in {data_dir} failed verification: "
                 + "; ".join(f"{f.name}: {f.problems[0]}" for f in report.bad[:3]) + " — getting them again")
    if req.synth is not None:
        from pipeline.data.synth import synth

        synth(data_dir, **req.synth)
        action = "generated"
    else:
        from pipeline.data.fetch import fetch

        flow.say(f"fetching {len(names)} shard(s) of {manifest.name} into {data_dir} from {req.data_source}")
        result = fetch(manifest, names, data_dir, source=req.data_source)
        if result.failures:
            first = result.failures[0]
            raise CheckFailed(f"{len(result.failures)} shard(s) could not be fetched; {first.name}: {first.what}",
                              first.fix or "run `repro reproduce` again to resume the download")
        action = "fetched"
    report = verify_dir(data_dir, dataset, registry=flow.ws.registry)
    if not report.ok:
        bad = report.bad[0]
        raise CheckFailed(f"{len(report.bad)} shard(s) in {data_dir} fail verification; {bad.name}: {bad.problems[0]}",
                          f"see `repro data verify {data_dir}`; delete the bad files and run again")
    digest = data_lock_digest(data_dir)
    flow.state.set("data", dir=str(data_dir), lock_sha256=digest)
    return StageOutcome("data", "done", f"{action} and verified {len(report.files)} shard(s) (lock {digest[:12]}…)")


# ---- which runs count -----------------------------------------------------------------------------

def _meta(run: Path) -> RunMeta | None:
    try:
        return RunMeta.load_if_present(run)
    except InputError:
        return None


def _smoke_cut(meta_or_req) -> tuple | None:
    patch = getattr(meta_or_req, "program_patch", None)
    return (patch.get("name"), patch.get("sha256")) if patch else None


def _configuration(meta: RunMeta | None) -> tuple:
    """What makes two runs comparable: trainer, runtime, native preset, overrides and steps, the smoke cut,
    and for the native trainer its code (train/'s digest: an edited trainer is another program). The record
    trainer's program is checked against the record's pins by the verdict itself."""
    if meta is None:
        return ()
    native = meta.trainer == "native"
    return (meta.trainer, meta.runtime, (meta.preset or "record") if native else None, tuple(meta.overrides),
            meta.steps if native else None, _smoke_cut(meta), meta.program_sha256 if native else None)


@functools.cache
def _native_program_sha256() -> str:
    from pipeline.runs.stage import native_program

    return native_program().sha256


def train_request(flow: Flow):
    """The `repro train` request each run of this reproduce makes."""
    from pipeline.runs.stage import TrainRequest

    req = flow.req
    return TrainRequest(record=flow.record.name, trainer=req.trainer, runtime=req.runtime, nproc=req.nproc,
                        preset=req.preset, overrides=req.overrides, data_dir=flow.data_dir,
                        runs_dir=flow.work / "runs", program_source=req.program_source,
                        smoke_steps=req.smoke_steps, smoke_val_tokens=req.smoke_val_tokens, ws=flow.ws, venv=flow.venv,
                        cache_dir=flow.ws.cache)


@functools.cache
def _wanted_patch(steps: int | None, val_tokens: int | None, trainer: str) -> tuple | None:
    if steps is None:
        return None
    from pipeline.runs.stage import smoke_patch_for

    patch = smoke_patch_for(trainer, steps, val_tokens)
    return (patch.name, patch.sha256)


def _wanted(flow: Flow) -> tuple:
    from pipeline.runs.stage import effective_native_settings

    req = flow.req
    native = req.trainer == "native"
    overrides, steps = effective_native_settings(req.overrides, None, req.smoke_steps, req.smoke_val_tokens) \
        if native else (req.overrides, None)
    return (req.trainer, req.runtime, (req.preset or "record") if native else None, tuple(overrides),
            steps if native else None, _wanted_patch(req.smoke_steps, req.smoke_val_tokens, req.trainer),
            _native_program_sha256() if native else None)


def _complete(run: Path) -> bool:
    """Status succeeded and a log that reached the final validation."""
    return (read_status(run) == "succeeded" and (run / "log.txt").is_file()
            and parse_log(run / "log.txt").completed)


def existing_runs(flow: Flow) -> list[Path]:
    folder = flow.runs_folder
    return sorted((p for p in folder.iterdir() if p.is_dir() and (p / "status").is_file()),
                  key=lambda p: p.name) if folder.is_dir() else []


def _good(flow: Flow, run: Path) -> bool:
    """A run that counts: complete, and of the configuration asked for."""
    return _configuration(_meta(run)) == _wanted(flow) and _complete(run)


def _run_line(result) -> str:
    loss = f"val loss {result.final_val_loss:.4f}" if result.final_val_loss is not None else "no final val loss"
    secs = f", {result.train_time_ms / 1000:.1f} s" if result.train_time_ms is not None else ""
    return f"{result.run_id} {result.status}: steps {result.last_step}/{result.scheduled_steps or '?'}, {loss}{secs}"


def stage_runs(flow: Flow) -> StageOutcome:
    """Run until `req.runs` runs have succeeded; a run that fails stops the stage (unless --keep-going)."""
    from pipeline.runs.launch import Discard
    from pipeline.runs.stage import plan_train, run_train

    req = flow.req
    runs = existing_runs(flow)
    good = [r for r in runs if _good(flow, r)]
    if len(good) >= req.runs:
        flow.state.set("runs", ids=[r.name for r in runs], good=[r.name for r in good])
        return StageOutcome("runs", "skipped", f"{len(good)} run(s) already succeeded with complete logs")
    missing = req.runs - len(good)
    done = 0
    for i in range(missing):
        plan = plan_train(train_request(flow))
        flow.say(f"run {len(good) + 1} of {req.runs}: {plan.run_id} ({req.trainer} trainer, {req.runtime} runtime, "
                 f"{plan.world_size} process(es); log in {plan.run_dir / 'stdout.txt'})")
        result = run_train(plan, terminal=flow.terminal if flow.terminal is not None else Discard())
        done += 1
        run = Path(result.run_dir)
        runs.append(run)
        flow.say(f"  {_run_line(result)}")
        if _good(flow, run):
            good.append(run)
            flow.state.set("runs", ids=[r.name for r in runs], good=[r.name for r in good])
            continue
        flow.state.set("runs", ids=[r.name for r in runs], good=[r.name for r in good])
        flow.stopped = RunEnd(run.name, result.status, result.exit_code)
        if result.status == "aborted" or not req.keep_going:
            break
        flow.say(f"  --keep-going: {missing - i - 1} more to try")
    detail = f"{done} run(s) this time; {len(good)} of {req.runs} succeeded"
    short = flow.stopped is not None and len(good) < req.runs
    return StageOutcome("runs", "stopped" if short else "done",
                        detail + (f"; stopped by {flow.stopped.describe()}" if short else ""))


def judged_and_attempts(flow: Flow) -> tuple[list[Path], list[Path]]:
    """With enough good runs the verdict is on them and every run that failed is an attempt; otherwise the
    verdict is on every run of this configuration, so that a crash is judged. Succeeded runs of another
    configuration (an earlier --set) are neither."""
    runs = existing_runs(flow)
    good = [r for r in runs if _good(flow, r)]
    failed = [r for r in runs if not _complete(r)]
    if len(good) >= flow.req.runs:
        return good, failed
    same = [r for r in runs if _configuration(_meta(r)) == _wanted(flow)]
    return same, [r for r in failed if r not in same]


# ---- verdict, bundle, report ----------------------------------------------------------------------

def stage_archive(flow: Flow) -> StageOutcome:
    """Judge the runs and pack them into the bundle; an existing bundle of the same runs that verifies is kept."""
    from pipeline.bundle.archive import ArchiveSources, archive, default_name
    from pipeline.bundle.verify import show_bundle, verify_bundle

    flow.judged, flow.attempts = judged_and_attempts(flow)
    if not flow.judged:
        raise CheckFailed("no run directory to judge", f"see {flow.work / 'runs'}; run `repro reproduce` again")
    req, record, judged, attempts = flow.req, flow.record, flow.judged, flow.attempts
    out_dir = Path(req.bundle_dir or flow.ws.bundles)
    metas = [_meta(r) for r in judged]
    expected = out_dir / f"{default_name(record, metas, [r.name for r in judged])}.tar.gz"
    if expected.is_file():
        check = verify_bundle(expected, flow.ws.records_dir)
        manifest = show_bundle(expected).manifest if check.ok else None
        same_runs = manifest is not None and [r.id for r in manifest.runs] == [r.name for r in judged] \
            and sorted(a.id for a in manifest.attempts) == sorted(p.name for p in attempts)
        if same_runs and check.ok and (manifest.signature is not None) == (req.sign_key is not None):
            flow.state.set("archive", path=str(expected), sha256=sha256_file(expected))
            flow.bundle, flow.outcome = expected, check.recomputed_outcome
            flow.reasons = manifest.verdict.reasons
            return StageOutcome("archive", "skipped", f"{expected} holds these runs and verifies")
    preflight = flow.work / "preflight.json"
    lock = flow.choice.lock_path if flow.choice is not None else None  # the committed or node-resolved lock
    sources = ArchiveSources(preflight=preflight if preflight.is_file() else None, image_state=flow.image_state,
                             data_dir=flow.data_dir, env_lock=lock, extra=flow.extra_members)
    result = archive(record, judged, out_dir, work_dir=flow.work, sources=sources, sign_key=req.sign_key,
                     attempts=attempts)
    flow.state.set("archive", path=str(result.path), sha256=result.sha256)
    flow.bundle, flow.outcome, flow.reasons = result.path, result.outcome, tuple(result.reasons)
    redacted = sum(c for _, c in result.redactions)
    return StageOutcome("archive", "done", f"{result.path} ({len(result.members)} members"
                        + (f", {redacted} secret value(s) redacted" if redacted else "") + ")")


def stage_report(flow: Flow) -> StageOutcome:
    """The bundle's report.md and plots, copied out to <work>/report/ (byte for byte the archived ones)."""
    from pipeline.atomic import write_bytes
    from pipeline.bundle.verify import read_members

    out = flow.work / "report"
    files = read_members(flow.bundle, 256 << 20, 2 << 30).files
    sums = {}
    for line in files.get("SHA256SUMS", b"").decode().splitlines():
        digest, _, name = line.partition("  ")
        sums[name] = digest
    wanted = sorted(n for n in files if n == "report.md" or n.startswith("plots/"))
    flow.report = out / "report.md"
    if wanted and all((out / n).is_file() and sha256_file(out / n) == sums.get(n) for n in wanted):
        flow.state.set("report", path=str(flow.report))
        return StageOutcome("report", "skipped", f"{flow.report} matches the bundle's")
    for name in wanted:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        write_bytes(out / name, files[name])
    flow.state.set("report", path=str(flow.report))
    return StageOutcome("report", "done", f"{flow.report} and {len(wanted) - 1} plot(s)")


def stage_bundle_check(flow: Flow) -> StageOutcome:
    """An independent read of the bundle just written: every hash, the manifest and the verdict."""
    from pipeline.bundle.verify import verify_bundle

    check = verify_bundle(flow.bundle, flow.ws.records_dir)
    flow.bundle_ok = check.ok
    flow.state.set("bundle_verify", ok=check.ok, problems=[str(p) for p in check.problems])
    return StageOutcome("bundle verify", "done" if check.ok else "stopped",
                        "every hash, the manifest and the verdict check out" if check.ok else
                        "; ".join(map(str, check.problems[:3])))


# Cheap checks first: a node that cannot work fails before the image build and the download.
STAGES: tuple[Callable[[Flow], StageOutcome], ...] = (
    stage_preflight, stage_environment, stage_data, stage_runs, stage_archive, stage_report, stage_bundle_check)


def reproduce(ws: Workspace, req: ReproduceRequest, say: Callable[[str], None] = lambda line: None,
              terminal=None) -> ReproduceResult:
    if req.runs < 1:
        raise InputError(f"--runs {req.runs}: at least one run is needed", "give --runs 1 or more (4+ for a verdict)")
    record = load_record(req.record, ws.records_dir)
    work = req.work(ws)
    work.mkdir(parents=True, exist_ok=True)
    with FolderLock(work, "repro reproduce"):
        flow = Flow(ws, req, record, State(work / STATE_FILE, req), say, terminal)
        flow.data_dir = _data_dir(flow)
        stages: list[StageOutcome] = []
        for stage in STAGES:
            started = time.monotonic()
            outcome = stage(flow)
            outcome = replace(outcome, seconds=time.monotonic() - started)
            stages.append(outcome)
            say(f"[{outcome.stage}] {outcome.action}: {outcome.detail} ({outcome.seconds:.0f} s)")
            if outcome.stage == "archive":
                say(f"[verify] {flow.outcome} over {len(flow.judged)} run(s)"
                    + (f" ({len(flow.attempts)} earlier attempt(s) kept aside)" if flow.attempts else ""))
        return ReproduceResult(record.name, str(work), tuple(stages), tuple(r.name for r in flow.judged),
                               tuple(a.name for a in flow.attempts), flow.stopped, flow.outcome, flow.reasons,
                               str(flow.bundle), sha256_file(flow.bundle), flow.bundle_ok, str(flow.report),
                               str(flow.state.path))
