"""What a bundle's files say, recomputed the same way by `repro archive` and by `bundle verify`.

Both sides call `judge_members` on the bundle's members held in memory, so an archive and a later
verification cannot disagree by construction. The judge (pipeline/verdict/judge.py) reads run folders,
so the few files it reads are written under generated names (`r0000/log.txt`, ...) in a temporary
folder: no name taken from the archive ever reaches the file system. The generated folders are then
renamed back to `runs/<id>` in everything the verdict says.

The sections derived here (verdict, run rows, attempts, program, data, hardware) are exactly what
verify compares with the manifest, field by field.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from pipeline.bundle.manifest import (
    AttemptRow,
    DataSection,
    HardwareSection,
    ProgramRun,
    ProgramSection,
    RunRow,
    Shard,
    VerdictSection,
    _plain,
    finite,
)
from pipeline.errors import InputError, ReproError
from pipeline.findings import Finding
from pipeline.records.model import Record
from pipeline.runs.rundir import RunMeta
from pipeline.verdict.judge import RunAssessment, Verdict, assess_run, verify_runs
from pipeline.yamlio import load_bytes, require_mapping

RUNS = "runs"
ATTEMPTS = "attempts"  # runs that were retried: archived, listed, not judged
JUDGE_INPUTS = ("log.txt", "run.yaml", "status", "preflight.json")  # what the judge reads (CPU model: preflight)
DATA_LOCK = "data/data.lock.yaml"
PREFLIGHT = "preflight.json"


def run_ids_in(files: Mapping[str, bytes], folder: str) -> list[str]:
    return sorted({rel.split("/")[1] for rel in files if rel.startswith(f"{folder}/") and rel.count("/") == 2})


def _renamed(value, renames: Mapping[str, str]):
    """Every string in a verdict with the generated folders' paths replaced by their bundle names."""
    if isinstance(value, str):
        for old, new in renames.items():
            if old in value:
                value = value.replace(old, new)
        return value
    if isinstance(value, tuple):
        return tuple(_renamed(v, renames) for v in value)
    if isinstance(value, list):
        return [_renamed(v, renames) for v in value]
    if isinstance(value, Mapping):
        return {k: _renamed(v, renames) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: _renamed(getattr(value, f.name), renames)
                                             for f in dataclasses.fields(value) if f.init})
    return value


@dataclass(frozen=True)
class Judged:
    verdict: Verdict
    attempts: tuple[RunAssessment, ...]
    folders: dict[str, Path]  # "runs/<id>" -> the generated folder with its judge inputs (inside the context only)


@contextlib.contextmanager
def judge_members(files: Mapping[str, bytes], record: Record, run_ids: list[str],
                  attempt_ids: list[str]) -> Iterator[Judged]:
    """The verdict on runs/<id> and the assessment of attempts/<id>, judged against `record`."""
    with tempfile.TemporaryDirectory(prefix="repro-judge-") as tmp:
        renames: dict[str, str] = {}
        folders: dict[str, Path] = {}
        wanted = [f"{RUNS}/{i}" for i in run_ids] + [f"{ATTEMPTS}/{i}" for i in attempt_ids]
        for n, bundle_folder in enumerate(wanted):
            generated = Path(tmp) / f"r{n:05d}"  # fixed width: no generated name is a prefix of another
            generated.mkdir()
            for name in JUDGE_INPUTS:
                data = files.get(f"{bundle_folder}/{name}")
                if data is not None:
                    (generated / name).write_bytes(data)
            renames[str(generated)] = bundle_folder
            folders[bundle_folder] = generated
        try:
            verdict = verify_runs(record, [folders[f"{RUNS}/{i}"] for i in run_ids])
            attempts = tuple(assess_run(record, folders[f"{ATTEMPTS}/{i}"]) for i in attempt_ids)
        except ReproError as exc:  # name the bundle's member, not the generated file
            exc.what = _renamed(exc.what, renames)
            exc.args = (exc.what,)
            raise
        yield Judged(_renamed(verdict, renames), _renamed(attempts, renames), folders)


# ---- the judge's answer as data ----------------------------------------------------------------------

def verdict_findings(verdict: Verdict) -> tuple[Finding, ...]:
    return tuple(verdict.findings)


def run_findings(run: RunAssessment) -> tuple[Finding, ...]:
    return tuple(run.findings)


def sentences(findings) -> tuple[str, ...]:
    from pipeline.verdict.render import render

    return tuple(render(f) for f in findings)


def verdict_section(verdict: Verdict) -> VerdictSection:
    findings = verdict_findings(verdict)
    return VerdictSection(outcome=verdict.outcome, rules_version=verdict.rules_version, findings=findings,
                          reasons=sentences(findings))


# ---- sections derived from the files ---------------------------------------------------------------

def run_meta(files: Mapping[str, bytes], folder: str) -> RunMeta | None:
    """A run's run.yaml, validated (None when the run died before writing one)."""
    data = files.get(f"{folder}/run.yaml")
    if data is None:
        return None
    source = f"{folder}/run.yaml"
    return RunMeta.from_dict(require_mapping(load_bytes(data, source, "run"), source, "run.yaml"), Path(source))


def status_of(files: Mapping[str, bytes], folder: str) -> str:
    data = files.get(f"{folder}/status")
    return data.decode("utf-8", "replace").strip()[:40] if data is not None else "unknown"


def _steps(run: RunAssessment) -> str:
    return f"{run.last_step}/{run.scheduled_steps or '?'}"


def run_rows(files: Mapping[str, bytes], judged: Judged, not_archived: Mapping[str, tuple[str, ...]]) -> tuple:
    rows = []
    for run in judged.verdict.runs:
        folder = run.source
        run_id = folder.split("/", 1)[1]
        meta = run_meta(files, folder)
        rows.append(RunRow(
            id=run_id, status=status_of(files, folder), exit_code=meta.exit_code if meta else None,
            trainer=meta.trainer if meta else run.trainer, runtime=meta.runtime if meta else None,
            preset=meta.preset if meta else None, world_size=meta.world_size if meta else None,
            final_val_loss=finite(run.final_val_loss), train_time_s=finite(run.train_time_s), steps=_steps(run),
            started_at=meta.started_at if meta else None, ended_at=meta.ended_at if meta else None,
            not_archived=tuple(not_archived.get(run_id, ()))))
    return tuple(rows)


def attempt_rows(files: Mapping[str, bytes], judged: Judged) -> tuple:
    rows = []
    for run in judged.attempts:
        meta = run_meta(files, run.source)
        rows.append(AttemptRow(id=run.source.split("/", 1)[1], status=status_of(files, run.source),
                               exit_code=meta.exit_code if meta else None, steps=_steps(run),
                               findings=run_findings(run), folder=run.source))
    return tuple(rows)


def program_section(files: Mapping[str, bytes], record: Record, judged: Judged) -> ProgramSection:
    runs = []
    for run in judged.verdict.runs:
        meta = run_meta(files, run.source)
        runs.append(ProgramRun(id=run.source.split("/", 1)[1], trainer=run.trainer, status=run.program.status,
                               sha256_in_log=run.program.sha256, fingerprint_in_log=run.program.fingerprint,
                               sha256_run_yaml=(meta.program_sha256 or None) if meta else None,
                               fingerprint_run_yaml=meta.program_fingerprint if meta else None,
                               source=(meta.program_source or None) if meta else None))
    return ProgramSection(record_accepted_sha256=tuple(sorted(record.accepted_program_sha256)),
                          record_fingerprint=record.program.fingerprint or None, runs=tuple(runs))


def data_lock_digest_of(lock: bytes) -> str:
    """The data lock's digest as pipeline/data/verify computes it, from the member's bytes."""
    from pipeline.data.verify import lock_digest, parse_lock_bytes

    return lock_digest(parse_lock_bytes(lock, DATA_LOCK))  # in memory: nothing of the bundle reaches the disk


def data_section(files: Mapping[str, bytes], metas: list[RunMeta | None]) -> DataSection:
    claimed = tuple(sorted({m.data_lock_sha256 for m in metas if m and m.data_lock_sha256}))
    lock = files.get(DATA_LOCK)
    if lock is None:
        return DataSection(dataset=None, lock_file=None, lock_sha256=None, runs_claim=claimed, shards=(),
                           generator=None)
    raw = require_mapping(load_bytes(lock, DATA_LOCK, "lock"), DATA_LOCK, "data lock")
    entries = raw.get("files") if isinstance(raw.get("files"), dict) else {}
    shards = tuple(Shard(name=str(name), size=e.get("size") if isinstance(e.get("size"), int) else None,
                         sha256=e.get("sha256") if isinstance(e.get("sha256"), str) else None,
                         tokens=e.get("tokens") if isinstance(e.get("tokens"), int) else None)
                   for name, e in sorted(entries.items()) if isinstance(e, dict))
    dataset, generator = raw.get("dataset"), raw.get("generator")
    try:
        generator = _plain(generator, "data.generator") if generator else None
    except ValueError as exc:
        raise InputError(f"{DATA_LOCK}: {exc}", "archive the data lock as fetch, tokenize or synth wrote it") from None
    return DataSection(dataset=dataset if isinstance(dataset, str) else None, lock_file=DATA_LOCK,
                       lock_sha256=data_lock_digest_of(lock), runs_claim=claimed, shards=shards,
                       generator=generator)


def hardware_section(files: Mapping[str, bytes]) -> HardwareSection:
    """The facts of the preflight report (pipeline/preflight/run.py's typed model), or why there are none."""
    from pipeline.preflight.run import PreflightReport

    data = files.get(PREFLIGHT)
    if data is None:
        return HardwareSection(source=None, facts=None, note="no preflight report was found for these runs")
    try:
        report = PreflightReport.from_dict(json.loads(data), Path(PREFLIGHT))
        facts = {k: v for k, v in dataclasses.asdict(report.facts).items() if k != "environment"}
        return HardwareSection(source=PREFLIGHT, facts=_plain(facts, "hardware.facts"), note=None)
    except (ValueError, RecursionError, ReproError) as exc:  # kept in the bundle as it is; not summarised
        what = exc.what if isinstance(exc, ReproError) else f"not valid JSON ({exc})"
        return HardwareSection(source=PREFLIGHT, facts=None, note=f"not summarised: {what}"[:300])
