"""The record registry: manifests/records/<name>.yaml loaded once into frozen types.

    repro records list [--json]
    repro records show 2025-09-23_MuonCustomSizing [--json]
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from pipeline import REPO_ROOT
from pipeline.errors import InputError
from pipeline.manifest_io import Fields, check_schema_version, load_yaml

SCHEMA_VERSION = 1
LOSS_EVIDENCE = ("own", "parent")


def manifests_dir() -> Path:
    import os

    return Path(os.environ.get("REPRO_MANIFESTS", REPO_ROOT / "manifests"))


@dataclass(frozen=True)
class Upstream:
    repository: str
    licence: str
    commit: str = ""
    folder: str = ""
    renamed_by_commit: str = ""
    folder_after_rename: str = ""
    raw_url_template: str = ""

    def log_url(self, file: str) -> str:
        return self.raw_url_template.format(commit=self.commit, folder=self.folder, file=file)


@dataclass(frozen=True)
class PublishedLog:
    file: str
    sha256: str
    program_sha256: str
    program_bytes: int
    val_loss: float
    train_time_ms: int


@dataclass(frozen=True)
class ProgramPin:
    fingerprint: str  # "" = not pinned yet
    separator: str


@dataclass(frozen=True)
class Published:
    steps: int
    losses: tuple[float, ...]
    times_s: tuple[float, ...]
    mean_time_s: float
    ml_validation: str
    step_avg_ms: float | None = None
    peak_memory_allocated_mib: int | None = None
    parent_retimed_s: float | None = None


@dataclass(frozen=True)
class Hardware:
    gpu_model: str
    gpu_form_factor: str
    gpu_count: int
    interconnect: str
    driver: str = ""
    cuda_driver: str = ""


@dataclass(frozen=True)
class FlashAttentionPin:
    repository: str
    branch: str
    commit: str
    cutlass_commit: str
    subdirectory: str
    build_env: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Software:
    python: str = ""
    torch: str = ""
    torch_cuda: str = ""
    triton: str = ""
    flash_attention: FlashAttentionPin | None = None


@dataclass(frozen=True)
class DatasetRef:
    name: str
    train_shards: int
    val_shards: int
    val_tokens: int
    tokens_per_step: int


@dataclass(frozen=True)
class Rules:
    version: int
    target_val_loss: float
    p_value_max: float
    loss_evidence: str
    consistency_alpha: float
    consistency_required: tuple[str, ...]
    time_confidence: float
    time_tolerance: float
    compare_hardware: tuple[str, ...]
    compare_software: tuple[str, ...]


@dataclass(frozen=True)
class Record:
    name: str
    title: str
    date: str
    track: str
    description: str
    parent: str
    upstream: Upstream
    logs: tuple[PublishedLog, ...]
    program: ProgramPin
    published: Published
    hardware: Hardware
    software: Software
    environment: str
    dataset: DatasetRef
    rules: Rules
    path: Path

    @property
    def accepted_program_sha256(self) -> frozenset[str]:
        return frozenset(log.program_sha256 for log in self.logs)

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["path"] = str(self.path)
        return out


def _upstream(f: Fields) -> Upstream:
    f.only("repository", "licence", "commit", "folder", "renamed_by_commit", "folder_after_rename",
           "raw_url_template")
    return Upstream(repository=f.req("repository", str), licence=f.req("licence", str),
                    **{k: f.opt(k, str, "") for k in ("commit", "folder", "renamed_by_commit",
                                                       "folder_after_rename", "raw_url_template")})


def _log(f: Fields) -> PublishedLog:
    f.only("file", "sha256", "program_sha256", "program_bytes", "val_loss", "train_time_ms")
    return PublishedLog(file=f.req("file", str), sha256=f.sha256("sha256"),
                        program_sha256=f.sha256("program_sha256"), program_bytes=f.req("program_bytes", int),
                        val_loss=f.req("val_loss", float), train_time_ms=f.req("train_time_ms", int))


def _published(f: Fields) -> Published:
    f.only("steps", "losses", "times_s", "mean_time_s", "ml_validation", "step_avg_ms",
           "peak_memory_allocated_mib", "parent_retimed_s")
    losses, times = f.list_of("losses", float), f.list_of("times_s", float)
    if len(losses) != len(times):
        raise f.fail("times_s", f"has {len(times)} entries but losses has {len(losses)}",
                     "list one loss and one time per published run, in the same order")
    ml = f.req("ml_validation", str)
    if ml not in LOSS_EVIDENCE:
        raise f.fail("ml_validation", f"is {ml!r}", f"use one of: {', '.join(LOSS_EVIDENCE)}")
    return Published(steps=f.req("steps", int), losses=losses, times_s=times,
                     mean_time_s=f.req("mean_time_s", float), ml_validation=ml,
                     step_avg_ms=f.opt("step_avg_ms", float),
                     peak_memory_allocated_mib=f.opt("peak_memory_allocated_mib", int),
                     parent_retimed_s=f.opt("parent_retimed_s", float))


def _hardware(f: Fields) -> Hardware:
    f.only("gpu_model", "gpu_form_factor", "gpu_count", "interconnect", "driver", "cuda_driver")
    return Hardware(gpu_model=f.req("gpu_model", str), gpu_form_factor=f.req("gpu_form_factor", str),
                    gpu_count=f.req("gpu_count", int), interconnect=f.req("interconnect", str),
                    driver=f.opt("driver", str, ""), cuda_driver=f.opt("cuda_driver", str, ""))


def _software(f: Fields) -> Software:
    f.only("python", "torch", "torch_cuda", "triton", "flash_attention")
    fa = None
    if f.data.get("flash_attention") is not None:
        g = f.sub("flash_attention")
        g.only("repository", "branch", "commit", "cutlass_commit", "subdirectory", "build_env")
        env = g.opt("build_env", dict, {})
        fa = FlashAttentionPin(repository=g.req("repository", str), branch=g.req("branch", str),
                               commit=g.req("commit", str), cutlass_commit=g.req("cutlass_commit", str),
                               subdirectory=g.req("subdirectory", str),
                               build_env={str(k): str(v) for k, v in env.items()})
    return Software(
        python=f.opt("python", str, ""), torch=f.opt("torch", str, ""),
        torch_cuda=f.opt("torch_cuda", str, ""), triton=f.opt("triton", str, ""), flash_attention=fa)


def _dataset(f: Fields) -> DatasetRef:
    f.only("name", "train_shards", "val_shards", "val_tokens", "tokens_per_step")
    return DatasetRef(name=f.req("name", str), train_shards=f.req("train_shards", int),
                      val_shards=f.req("val_shards", int), val_tokens=f.req("val_tokens", int),
                      tokens_per_step=f.req("tokens_per_step", int))


def _rules(f: Fields) -> Rules:
    f.only("version", "target_val_loss", "p_value_max", "loss_evidence", "consistency_alpha", "consistency_required",
           "time_confidence", "time_tolerance", "compare_hardware", "compare_software")
    evidence = f.req("loss_evidence", str)
    if evidence not in LOSS_EVIDENCE:
        raise f.fail("loss_evidence", f"is {evidence!r}", f"use one of: {', '.join(LOSS_EVIDENCE)}")
    required = f.list_of("consistency_required", str)
    for item in required:
        if item not in ("record", "parent"):
            raise f.fail("consistency_required", f"names {item!r}", "list only: record, parent")
    for key in ("p_value_max", "consistency_alpha", "time_confidence"):
        value = f.req(key, float)
        if not 0 < value < 1:
            raise f.fail(key, f"is {value}, outside (0, 1)", "give a probability such as 0.01 or 0.95")
    return Rules(version=f.req("version", int), target_val_loss=f.req("target_val_loss", float),
                 p_value_max=f.req("p_value_max", float), loss_evidence=evidence,
                 consistency_alpha=f.req("consistency_alpha", float), consistency_required=required,
                 time_confidence=f.req("time_confidence", float), time_tolerance=f.req("time_tolerance", float),
                 compare_hardware=f.list_of("compare_hardware", str),
                 compare_software=f.list_of("compare_software", str))


def load_record_file(path: Path) -> Record:
    top = Fields(load_yaml(path), path)
    check_schema_version(top, SCHEMA_VERSION)
    top.only("schema_version", "name", "title", "date", "track", "description", "parent", "upstream", "logs",
             "program", "published", "hardware", "software", "environment", "dataset", "rules")
    name = top.req("name", str)
    if name != Path(path).stem:
        raise top.fail("name", f"is {name!r} but the file is {Path(path).name}",
                       "name the file <name>.yaml or correct the name field")
    program = top.sub("program")
    program.only("fingerprint", "separator")
    record = Record(
        name=name, title=top.req("title", str), date=top.req("date", str), track=top.req("track", str),
        description=top.req("description", str).strip(), parent=top.opt("parent", str, ""),
        upstream=_upstream(top.sub("upstream")),
        logs=tuple(_log(f) for f in top.items("logs", required=False)),
        program=ProgramPin(fingerprint=program.opt("fingerprint", str, ""), separator=program.req("separator", str)),
        published=_published(top.sub("published")), hardware=_hardware(top.sub("hardware")),
        software=_software(top.sub("software", required=False)), environment=top.req("environment", str),
        dataset=_dataset(top.sub("dataset")), rules=_rules(top.sub("rules")), path=Path(path))
    hw_fields = {f.name for f in dataclasses.fields(Hardware)}
    sw_fields = {f.name for f in dataclasses.fields(Software)} - {"flash_attention"}
    for key, allowed in (("compare_hardware", hw_fields), ("compare_software", sw_fields)):
        for item in getattr(record.rules, key):
            if item not in allowed:
                raise top.sub("rules").fail(key, f"names unknown field {item!r}",
                                            f"use fields of {key.split('_')[1]}: {', '.join(sorted(allowed))}")
    return record


def record_names() -> list[str]:
    return sorted(p.stem for p in (manifests_dir() / "records").glob("*.yaml"))


def load_record(name: str) -> Record:
    path = manifests_dir() / "records" / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(record_names()) or "none"
        raise InputError(f"unknown record {name!r}", f"use one of: {known} (see `repro records list`)")
    return load_record_file(path)


def load_parent(record: Record) -> Record | None:
    return load_record(record.parent) if record.parent else None
