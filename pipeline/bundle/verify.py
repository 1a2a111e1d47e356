"""Check a record bundle offline: `repro bundle verify BUNDLE.tar.gz [--pubkey PEM] [--require-signature]`.

Nothing in the bundle is trusted, and nothing from it is extracted:
1. members are read into memory, each size checked against its tar header first, with limits per
   member, in total and on their number (pipeline/bundle/members.py); unsafe names and types are
   problems;
2. every member's sha256 is recomputed against SHA256SUMS (a changed, added or removed file is named)
   and the detached signature is checked (pipeline/bundle/trust.py);
3. manifest.yaml is loaded through its typed model, validated field by field;
4. the verdict and every section derived from the runs' files are recomputed from the members
   (pipeline/bundle/judging.py, the code `repro archive` ran) against the record manifest of the
   VERIFIER'S registry, and compared with the manifest as data: findings (code, severity, data), not
   sentences, so a reworded message breaks no bundle.
Every problem is reported, each with the member it concerns; any problem makes the bundle fail (exit 1).
What was proven comes first: "integrity only: unsigned" or "signed by <key fingerprint>".

    repro bundle show BUNDLE.tar.gz      # what a bundle says, without checking it
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pipeline.bundle.archive import MANIFEST, MAX_MEMBER_BYTES, NAME_RE
from pipeline.bundle.judging import (
    ATTEMPTS,
    DATA_LOCK,
    RUNS,
    attempt_rows,
    data_lock_digest_of,
    data_section,
    hardware_section,
    judge_members,
    program_section,
    run_ids_in,
    run_meta,
    run_rows,
    verdict_findings,
)
from pipeline.bundle.manifest import BundleManifest, ProgramSection
from pipeline.bundle.members import ARCHIVE, Members, Problem
from pipeline.bundle.members import read_members as _read_members
from pipeline.bundle.trust import SIGNATURE, SUMS, SignatureCheck, check_signature, choose_record
from pipeline.errors import CheckFailed, InputError, ReproError
from pipeline.findings import Finding
from pipeline.hashing import sha256_bytes
from pipeline.records.model import Record
from pipeline.regular_file import kind_of
from pipeline.sha256sums import parse_sums
from pipeline.verdict.judge import Verdict

MAX_TOTAL_BYTES = 2 << 30


def known_rules_versions() -> tuple[int, ...]:
    """The rules versions this tool's judge implements (an unknown one is refused, never guessed at)."""
    from pipeline.verdict import judge

    return tuple(sorted(judge.JUDGES))


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """A bundle's members and what the check recomputed from them against the verifier's record."""

    files: Mapping[str, bytes]
    manifest: BundleManifest
    record: Record
    verdict: Verdict
    program: ProgramSection


@dataclass(frozen=True, kw_only=True)
class BundleCheck:
    path: str
    name: str | None
    members: tuple[str, ...]
    problems: tuple[Problem, ...]
    notes: tuple[str, ...]
    signature: SignatureCheck
    judged_against: str | None  # the verifier's record manifest the verdict was recomputed with
    manifest_outcome: str | None
    recomputed_outcome: str | None
    # what the check recomputed, kept for a page to show (one pass); None whenever the check found a problem
    evidence: Evidence | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def proven(self) -> str:
        """The first line of the output: what a passing check proves."""
        return self.signature.first_line()

    def to_dict(self) -> dict:
        return {"proven": self.proven, "path": self.path, "name": self.name, "ok": self.ok,
                "signature": self.signature.status, "signed_by": self.signature.fingerprint,
                "signature_key_source": self.signature.key_source, "judged_against": self.judged_against,
                "manifest_outcome": self.manifest_outcome, "recomputed_outcome": self.recomputed_outcome,
                "problems": [{"member": p.member, "problem": p.problem, "fix": p.fix or None} for p in self.problems],
                "notes": list(self.notes), "members": list(self.members)}


def read_members(path: Path, max_member_bytes: int = MAX_MEMBER_BYTES,
                 max_total_bytes: int = MAX_TOTAL_BYTES) -> Members:
    path = Path(path)
    try:
        exists = path.is_file()
    except OSError as exc:
        from pipeline.errors import os_error

        raise os_error(path, exc, "give the path of a .tar.gz written by `repro archive`") from None
    if not exists and kind_of(path) in (None, "folder"):  # a FIFO or a device: open_regular says what it is
        what = "is a directory, not a bundle file" if path.is_dir() else "not found"
        raise InputError(f"bundle {path} {what}", "give the path of a .tar.gz written by `repro archive`")
    return _read_members(path, max_member_bytes, max_total_bytes)


def check_sums(files: Mapping[str, bytes], complete: bool = True) -> list[Problem]:
    """Every member against SHA256SUMS. `complete`: the whole archive was read; if not, a listed member not found
    may lie past where reading stopped, and is said to be unread rather than removed."""
    if SUMS not in files:
        return [Problem(SUMS, "missing: the bundle has no list of hashes to check against")]
    sums = parse_sums(files[SUMS].decode("utf-8", errors="replace"))
    problems = [Problem(SUMS, problem) for problem in sums.problems]
    listed = sums.digests
    for name, digest in sorted(listed.items()):
        if name not in files:
            problems.append(Problem(name[:300], "listed in SHA256SUMS but not in the bundle (removed after archiving)"
                                    if complete else "listed in SHA256SUMS, not read: the archive stopped before it"))
        elif sha256_bytes(files[name]) != digest:
            problems.append(Problem(name, "sha256 differs from SHA256SUMS (changed after archiving)"))
    for name in sorted(files):
        if name not in listed and name not in (SUMS, SIGNATURE):
            problems.append(Problem(name, "not listed in SHA256SUMS (added after archiving)"))
    return problems


def load_manifest(files: Mapping[str, bytes], bundle: Path) -> tuple[BundleManifest | None, list[Problem]]:
    if MANIFEST not in files:
        return None, [Problem(MANIFEST, "missing")]
    try:
        return BundleManifest.load(files[MANIFEST], f"{bundle.name}: {MANIFEST}"), []
    except ReproError as exc:  # the reader cannot mend someone's bundle: the fix is its author's to make
        what = exc.what.removeprefix(f"{bundle.name}: {MANIFEST}: ")
        return None, [Problem(MANIFEST, what, f"for the bundle's author: {exc.fix}" if exc.fix else "")]


# ---- comparing what the files say with what the manifest says -------------------------------------------

def _show(value) -> str:
    if isinstance(value, Finding):
        value = value.to_dict()
    if dataclasses.is_dataclass(value):
        value = dataclasses.asdict(value)
    return json.dumps(value, sort_keys=True, default=str)[:160]


def differences(theirs, mine, path: str, limit: int = 6) -> list[str]:
    """Dotted paths where the manifest's typed value and the recomputed one differ (the first few)."""
    if type(theirs) is type(mine) and dataclasses.is_dataclass(mine) and not isinstance(mine, Finding):
        out: list[str] = []
        for f in dataclasses.fields(mine):
            out += differences(getattr(theirs, f.name), getattr(mine, f.name), f"{path}.{f.name}", limit - len(out))
            if len(out) >= limit:
                break
        return out
    if isinstance(theirs, tuple) and isinstance(mine, tuple) and len(theirs) == len(mine):
        out = []
        for i, (a, b) in enumerate(zip(theirs, mine)):
            out += differences(a, b, f"{path}[{i}]", limit - len(out))
            if len(out) >= limit:
                break
        return out
    return [] if theirs == mine else [f"{path} is {_show(theirs)}, but the files give {_show(mine)}"]


def compare_findings(theirs: tuple[Finding, ...], mine: tuple[Finding, ...], where: str) -> list[str]:
    """Findings as a multiset of (code, severity, data): their order and their sentences do not matter."""
    key = Finding.sort_key
    a, b = sorted(theirs, key=key), sorted(mine, key=key)
    if a == b:
        return []
    missing = [f for f in b if f not in a]
    extra = [f for f in a if f not in b]
    out = [f"{where} lacks {f.code} ({f.severity}) {_show(dict(f.data))}, which the logs inside give"
           for f in missing[:4]]
    out += [f"{where} has {f.code} ({f.severity}) {_show(dict(f.data))}, which the logs inside do not give"
            for f in extra[:4]]
    return out or [f"{where} lists the same findings a different number of times"]


def _rows_by_id(rows) -> dict:
    return {r.id: r for r in rows}


def _compare_rows(kind: str, theirs, mine) -> list[Problem]:
    problems = []
    theirs_by, mine_by = _rows_by_id(theirs), _rows_by_id(mine)
    for run_id, row in mine_by.items():
        if run_id not in theirs_by:
            continue  # reported as "in the bundle but not listed"
        other = theirs_by[run_id]
        for f in dataclasses.fields(row):
            a, b = getattr(other, f.name), getattr(row, f.name)
            if f.name == "findings":
                problems += [Problem(MANIFEST, text) for text in compare_findings(a, b, f"{kind}[{run_id}].findings")]
            elif a != b:
                problems.append(Problem(MANIFEST, f"{kind}[{run_id}].{f.name} is {a!r}, but the run's files give "
                                                  f"{b!r}"))
    return problems


def _listed_vs_present(files: Mapping[str, bytes], folder: str, listed: list[str], section: str) -> tuple[
        list[str], list[Problem]]:
    present = run_ids_in(files, folder)
    problems = [Problem(f"{folder}/{i}", f"listed in manifest.yaml {section} but absent from the bundle")
                for i in sorted(set(listed) - set(present))]
    problems += [Problem(f"{folder}/{i}", f"in the bundle but not listed in manifest.yaml {section}")
                 for i in present if i not in listed]
    good = []
    for run_id in present:
        if not NAME_RE.match(run_id):
            problems.append(Problem(f"{folder}/{run_id[:80]}", "not a run id (letters, digits, '.', '_', '-'; at most "
                                                               "121 characters): repro never writes such a folder"))
        elif run_id in listed:
            good.append(run_id)
    return good, problems


def recompute(files: Mapping[str, bytes], manifest: BundleManifest, records_dir: Path
              ) -> tuple[str | None, str | None, list[Problem], list[str], Evidence | None]:
    """(recomputed outcome, the record file judged against, problems, notes, what was recomputed)."""
    problems: list[Problem] = []
    notes: list[str] = []
    known = known_rules_versions()
    if manifest.verdict.rules_version not in known:
        return None, None, [Problem(MANIFEST, f"verdict.rules_version is {manifest.verdict.rules_version}; this tool "
                                              f"judges by rules version(s) {', '.join(map(str, known))}",
                                    "upgrade repro to a version that knows these rules, then verify again")], \
            notes, None
    choice = choose_record(files, manifest.record, records_dir)
    problems += choice.problems
    notes += choice.notes
    if choice.record is None:
        return None, None, problems, notes, None
    record = choice.record
    if record.rules.version != manifest.verdict.rules_version:
        notes.append(f"the bundle was judged by rules version {manifest.verdict.rules_version}; your registry's "
                     f"{record.name} uses version {record.rules.version}, by which it was recomputed")
    run_ids, more = _listed_vs_present(files, RUNS, [r.id for r in manifest.runs], "runs")
    problems += more
    attempt_ids, more = _listed_vs_present(files, ATTEMPTS, [a.id for a in manifest.attempts], "attempts")
    problems += more
    if not run_ids:
        return None, str(record.path), problems + [Problem("runs/", "the bundle holds no runs to judge")], notes, None
    try:
        with judge_members(files, record, run_ids, attempt_ids) as judged:
            mine = judged.verdict
            theirs = manifest.verdict
            if theirs.outcome != mine.outcome:
                problems.append(Problem(MANIFEST, f"verdict outcome says {theirs.outcome!r}, but the logs inside "
                                                  f"give {mine.outcome!r}"))
            problems += [Problem(MANIFEST, text)
                         for text in compare_findings(theirs.findings, verdict_findings(mine), "verdict.findings")]
            listed = {r.id: r.not_archived for r in manifest.runs}
            problems += _compare_rows("runs", [r for r in manifest.runs if r.id in run_ids],
                                      run_rows(files, judged, listed))
            problems += _compare_rows("attempts", [a for a in manifest.attempts if a.id in attempt_ids],
                                      attempt_rows(files, judged))
            program = program_section(files, record, judged)
            theirs_prog = {r.id: r for r in manifest.program.runs}
            for row in program.runs:
                if row.id in theirs_prog:
                    problems += [Problem(MANIFEST, d) for d in differences(theirs_prog[row.id], row,
                                                                           f"program.runs[{row.id}]")]
            outcome = mine.outcome
    except ReproError as exc:
        return None, str(record.path), problems + [Problem(RUNS, f"the verdict cannot be recomputed: {exc.what}",
                                                           exc.fix or "")], notes, None
    problems += _check_sections(files, manifest, notes)
    return outcome, str(record.path), problems, notes, Evidence(files=files, manifest=manifest, record=record,
                                                                verdict=mine, program=program)


def _check_sections(files: Mapping[str, bytes], manifest: BundleManifest, notes: list[str]) -> list[Problem]:
    """The data, hardware and environment sections against the members they summarise."""
    problems = []
    try:
        metas = [run_meta(files, f"{RUNS}/{r.id}") for r in manifest.runs if f"{RUNS}/{r.id}/run.yaml" in files]
        data = data_section(files, metas)
    except ReproError as exc:
        problems.append(Problem(DATA_LOCK, f"unreadable: {exc.what}", exc.fix or ""))
    else:
        problems += [Problem(MANIFEST, d) for d in differences(manifest.data, data, "data")]
        for claim in data.runs_claim:
            if data.lock_sha256 and claim != data.lock_sha256:
                notes.append(f"a run's run.yaml names data lock {claim[:12]}…, not the bundled lock "
                             f"{data.lock_sha256[:12]}…")
    problems += [Problem(MANIFEST, d) for d in differences(manifest.hardware, hardware_section(files), "hardware")]
    env = manifest.environment
    if env.lock_file:
        if env.lock_file not in files:
            problems.append(Problem(env.lock_file, "named by manifest.yaml environment.lock_file but absent"))
        else:
            digest = sha256_bytes(files[env.lock_file])
            if digest != env.lock_sha256:
                problems.append(Problem(MANIFEST, f"environment.lock_sha256 is {env.lock_sha256}, the bundled lock "
                                                  f"gives {digest}"))
            for claim in env.runs_claim_lock_sha256:
                if claim != digest:
                    notes.append(f"a run's run.yaml names environment lock {claim[:12]}…, not the bundled lock "
                                 f"{digest[:12]}…")
    for member in (env.image_state, env.pip_freeze):
        if member and member not in files:
            problems.append(Problem(member, "named by manifest.yaml environment but absent"))
    return problems


# ---- the check ----------------------------------------------------------------------------------------------

def verify_bundle(path: Path, records_dir: Path, pubkey: Path | None = None, require_signature: bool = False,
                  max_member_bytes: int = MAX_MEMBER_BYTES, max_total_bytes: int = MAX_TOTAL_BYTES) -> BundleCheck:
    """Check a bundle; `records_dir` is the verifier's registry (Workspace.records_dir), the only rules used."""
    path = Path(path)
    read = read_members(path, max_member_bytes, max_total_bytes)
    manifest, problems = _integrity(read, path)
    notes: list[str] = []
    signature = check_signature(read.files, manifest, pubkey)
    problems += signature.problems
    if require_signature and signature.status != "valid" and not signature.problems:
        problems.append(Problem(SIGNATURE, "--require-signature: the bundle is not signed (no SHA256SUMS.sig)"
                                if signature.status == "absent" else
                                f"--require-signature: the signature is {signature.status}",
                                "ask the bundle's author for a signed bundle (`repro archive --sign-key`)"))
    outcome = judged_against = evidence = None
    if not read.complete:
        notes.append(f"the verdict was not recomputed: reading stopped ({read.stopped})")
    elif manifest is not None:
        outcome, judged_against, more, more_notes, evidence = recompute(read.files, manifest, records_dir)
        problems += more
        notes += more_notes
    return BundleCheck(path=str(path), name=read.top, members=tuple(sorted(read.files)), problems=tuple(problems),
                       notes=tuple(notes), signature=signature,
                       judged_against=judged_against, manifest_outcome=manifest.verdict.outcome if manifest else None,
                       recomputed_outcome=outcome,
                       evidence=evidence if not problems else None)


def _integrity(read: Members, path: Path) -> tuple[BundleManifest | None, list[Problem]]:
    """The manifest and everything wrong with the bundle as bytes: a damaged or truncated archive, members whose
    hashes differ from SHA256SUMS (or that it does not list), a manifest that does not load or names another
    bundle. Both `bundle verify` and `bundle show` start here, so show never presents a damaged bundle as whole."""
    problems = list(read.problems) + check_sums(read.files, read.complete)
    manifest, manifest_problems = load_manifest(read.files, path)
    problems += manifest_problems
    if manifest is not None and read.top and manifest.name != read.top:
        problems.append(Problem(MANIFEST, f"name is {manifest.name!r} but the bundle folder is {read.top!r}"))
    return manifest, problems


@dataclass(frozen=True)
class BundleSummary:
    path: str
    manifest: BundleManifest
    members: tuple[tuple[str, int], ...]  # (name inside the bundle folder, size)
    problems: tuple[Problem, ...] = ()  # integrity (_integrity): a bundle with any is not what it says

    @property
    def intact(self) -> bool:
        return not self.problems


def show_bundle(path: Path) -> BundleSummary:
    """What a bundle says about itself (its manifest and member list), and whether its bytes are intact; the
    verdict is not recomputed (that is `verify_bundle`)."""
    path = Path(path)
    read = read_members(path)
    if MANIFEST not in read.files:
        why = f" ({read.problems[0]})" if read.problems else ""
        # not intact, like any damaged bundle (exit 1, as `bundle show --help` says), only with nothing to show
        raise CheckFailed(f"{path} has no readable {MANIFEST}{why}", "check it with `repro bundle verify`")
    BundleManifest.load(read.files[MANIFEST], f"{path}: {MANIFEST}")  # a bad field: InputError naming it
    manifest, problems = _integrity(read, path)
    return BundleSummary(str(path), manifest, tuple(read.listing), tuple(problems))


__all__ = ["ARCHIVE", "BundleCheck", "BundleSummary", "Problem", "check_sums", "read_members", "show_bundle",
           "verify_bundle", "data_lock_digest_of"]
