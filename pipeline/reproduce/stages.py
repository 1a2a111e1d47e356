"""The stages of `reproduce`, in the order they run (STAGES at the end). Each has one shape: look at its
outputs, skip it when they hold up (recomputing hashes, never trusting the state file), else run it, and
return a StageOutcome. They read and fill one Flow (pipeline/reproduce/flow.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.errors import CheckFailed, InputError, Interrupted, MissingDependency
from pipeline.hashing import sha256_file
from pipeline.reproduce import selection
from pipeline.reproduce.state import (
    ArchiveState,
    BundleCheckState,
    DataState,
    EnvironmentState,
    ImageUsed,
    PreflightState,
    ReportState,
    RunsState,
)
from pipeline.runs.rundir import RunEnd
from pipeline.sha256sums import parse_sums

if TYPE_CHECKING:
    from pipeline.reproduce.request import Flow


@dataclass(frozen=True)
class StageOutcome:
    stage: str
    action: str  # done | skipped | not needed | stopped
    detail: str
    seconds: float = 0.0



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
            flow.state.set(PreflightState(str(path), old.outcome))
            return StageOutcome("preflight", "skipped", f"{path} ({old.outcome}) is for this record and runtime")
    locations = default_locations(flow.record, flow.data_dir.parent, flow.work / "runs")
    report = preflight(flow.record, flow.req.runtime, locations=locations)
    write_report(report, path)
    failures = report.failures()
    flow.state.set(PreflightState(str(path), report.outcome))
    _refuse_missing(flow, report, failures, path)
    if failures and not flow.req.keep_going:
        first = failures[0]
        raise CheckFailed(f"preflight failed: {first.name}: {first.reason}"
                          + (f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""),
                          f"see {path} or `repro preflight --record {flow.record.name} --runtime {flow.req.runtime}`"
                          "; --keep-going runs anyway")
    warned = report.by_status("warn")
    which = f" ({'; '.join(f'{c.name}: {c.reason}' for c in warned)})" if warned else ""
    return StageOutcome("preflight", "done", f"{report.outcome}: {len(warned)} warning(s){which}"
                        + (f", {len(failures)} failure(s) ignored (--keep-going)" if failures else ""))


def no_gpu(record_name: str, see: str = "", why: str = "") -> MissingDependency:
    """The one refusal of a machine without GPUs for a GPU record: the preflight stage's and `--smoke`'s check
    before its download (pipeline/reproduce/flow.py)."""
    return MissingDependency(f"preflight: no GPU visible{why}; the record {record_name} cannot be timed on this "
                             "machine", f"run on a GPU node (`make demo` runs the CPU demo here){see}")


def _refuse_missing(flow: Flow, report, failures, path: Path) -> None:
    """What is missing on the machine exits 4, as `repro preflight` says it, not 'preflight failed'."""
    if report.no_gpu and not flow.req.keep_going:
        raise no_gpu(flow.record.name, f"; see {path}")
    if report.no_docker is not None and not flow.req.keep_going:
        from pipeline.docker_engine import START_FIX

        raise MissingDependency(f"preflight: {report.no_docker.reason}", f"{START_FIX}; see {path}")
    torch_missing = next((c for c in failures if c.name == "runtime" and "import torch failed" in c.reason), None)
    if torch_missing is not None and flow.req.runtime == "host" and not flow.req.keep_going:
        # `pip install .` installs the CLI without torch (the extra "train"): say what to install, not "see the report"
        from pipeline.probe import INSTALL_TORCH

        raise MissingDependency(f"PyTorch is missing: {torch_missing.reason}", INSTALL_TORCH)


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
    flow.state.set(EnvironmentState.of(choice))
    chosen = f"{choice.environment.name} ({choice.source}" + (", lock resolved on this node" if
                                                                choice.resolved_on_node else "") + ")"
    if req.runtime == "host":
        from pipeline.env.venv import build_venv

        identity = build_venv(flow.ws, choice.environment, choice.lock, wheelhouse=req.wheelhouse, log=say)
        flow.venv = identity
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
            flow.state.set(ImageUsed(current.image_id, lock_sha))
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
        flow.state.set(ImageUsed(loaded.image_id, lock_sha, str(req.image_tarball)))
        flow.image_state = asdict(loaded)
        return StageOutcome("environment", "done", f"{chosen}: loaded {loaded.image_id[:19]}…")
    say(f"building the {choice.environment.name} image (the first build takes a while; later builds reuse layers)")
    built = build_image(flow.ws, choice.environment.name, wheelhouse=req.wheelhouse, lock_file=choice.lock_path,
                        log=say)
    flow.state.set(ImageUsed(built.image_id, built.lock_sha256))
    flow.image_state = asdict(load_image_state(flow.ws.state))
    return StageOutcome("environment", "done", f"{chosen}: built {built.image_id[:19]}… in {built.seconds:.0f} s")


def data_dir_of(flow: Flow) -> Path:
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

        manifest, names = plan(req.dataset, flow.record if req.dataset is None else None, None, None,
                               registry=flow.ws.registry)
    dataset = None if req.synth is not None else manifest.name
    present = data_dir.is_dir() and all((data_dir / n).is_file() for n in names) and (
        _synth_matches(data_dir, req.synth) if req.synth is not None else bool(names))
    if present:
        report = verify_dir(data_dir, dataset, registry=flow.ws.registry)
        if report.ok:
            digest = data_lock_digest(data_dir)
            flow.state.set(DataState(str(data_dir), digest, "verified"))
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
    flow.state.set(DataState(str(data_dir), digest, action))
    return StageOutcome("data", "done", f"{action} and verified {len(report.files)} shard(s) (lock {digest[:12]}…)")


# ---- the runs -------------------------------------------------------------------------------------

def train_request(flow: Flow):
    """The `repro train` request each run of this reproduce makes."""
    from pipeline.runs.train_plan import TrainRequest

    req = flow.req
    return TrainRequest(record=flow.record, trainer=req.trainer, runtime=req.runtime, nproc=req.nproc,
                        preset=req.preset, overrides=req.overrides, data_dir=flow.data_dir,
                        runs_dir=flow.work / "runs", program_source=req.program_source,
                        smoke_steps=req.smoke_steps, smoke_val_tokens=req.smoke_val_tokens, ws=flow.ws, venv=flow.venv,
                        cache_dir=flow.ws.cache)



def _run_line(result) -> str:
    loss = f"val loss {result.final_val_loss:.4f}" if result.final_val_loss is not None else "no final val loss"
    secs = f", {result.train_time_ms / 1000:.1f} s" if result.train_time_ms is not None else ""
    return (f"{result.run_id} {result.status}: steps {result.last_step}/{result.scheduled_steps or '?'}, {loss}{secs}"
            + (f" ({result.failure})" if getattr(result, "failure", None) else ""))


def _progress(flow: Flow, label: str):
    """The run's progress line on flow.screen (not with --stream, which shows the trainer's own output)."""
    from pipeline.runs.progress import StepProgress

    return StepProgress(flow.screen, label) if flow.screen is not None and flow.terminal is None else None


def _runs_state(runs: list[Path], good: list[Path]) -> RunsState:
    return RunsState(tuple(r.name for r in runs), tuple(r.name for r in good))


def stage_runs(flow: Flow) -> StageOutcome:
    """Run until `req.runs` runs have succeeded; a run that fails stops the stage (unless --keep-going)."""
    from pipeline.runs.launch import Discard
    from pipeline.runs.train_plan import plan_train
    from pipeline.runs.train_run import run_train

    req = flow.req
    runs = flow.existing_runs()
    good = [r for r in runs if flow.counts(r)]
    if len(good) >= req.runs:
        flow.state.set(_runs_state(runs, good))
        return StageOutcome("runs", "skipped", f"{len(good)} run(s) already succeeded with complete logs")
    missing = req.runs - len(good)
    done = 0
    for i in range(missing):
        plan = plan_train(train_request(flow))
        flow.say(f"run {len(good) + 1} of {req.runs}: {plan.run_id} ({req.trainer} trainer, {req.runtime} runtime, "
                 f"{plan.world_size} process(es); log in {plan.run_dir / 'stdout.txt'})")
        screen = _progress(flow, f"run {len(good) + 1} of {req.runs}")
        try:
            result = run_train(plan, terminal=flow.terminal if flow.terminal is not None else screen or Discard())
        finally:
            if screen is not None:
                screen.close()
        done += 1
        run = Path(result.run_dir)
        runs.append(run)
        flow.say(f"  {_run_line(result)}")
        if flow.counts(run):
            good.append(run)
            flow.state.set(_runs_state(runs, good))
            continue
        flow.state.set(_runs_state(runs, good))
        flow.stopped = RunEnd(run.name, result.status, result.exit_code, result.failure)
        if result.status == "aborted":  # Ctrl-C or SIGTERM: stop here, judge and archive nothing (exit 130)
            raise Interrupted(f"run {flow.stopped.describe()}; nothing was judged or archived, and the run keeps "
                              f"its log under {run}", "run the same command again to resume: finished stages and "
                              "runs are kept, and this run is kept aside as an attempt")
        if not req.keep_going:
            break
        flow.say(f"  --keep-going: {missing - i - 1} more to try")
    detail = f"{done} run(s) this time; {len(good)} of {req.runs} succeeded"
    short = flow.stopped is not None and len(good) < req.runs
    return StageOutcome("runs", "stopped" if short else "done",
                        detail + (f"; stopped by {flow.stopped.describe()}" if short else ""))



def judged_and_attempts(flow: Flow) -> tuple[list[Path], list[Path]]:
    """The runs the verdict judges and the failed ones kept aside (pipeline/reproduce/selection.py)."""
    return selection.judged_and_attempts(flow.existing_runs(), flow.wanted, flow.req.runs)


# ---- verdict, bundle, report ----------------------------------------------------------------------

def stage_archive(flow: Flow) -> StageOutcome:
    """Judge the runs and pack them into the bundle; an existing bundle of the same runs that verifies is kept."""
    from pipeline.bundle.archive import ArchiveSources, archive, name_for, same_name_bundles

    flow.judged, flow.attempts = judged_and_attempts(flow)
    if not flow.judged:
        raise CheckFailed("no run directory to judge", f"see {flow.work / 'runs'}; run `repro reproduce` again")
    req, record, judged, attempts = flow.req, flow.record, flow.judged, flow.attempts
    out_dir = Path(req.bundle_dir or flow.ws.bundles)
    earlier_bundles = same_name_bundles(out_dir, name_for(record, judged, attempts))
    for earlier in earlier_bundles:
        if _holds(flow, earlier):
            return StageOutcome("archive", "skipped", f"{earlier} holds these runs and verifies")
    preflight = flow.work / "preflight.json"
    lock = flow.choice.lock_path if flow.choice is not None else None  # the committed or node-resolved lock
    sources = ArchiveSources(preflight=preflight if preflight.is_file() else None, image_state=flow.image_state,
                             data_dir=flow.data_dir, env_lock=lock, extra=flow.extra_members)
    result = archive(record, judged, out_dir, work_dir=flow.work, sources=sources, sign_key=req.sign_key,
                     attempts=attempts)
    flow.state.set(ArchiveState(str(result.path), result.sha256))
    flow.bundle, flow.outcome, flow.reasons = result.path, result.outcome, tuple(result.reasons)
    redacted = sum(c for _, c in result.redactions)
    why_new = (f"; {', '.join(p.name for p in earlier_bundles)} did not verify or holds other runs, and a bundle "
               "is never rewritten" if earlier_bundles else "")
    return StageOutcome("archive", "done", f"{result.path} ({len(result.members)} members"
                        + (f", {redacted} secret value(s) redacted" if redacted else "") + ")" + why_new)


def _holds(flow: Flow, bundle: Path) -> bool:
    """This bundle verifies and holds exactly the judged runs and attempts, signed as asked: kept, not rewritten.
    Its check, made here in full, is the bundle check's (stage_bundle_check) and the page's."""
    from pipeline.bundle.verify import verify_bundle

    check = verify_bundle(bundle, flow.ws.records_dir)
    manifest = check.evidence.manifest if check.evidence is not None else None  # None unless it verifies
    same_runs = manifest is not None and [r.id for r in manifest.runs] == [r.name for r in flow.judged] \
        and sorted(a.id for a in manifest.attempts) == sorted(p.name for p in flow.attempts)
    if not (same_runs and (manifest.signature is not None) == (flow.req.sign_key is not None)):
        return False
    flow.state.set(ArchiveState(str(bundle), sha256_file(bundle)))
    flow.bundle, flow.outcome, flow.reasons = bundle, check.recomputed_outcome, manifest.verdict.reasons
    flow.check = check
    return True


def stage_bundle_check(flow: Flow) -> StageOutcome:
    """An independent read of the bundle just written: every hash, the manifest and the verdict. Its result is
    the page's (stage_report): one reproduce judges its runs twice, to archive them and to check the bundle.
    A bundle the archive stage kept was checked in full there (_holds): that check stands, and is not redone."""
    from pipeline.bundle.verify import verify_bundle

    if flow.check is not None and flow.check.path == str(flow.bundle):
        flow.state.set(BundleCheckState(True, ()))
        return StageOutcome("bundle verify", "skipped", "checked in full when the archive stage kept it: every "
                                                        "hash, the manifest and the verdict check out")
    check = verify_bundle(flow.bundle, flow.ws.records_dir)
    flow.check = check
    flow.state.set(BundleCheckState(check.ok, tuple(str(p) for p in check.problems)))
    return StageOutcome("bundle verify", "done" if check.ok else "stopped",
                        "every hash, the manifest and the verdict check out" if check.ok else
                        "; ".join(map(str, check.problems[:3])))


def stage_report(flow: Flow) -> StageOutcome:
    """The bundle's report.md and plots, copied out to <work>/report/ (byte for byte the archived ones), and
    report.html made from the bundle check's result (it shows that check, so it is written after it)."""
    from pipeline.atomic import write_bytes
    from pipeline.bundle.verify import read_members

    out = flow.work / "report"
    evidence = flow.check.evidence
    files = evidence.files if evidence is not None else read_members(flow.bundle, 256 << 20, 2 << 30).files
    sums = parse_sums(files.get("SHA256SUMS", b"").decode("utf-8", errors="replace")).digests
    wanted = sorted(n for n in files if n == "report.md" or n.startswith("plots/"))
    flow.report = out / "report.md"
    flow.report_html = _html_report(flow, out)
    if wanted and all((out / n).is_file() and sha256_file(out / n) == sums.get(n) for n in wanted):
        flow.state.set(ReportState(str(flow.report), str(flow.report_html)))
        return StageOutcome("report", "skipped", f"{flow.report} matches the bundle's (the HTML page, "
                            f"{flow.report_html}, is written again)")
    for name in wanted:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        write_bytes(out / name, files[name])
    flow.state.set(ReportState(str(flow.report), str(flow.report_html)))
    return StageOutcome("report", "done", f"{flow.report}, {len(wanted) - 1} plot(s) and {flow.report_html.name}")


def _html_report(flow: Flow, out: Path) -> Path:
    from pipeline.pages.report_input import from_check
    from pipeline.pages.write import write_html
    from pipeline.records.published import published_logs_dir

    return write_html(from_check(flow.check, lambda record: published_logs_dir(record, flow.ws.cache, None)), out)


# After the runs: judge and pack them, check the bundle (judging them again, independently), then the report
# from that check. A campaign's collect step runs these on its own folder (pipeline/campaign/collect.py).
AFTER_RUNS: tuple[Callable[[Flow], StageOutcome], ...] = (stage_archive, stage_bundle_check, stage_report)

# Cheap checks first: a node that cannot work fails before the image build and the download.
STAGES: tuple[Callable[[Flow], StageOutcome], ...] = (stage_preflight, stage_environment, stage_data, stage_runs,
                                                      *AFTER_RUNS)


