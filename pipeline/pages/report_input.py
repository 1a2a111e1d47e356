"""What an HTML report shows, gathered from a bundle or from runs on disk into one typed model.

    report = from_bundle(Path("bundles/x.tar.gz"), records_dir)   # verified: hashes, signature, verdict
    report = from_check(check, published_dir_of)                   # a bundle check already made (reproduce)
    report = from_runs(record, run_dirs, published_dir)            # a work folder's runs, before archiving

A bundle is read in bounded memory (pipeline/bundle/members.py) and checked by `verify_bundle`; its verdict
is recomputed from the logs inside against the reader's registry, the same code `bundle verify` runs.
Nothing from the bundle reaches the file system except the judge's inputs in a temporary folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.records.logparse import parse_text
from pipeline.records.model import Record
from pipeline.report.render import LabelledLog, load_published, read_run_logs
from pipeline.verdict.judge import Verdict

if TYPE_CHECKING:
    from pipeline.bundle.manifest import AttemptRow
    from pipeline.bundle.verify import BundleCheck


NOT_ARCHIVED = "not archived: runs on disk, no hashes or signature to check"


@dataclass(frozen=True, kw_only=True)
class ProgramRow:
    run: str
    trainer: str
    status: str  # identical | same-code | different | unpinned | absent | native | ...
    source: str | None  # the program file the run was launched with (run.yaml)
    sha256: str | None
    fingerprint: str | None


@dataclass(frozen=True, kw_only=True)
class ReportInput:
    title: str  # the bundle's or the work folder's name
    record: Record
    verdict: Verdict
    runs: tuple[LabelledLog, ...]  # same order as verdict.runs
    published: tuple[LabelledLog, ...]
    published_source: str
    check: BundleCheck | None  # what a reader may trust: the bundle check; None for runs on disk (nothing to check)
    program: tuple[ProgramRow, ...]
    environment: tuple[tuple[str, str], ...]  # (what, value): runtimes, environments, locks, data
    members: tuple[tuple[str, str], ...]  # a bundle's (member, sha256) from SHA256SUMS
    # a bundle's runs kept aside (aborted, failed): shown in the verdict and the runs, never judged
    attempts: tuple[AttemptRow, ...] = ()

    @property
    def proven(self) -> str:
        """The check's first line ("signed by ed25519:…", "integrity only: unsigned"), or why there is none."""
        return self.check.proven if self.check is not None else NOT_ARCHIVED

    @property
    def signature(self) -> str:  # valid | invalid | absent | unchecked | not a bundle
        return self.check.signature.status if self.check is not None else "not a bundle"


def _program_rows(verdict: Verdict, labels: list[str], sources: list[str | None]) -> tuple[ProgramRow, ...]:
    return tuple(ProgramRow(run=label, trainer=run.trainer, status=run.program.status, source=source,
                            sha256=run.program.sha256,
                            fingerprint=run.program.fingerprint)
                 for label, run, source in zip(labels, verdict.runs, sources))


def from_runs(record: Record, run_dirs: list[Path], published_dir: Path | None, title: str) -> ReportInput:
    from pipeline.runs.rundir import RunMeta
    from pipeline.verdict.judge import verify_runs

    run_dirs = [Path(p) for p in run_dirs]
    verdict = verify_runs(record, run_dirs)
    logs = read_run_logs(run_dirs)
    metas = [RunMeta.load_if_present(p) if p.is_dir() else None for p in run_dirs]
    published, source = load_published(record, published_dir)
    environment = _environment_of_metas(metas)
    program = _program_rows(verdict, [log.label for log in logs],
                            [(m.program_source or None) if m else None for m in metas])
    return ReportInput(title=title, record=record, verdict=verdict, runs=tuple(logs), published=tuple(published),
                       published_source=source, check=None, program=program,
                       environment=environment, members=())


def _environment_of_metas(metas) -> tuple[tuple[str, str], ...]:
    def joined(values) -> str:
        return ", ".join(sorted({str(v) for v in values if v})) or "—"

    known = [m for m in metas if m is not None]
    return (("runtime", joined(m.runtime for m in known)), ("environment", joined(m.environment for m in known)),
            ("environment lock sha256", joined(m.environment_lock_sha256 for m in known)),
            ("image", joined(m.image_id for m in known)),
            ("data lock sha256", joined(m.data_lock_sha256 for m in known)),
            ("world size", joined(m.world_size for m in known)))


def _sums(files) -> tuple[tuple[str, str], ...]:
    rows = []
    for line in files.get("SHA256SUMS", b"").decode("utf-8", "replace").splitlines():
        digest, sep, name = line.partition("  ")
        if sep:
            rows.append((name, digest))
    return tuple(rows)


def from_bundle(path: Path, records_dir: Path, published_dir_of) -> ReportInput | BundleCheck:
    """`published_dir_of(record)`: the folder of the record's published logs on this machine, or None.
    The bundle is read and checked once (`verify_bundle`), and the page made from that check (`from_check`)."""
    from pipeline.bundle.verify import verify_bundle

    return from_check(verify_bundle(path, records_dir), published_dir_of)


def from_check(check: BundleCheck, published_dir_of) -> ReportInput | BundleCheck:
    """The page of a bundle already checked: made from what the check recomputed, and only when it found no
    problem (`reproduce` hands its bundle check here, so the runs are not judged a third time). A check that
    failed is returned as it is: its page says what failed and shows nothing from inside the bundle."""
    from pipeline.bundle.judging import RUNS

    evidence = check.evidence
    if evidence is None:
        return check
    files, manifest, record, verdict = evidence.files, evidence.manifest, evidence.record, evidence.verdict
    run_ids = [run.source.removeprefix(f"{RUNS}/") for run in verdict.runs]
    logs = tuple(LabelledLog(i, parse_text(files.get(f"{RUNS}/{i}/log.txt", b""), f"{RUNS}/{i}/log.txt"))
                 for i in run_ids)
    published, source = load_published(record, published_dir_of(record))
    env, data = manifest.environment, manifest.data
    environment = (("runtime", ", ".join(env.runtimes) or "—"), ("environment", ", ".join(env.environments) or "—"),
                   ("environment lock", f"{env.lock_file or '—'} {env.lock_sha256 or ''}".strip()),
                   ("image", ", ".join(env.image_ids) or "—"), ("pip freeze", env.pip_freeze_source),
                   ("data", f"{data.dataset or '—'}: {len(data.shards)} shard(s), lock {data.lock_sha256 or '—'}"),
                   ("world size", ", ".join(sorted({str(r.world_size) for r in manifest.runs if r.world_size})) or "—"))
    sources = {p.id: p.source for p in evidence.program.runs}
    rows = _native_sha256(files, _program_rows(verdict, list(run_ids), [sources.get(i) for i in run_ids]))
    return ReportInput(title=manifest.name, record=record, verdict=verdict, runs=logs, published=tuple(published),
                       published_source=source, check=check, program=rows,
                       environment=environment, members=_sums(files), attempts=manifest.attempts)


def _native_sha256(files, rows: tuple[ProgramRow, ...]) -> tuple[ProgramRow, ...]:
    """The native trainer's code is identified by train/'s sha256 in run.yaml, not by a record's program pin."""
    from dataclasses import replace

    from pipeline.bundle.judging import RUNS, run_meta

    def sha256(row: ProgramRow) -> str | None:
        meta = run_meta(files, f"{RUNS}/{row.run}") if row.trainer == "native" and not row.sha256 else None
        return (meta.program_sha256 if meta is not None else None) or row.sha256

    return tuple(replace(row, sha256=sha256(row)) for row in rows)
