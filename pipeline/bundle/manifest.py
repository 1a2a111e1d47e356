"""The bundle's manifest.yaml as one typed model: `repro archive` dumps it, `bundle verify`/`show` load it.

    manifest = BundleManifest.load(member_bytes, "bundle.tar.gz: manifest.yaml")   # validated, or ManifestError
    member_bytes = manifest.dump()

Loading goes through the one safe YAML reader (pipeline/yamlio.py: no aliases, no duplicate keys, a size
limit) and then through `Fields`, so a wrong field is named by its dotted path ("runs[1].exit_code") and
an unknown one is an error, like in every other manifest. Nothing reads the manifest as a dict.

Schema 2 stores the verdict as findings (code, severity, data) with the sentences rendered from them
only for people (`reasons`): `bundle verify` compares findings, so rewording a message breaks no bundle.
Paths inside are relative to the bundle or to the work folder that held the runs; never the writer's
absolute paths.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.errors import ManifestError
from pipeline.findings import Finding
from pipeline.manifest_io import Fields
from pipeline.yamlio import dump, load_bytes, require_mapping

SCHEMA_VERSION = 2
KIND = "repro-record-bundle"
from pipeline.verdict.outcomes import VerdictOutcome  # noqa: E402

_REWRITE = "the manifest was not written by this tool or was edited; re-archive the runs with `repro archive`"
_MAX_DEPTH = 32


def _plain(value: Any, where: str, depth: int = 0) -> Any:
    """Free-form facts (preflight facts, host environment) as plain JSON values, bounded in depth."""
    if depth > _MAX_DEPTH:
        raise ValueError(f"{where} is nested more than {_MAX_DEPTH} levels deep")
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (list, tuple)):
        return [_plain(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        return {str(k): _plain(v, f"{where}.{k}", depth + 1) for k, v in value.items()}
    return str(value)  # dates YAML typed for us, paths: kept as text


def finite(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None


@dataclass(frozen=True)
class Tool:
    name: str
    version: str


@dataclass(frozen=True, kw_only=True)
class RecordPin:
    """The record the verdict was judged against, pinned by name and manifest hash."""

    name: str
    title: str
    parent: str | None
    manifest: str  # the bundled copy, for reference only: verification judges by the verifier's registry
    manifest_sha256: str
    parent_manifest: str | None
    parent_manifest_sha256: str | None
    target_val_loss: float
    p_value_max: float
    rules_version: int


@dataclass(frozen=True)
class VerdictSection:
    outcome: VerdictOutcome
    rules_version: int
    findings: tuple[Finding, ...]  # what verification compares
    reasons: tuple[str, ...]  # the findings as sentences when archived (for people; never compared)


@dataclass(frozen=True, kw_only=True)
class RunRow:
    id: str
    status: str
    exit_code: int | None
    trainer: str
    runtime: str | None
    preset: str | None
    world_size: int | None
    final_val_loss: float | None
    train_time_s: float | None
    steps: str
    started_at: str | None
    ended_at: str | None
    not_archived: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class AttemptRow:
    id: str
    status: str
    exit_code: int | None
    steps: str
    findings: tuple[Finding, ...]
    folder: str


@dataclass(frozen=True, kw_only=True)
class EnvironmentSection:
    runtimes: tuple[str, ...]
    image_ids: tuple[str, ...]
    environments: tuple[str, ...]
    lock_file: str | None
    lock_sha256: str | None
    runs_claim_lock_sha256: tuple[str, ...]
    image_state: str | None
    pip_freeze: str | None
    pip_freeze_source: str
    host_environment: Mapping[str, Any] | None


@dataclass(frozen=True)
class HardwareSection:
    source: str | None  # "preflight.json", or None when no report was found
    facts: Mapping[str, Any] | None  # the report's host facts (its checks and environment left out)
    note: str | None  # why there are no facts


@dataclass(frozen=True)
class Shard:
    name: str
    size: int | None
    sha256: str | None
    tokens: int | None


@dataclass(frozen=True, kw_only=True)
class DataSection:
    dataset: str | None
    lock_file: str | None
    lock_sha256: str | None
    runs_claim: tuple[str, ...]
    shards: tuple[Shard, ...]
    generator: Any  # how synthetic shards were made (the lock's generator mapping), None for real data


@dataclass(frozen=True, kw_only=True)
class ProgramRun:
    id: str
    trainer: str
    status: str
    sha256_in_log: str | None
    fingerprint_in_log: str | None
    sha256_run_yaml: str | None
    fingerprint_run_yaml: str | None
    source: str | None


@dataclass(frozen=True)
class ProgramSection:
    record_accepted_sha256: tuple[str, ...]
    record_fingerprint: str | None
    runs: tuple[ProgramRun, ...]


@dataclass(frozen=True)
class Redaction:
    member: str
    count: int


@dataclass(frozen=True)
class SignatureInfo:
    algorithm: str
    file: str
    public_key: str  # base64 of the raw ed25519 public key


@dataclass(frozen=True, kw_only=True)
class BundleManifest:
    schema_version: int
    kind: str
    name: str
    created: str | None
    tool: Tool
    paths: str  # how paths inside are written
    record: RecordPin
    verdict: VerdictSection
    runs: tuple[RunRow, ...]
    attempts: tuple[AttemptRow, ...]
    environment: EnvironmentSection
    hardware: HardwareSection
    data: DataSection
    program: ProgramSection
    redactions: tuple[Redaction, ...]
    signature: SignatureInfo | None

    # ---- writing ------------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        def plain(value):
            if isinstance(value, Finding):
                return value.to_dict()
            if isinstance(value, VerdictOutcome):
                return value.value  # a plain string in the file
            if dataclasses.is_dataclass(value):
                return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
            if isinstance(value, (list, tuple)):
                return [plain(v) for v in value]
            if isinstance(value, Mapping):
                return {k: plain(v) for k, v in value.items()}
            return value

        return plain(self)

    def dump(self) -> bytes:
        return dump(self.to_dict(), sort_keys=False, allow_unicode=True, width=120).encode("utf-8")

    # ---- reading ------------------------------------------------------------------------------------

    @classmethod
    def load(cls, data: bytes, source: str) -> BundleManifest:
        """Parse and validate; raises YamlRefused or ManifestError naming `source` and the field."""
        top = Fields(require_mapping(load_bytes(data, source, "bundle_member"), source, "bundle manifest"),
                     Path(source))
        version = top.req("schema_version", int, _REWRITE)
        if version != SCHEMA_VERSION:
            hint = ("it was written by an older repro that stored the verdict as sentences; re-archive the runs "
                    "with this version of `repro archive`" if version < SCHEMA_VERSION
                    else "upgrade repro to a version that reads it")
            raise top.fail("schema_version", f"is {version}; this tool reads bundle schema {SCHEMA_VERSION}", hint)
        kind = top.req("kind", str)
        if kind != KIND:
            raise top.fail("kind", f"is {kind!r}, not {KIND!r}", "give a bundle written by `repro archive`")
        top.only(*(f.name for f in dataclasses.fields(cls)))
        try:
            return _load(top, version, kind)
        except (ValueError, TypeError) as exc:  # a finding's or a fact's value of the wrong kind
            raise ManifestError(Path(source), "", str(exc), _REWRITE) from None


def _fields(f: Fields, cls) -> None:
    f.only(*(x.name for x in dataclasses.fields(cls)))


def _findings(f: Fields, key: str) -> tuple[Finding, ...]:
    out = []
    for item in f.items(key, required=False):
        item.only("code", "severity", "data")
        out.append(Finding(code=item.req("code", str), severity=item.req("severity", str),
                           data=_plain(item.opt("data", dict, {}), item.name("data"))))
    return tuple(out)


def _str_or_none(f: Fields, key: str) -> str | None:
    return f.opt(key, str)


def _load(top: Fields, version: int, kind: str) -> BundleManifest:
    # Each section is read in the order the fields were always checked, so a manifest with several
    # wrong fields still names the same one first; the tool's keys are vetted first and read last.
    tool = top.sub("tool")
    _fields(tool, Tool)
    record = _record(top.sub("record"))
    verdict = _verdict(top.sub("verdict"))
    runs = _run_rows(top)
    attempts = _attempt_rows(top)
    environment = _environment(top.sub("environment"))
    hardware = _hardware(top.sub("hardware"))
    data = _data(top.sub("data"))
    program = _program(top.sub("program"))
    redactions = _redactions(top)
    signature = _signature(top)
    tool_info = Tool(name=tool.req("name", str), version=tool.req("version", str))
    return BundleManifest(schema_version=version, kind=kind, name=top.req("name", str),
                          created=_str_or_none(top, "created"), tool=tool_info, paths=top.req("paths", str),
                          record=record, verdict=verdict, runs=runs, attempts=attempts,
                          environment=environment, hardware=hardware, data=data, program=program,
                          redactions=redactions, signature=signature)


def _record(rec: Fields) -> RecordPin:
    _fields(rec, RecordPin)
    return RecordPin(name=rec.req("name", str), title=rec.req("title", str), parent=_str_or_none(rec, "parent"),
                     manifest=rec.req("manifest", str), manifest_sha256=rec.sha256("manifest_sha256"),
                     parent_manifest=_str_or_none(rec, "parent_manifest"),
                     parent_manifest_sha256=rec.sha256("parent_manifest_sha256", required=False),
                     target_val_loss=rec.req("target_val_loss", float), p_value_max=rec.req("p_value_max", float),
                     rules_version=rec.req("rules_version", int))


def _verdict(ver: Fields) -> VerdictSection:
    _fields(ver, VerdictSection)
    outcome = ver.req("outcome", str)
    if outcome not in tuple(VerdictOutcome):
        raise ver.fail("outcome", f"is {outcome!r}", f"one of: {', '.join(VerdictOutcome)}")
    return VerdictSection(outcome=VerdictOutcome(outcome), rules_version=ver.req("rules_version", int),
                          findings=_findings(ver, "findings"), reasons=ver.list_of("reasons", str, False))


def _run_rows(top: Fields) -> tuple[RunRow, ...]:
    runs = []
    for r in top.items("runs"):
        _fields(r, RunRow)
        runs.append(RunRow(id=r.req("id", str), status=r.req("status", str), exit_code=r.opt("exit_code", int),
                           trainer=r.req("trainer", str), runtime=_str_or_none(r, "runtime"),
                           preset=_str_or_none(r, "preset"), world_size=r.opt("world_size", int),
                           final_val_loss=r.opt("final_val_loss", float), train_time_s=r.opt("train_time_s", float),
                           steps=r.req("steps", str), started_at=_str_or_none(r, "started_at"),
                           ended_at=_str_or_none(r, "ended_at"), not_archived=r.list_of("not_archived", str, False)))
    return tuple(runs)


def _attempt_rows(top: Fields) -> tuple[AttemptRow, ...]:
    attempts = []
    for a in top.items("attempts", required=False):
        _fields(a, AttemptRow)
        attempts.append(AttemptRow(id=a.req("id", str), status=a.req("status", str), exit_code=a.opt("exit_code", int),
                                   steps=a.req("steps", str), findings=_findings(a, "findings"),
                                   folder=a.req("folder", str)))
    return tuple(attempts)


def _environment(env: Fields) -> EnvironmentSection:
    _fields(env, EnvironmentSection)
    host = env.opt("host_environment", dict)
    return EnvironmentSection(
        runtimes=env.list_of("runtimes", str, False), image_ids=env.list_of("image_ids", str, False),
        environments=env.list_of("environments", str, False), lock_file=_str_or_none(env, "lock_file"),
        lock_sha256=env.sha256("lock_sha256", required=False),
        runs_claim_lock_sha256=env.list_of("runs_claim_lock_sha256", str, False),
        image_state=_str_or_none(env, "image_state"), pip_freeze=_str_or_none(env, "pip_freeze"),
        pip_freeze_source=env.req("pip_freeze_source", str),
        host_environment=_plain(host, env.name("host_environment")) if host is not None else None)


def _hardware(hw: Fields) -> HardwareSection:
    _fields(hw, HardwareSection)
    facts = hw.opt("facts", dict)
    return HardwareSection(source=_str_or_none(hw, "source"),
                           facts=_plain(facts, hw.name("facts")) if facts is not None else None,
                           note=_str_or_none(hw, "note"))


def _data(dat: Fields) -> DataSection:
    _fields(dat, DataSection)
    shards = []
    for s in dat.items("shards", required=False):
        _fields(s, Shard)
        shards.append(Shard(name=s.req("name", str), size=s.opt("size", int), sha256=s.sha256("sha256", False),
                            tokens=s.opt("tokens", int)))
    return DataSection(dataset=_str_or_none(dat, "dataset"), lock_file=_str_or_none(dat, "lock_file"),
                       lock_sha256=dat.sha256("lock_sha256", required=False),
                       runs_claim=dat.list_of("runs_claim", str, False), shards=tuple(shards),
                       generator=_plain(dat.data.get("generator"), dat.name("generator")))


def _program(prog: Fields) -> ProgramSection:
    _fields(prog, ProgramSection)
    prog_runs = []
    for p in prog.items("runs", required=False):
        _fields(p, ProgramRun)
        prog_runs.append(ProgramRun(**{k: p.opt(k, str) for k in ("sha256_in_log", "fingerprint_in_log",
                                                                   "sha256_run_yaml", "fingerprint_run_yaml",
                                                                   "source")},
                                    id=p.req("id", str), trainer=p.req("trainer", str), status=p.req("status", str)))
    return ProgramSection(record_accepted_sha256=prog.list_of("record_accepted_sha256", str, False),
                          record_fingerprint=_str_or_none(prog, "record_fingerprint"), runs=tuple(prog_runs))


def _redactions(top: Fields) -> tuple[Redaction, ...]:
    redactions = []
    for x in top.items("redactions", required=False):
        _fields(x, Redaction)
        redactions.append(Redaction(member=x.req("member", str), count=x.req("count", int)))
    return tuple(redactions)


def _signature(top: Fields) -> SignatureInfo | None:
    """None for an unsigned bundle; only ed25519 is read, so another algorithm is refused here."""
    if top.data.get("signature") is None:
        return None
    sig = top.sub("signature")
    _fields(sig, SignatureInfo)
    signature = SignatureInfo(algorithm=sig.req("algorithm", str), file=sig.req("file", str),
                              public_key=sig.req("public_key", str))
    if signature.algorithm != "ed25519":
        raise sig.fail("algorithm", f"is {signature.algorithm!r}", "bundles are signed with ed25519")
    return signature
