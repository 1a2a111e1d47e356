"""The record registry: manifests/records/<name>.yaml loaded once into frozen types.

    repro records list [--json]
    repro records show 2025-09-23_MuonCustomSizing [--json]
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.errors import InputError
from pipeline.manifest_io import Fields, check_schema_version, load_yaml
from pipeline.records.data_need import DataNeed

SCHEMA_VERSION = 1
# rules.version -> the loss evidence kinds it knows (pipeline/records/eras.py says what each means)
EVIDENCE_BY_VERSION = {1: ("own", "parent"), 2: ("own", "parent", "single-run", "retiming", "quoted", "baseline"),
                       3: ("own", "parent", "single-run", "one-run", "retiming", "quoted", "baseline")}
LOSS_EVIDENCE = EVIDENCE_BY_VERSION[max(EVIDENCE_BY_VERSION)]
TRAINERS = ("record", "native")
# What a published log is to the record (`logs[].role`): one of its runs (its loss and time judged together), or
# the re-timing its README declares on another software or hardware version (pipeline/records/selection.py,
# rule 4): the record's official time, its loss standing on the runs.
LOG_ROLES = ("run", "retiming")
# A record name is one file name in the registry: no folder, no '..', nothing a shell or URL would mangle.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


def check_record_name(name: str, what: str = "record name") -> str:
    """`name` when it is a plain record name (one path component); InputError before anything is opened."""
    if not isinstance(name, str) or not NAME_RE.match(name) or ".." in name:
        raise InputError(f"{what} {name!r} is not a record name (letters, digits, '.', '_' and '-', one path "
                         "component, no '..')", "give a name from `repro records list`")
    return name


def _finite(f: Fields, key: str, value: float) -> float:
    if not math.isfinite(value):
        raise f.fail(key, f"is {value}, not a finite number", f"write {f.name(key)} as an ordinary number")
    return value


def _positive(f: Fields, key: str, value: float | int | None) -> float | int | None:
    """Times and step counts: finite and above zero (a time of 0 would make every ratio infinite)."""
    if value is None:
        return None
    if not math.isfinite(value) or value <= 0:
        raise f.fail(key, f"is {value}, it must be a finite number above zero",
                     f"write the measured value of {f.name(key)} (seconds, milliseconds or steps), above 0")
    return value


@dataclass(frozen=True, kw_only=True)
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
class ProgramFilePin:
    name: str
    sha256: str
    bytes: int


@dataclass(frozen=True, kw_only=True)
class PublishedLog:
    file: str
    sha256: str
    program_sha256: str  # "" for a log without program text (imported 2024 logs)
    program_bytes: int
    val_loss: float | None  # None: the log prints no final validation loss (imported history)
    train_time_ms: int | None
    # Written by `repro records import` (pipeline/records/importer.py): optional for hand-written logs.
    fingerprint: str = ""
    torch: str = ""
    missing: tuple[str, ...] = ()  # what the log lacks: program, pytorch version, train time, ...
    # the program's files when it is a set (train_gpt.py, triton_kernels.py, ...): name, sha256, bytes each
    files: tuple[ProgramFilePin, ...] = ()
    role: str = "run"  # one of LOG_ROLES


@dataclass(frozen=True, kw_only=True)
class Imported:
    """Where an imported record came from: `repro records import` rewrites this block every time."""

    commit: str  # the upstream commit the table and logs were read at
    row: str  # the table's "#"
    claimed_time: str  # as the table writes it
    claimed_time_s: float | None
    linked_log: str
    environment_family: str  # torch-2.9-nightly, torch-2.4-stable, unknown
    mean_time_source: str  # logs | claimed (no log prints a train time)
    skipped_folders: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    runs_basis: str = ""  # how the importer told the record's runs from the folder's other logs
    left_out: tuple[dict, ...] = ()  # {file, reason, detail, sha256}: every log of the folder not taken as a run
    flags: tuple[str, ...] = ()  # what the importer could not decide: for the manifest's editor
    rule: dict = field(default_factory=dict)  # {evidence, why}: the rule the importer proposes
    target_val_loss: float | None = None  # the track's target, as the upstream README states it


@dataclass(frozen=True)
class ProgramPin:
    fingerprint: str  # "" = not pinned yet
    separator: str
    trainer: str = "record"  # what made the published runs: "record" (a program file) or "native" (train/)
    # Hyperparameters field -> the expression the record's program assigns it, for the fields a smoke cut may
    # change: a smoke run's program with these lines restored must have the pinned fingerprint.
    smoke_fields: dict = dataclasses.field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Published:
    steps: int
    losses: tuple[float, ...]
    times_s: tuple[float, ...]
    mean_time_s: float
    ml_validation: str
    step_avg_ms: float | None = None
    peak_memory_allocated_mib: int | None = None
    parent_retimed_s: float | None = None
    quoted: dict = field(default_factory=dict)  # statistics the record's README states (loss_evidence quoted)


@dataclass(frozen=True, kw_only=True)
class Hardware:
    gpu_model: str
    gpu_form_factor: str
    gpu_count: int
    interconnect: str
    driver: str = ""
    cuda_driver: str = ""
    cpu_model: str = ""  # lscpu's "Model name" of the machine the published times come from (CPU records)

    @property
    def known(self) -> bool:
        """False for a record whose logs show no machine (2024's first logs print no nvidia-smi table): neither
        GPUs nor, as a CPU record names it, a CPU. Such a record trained on GPUs like every speedrun record."""
        return self.gpu_count > 0 or bool(self.cpu_model)


@dataclass(frozen=True, kw_only=True)
class FlashAttentionPin:
    repository: str
    branch: str
    commit: str
    cutlass_commit: str
    subdirectory: str
    build_env: dict = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Software:
    python: str = ""
    torch: str = ""
    torch_cuda: str = ""
    triton: str = ""
    flash_attention: FlashAttentionPin | None = None

    def pins(self) -> dict[str, str]:
        """The versions a run's software is compared on (findings.differences; "" pins nothing)."""
        return {"python": self.python, "torch": self.torch, "torch_cuda": self.torch_cuda, "triton": self.triton}


@dataclass(frozen=True, kw_only=True)
class DatasetRef:
    """The data a record reads. train_shards is the author's pin (0: none); `derived` is what the importer worked
    out from the program's own hyperparameters (pipeline/records/data_need.py), rewritten by every import."""

    name: str
    train_shards: int
    val_shards: int
    val_tokens: int
    tokens_per_step: int
    derived: DataNeed | None = None

    @property
    def shards_to_fetch(self) -> int:
        """The author's pin when written, else the count derived from the program; 0 when neither says."""
        return self.train_shards or (self.derived.train_shards if self.derived else 0)


@dataclass(frozen=True, kw_only=True)
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


@dataclass(frozen=True, kw_only=True)
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
    imported: Imported | None = None  # set for records written by `repro records import`
    notes: str = ""  # the author's notes, kept by every import
    selection_folder: str | None = None  # the editor's choice of the runs' folder (`selection.folder`)
    edited: tuple[str, ...] = ()  # the fields an editor changed by hand: the next import keeps exactly these

    @property
    def accepted_program_sha256(self) -> frozenset[str]:
        return frozenset(log.program_sha256 for log in self.logs if log.program_sha256)

    @property
    def run_logs(self) -> tuple[PublishedLog, ...]:
        """The logs whose losses and times are the record's runs (every log but a declared re-timing)."""
        return tuple(log for log in self.logs if log.role == "run")

    @property
    def retiming_logs(self) -> tuple[PublishedLog, ...]:
        """The re-timing its README declares: the record's official time, not a run of its loss evidence."""
        return tuple(log for log in self.logs if log.role == "retiming")

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
    f.only("file", "sha256", "program_sha256", "program_bytes", "val_loss", "train_time_ms", "fingerprint", "torch",
           "missing", "files", "role")
    _relative_file(f, f.req("file", str))
    role = f.opt("role", str, "run")
    if role not in LOG_ROLES:
        raise f.fail("role", f"is {role!r}", f"use one of: {', '.join(LOG_ROLES)} (or leave it out: a run)")
    imported = "missing" in f.data or "fingerprint" in f.data  # imported logs may lack a program, loss or time
    val_loss = f.opt("val_loss", float) if imported else f.req("val_loss", float)
    return PublishedLog(file=f.req("file", str), sha256=f.sha256("sha256"),
                        program_sha256=f.sha256("program_sha256", required=not imported) or "",
                        program_bytes=f.opt("program_bytes", int, 0) if imported else f.req("program_bytes", int),
                        val_loss=_finite(f, "val_loss", val_loss) if val_loss is not None else None,
                        train_time_ms=_positive(f, "train_time_ms", f.opt("train_time_ms", int) if imported
                                                else f.req("train_time_ms", int)),
                        fingerprint=f.opt("fingerprint", str, ""), torch=f.opt("torch", str, ""),
                        missing=f.list_of("missing", str, required=False),
                        files=tuple(_file_pin(g) for g in f.items("files", required=False)), role=role)


def _file_pin(f: Fields) -> ProgramFilePin:
    f.only("name", "sha256", "bytes")
    return ProgramFilePin(name=f.req("name", str), sha256=f.sha256("sha256"), bytes=f.req("bytes", int))


def _relative_file(f: Fields, file: str) -> str:
    """A log's path below its record folder: relative, POSIX, no '..' (it is joined to local folders)."""
    parts = file.split("/")
    if not file or file.startswith("/") or "\\" in file or any(p in ("", ".", "..") for p in parts):
        raise f.fail("file", f"is {file!r}, not a path below the record's folder",
                     "write the log's path relative to the record folder, e.g. this_pr/<id>.txt")
    return file


def _imported(f: Fields) -> Imported:
    f.only("commit", "row", "claimed_time", "claimed_time_s", "linked_log", "environment_family",
           "mean_time_source", "skipped_folders", "missing", "runs_basis", "left_out", "flags", "rule",
           "target_val_loss")
    return Imported(commit=f.req("commit", str), row=f.req("row", str), claimed_time=f.opt("claimed_time", str, ""),
                    claimed_time_s=f.opt("claimed_time_s", float), linked_log=f.opt("linked_log", str, ""),
                    environment_family=f.opt("environment_family", str, "unknown"),
                    mean_time_source=f.opt("mean_time_source", str, "logs"),
                    skipped_folders=f.list_of("skipped_folders", str, required=False),
                    missing=f.list_of("missing", str, required=False), runs_basis=f.opt("runs_basis", str, ""),
                    left_out=tuple(dict(x) for x in f.list_of("left_out", dict, required=False)),
                    flags=f.list_of("flags", str, required=False), rule=dict(f.opt("rule", dict, {})),
                    target_val_loss=f.opt("target_val_loss", float))


def _published(f: Fields) -> Published:
    f.only("steps", "losses", "times_s", "mean_time_s", "ml_validation", "step_avg_ms",
           "peak_memory_allocated_mib", "parent_retimed_s", "quoted")
    losses, times = f.list_of("losses", float), f.list_of("times_s", float)
    for i, loss in enumerate(losses):
        _finite(f, f"losses[{i}]", loss)
    for i, seconds in enumerate(times):
        _positive(f, f"times_s[{i}]", seconds)
    if len(losses) != len(times):
        raise f.fail("times_s", f"has {len(times)} entries but losses has {len(losses)}",
                     "list one loss and one time per published run, in the same order")
    ml = f.req("ml_validation", str)
    if ml not in LOSS_EVIDENCE:
        raise f.fail("ml_validation", f"is {ml!r}", f"use one of: {', '.join(LOSS_EVIDENCE)}")
    return Published(steps=_positive(f, "steps", f.req("steps", int)), losses=losses, times_s=times,
                     mean_time_s=_positive(f, "mean_time_s", f.req("mean_time_s", float)), ml_validation=ml,
                     step_avg_ms=_positive(f, "step_avg_ms", f.opt("step_avg_ms", float)),
                     peak_memory_allocated_mib=f.opt("peak_memory_allocated_mib", int),
                     parent_retimed_s=_positive(f, "parent_retimed_s", f.opt("parent_retimed_s", float)),
                     quoted=dict(f.opt("quoted", dict, {})))


def _hardware(f: Fields) -> Hardware:
    f.only("gpu_model", "gpu_form_factor", "gpu_count", "interconnect", "driver", "cuda_driver", "cpu_model")
    count = f.req("gpu_count", int)
    if count < 0:
        raise f.fail("gpu_count", f"is {count}", "give the number of GPUs (0 for a CPU record)")
    return Hardware(gpu_model=f.req("gpu_model", str), gpu_form_factor=f.req("gpu_form_factor", str),
                    gpu_count=count, interconnect=f.req("interconnect", str),
                    driver=f.opt("driver", str, ""), cuda_driver=f.opt("cuda_driver", str, ""),
                    cpu_model=f.opt("cpu_model", str, ""))


def flash_attention_pin(g: Fields) -> FlashAttentionPin:
    """An FA3 pin (a record's software.flash_attention, or an environment manifest's own flash_attention)."""
    g.only("repository", "branch", "commit", "cutlass_commit", "subdirectory", "build_env")
    env = g.opt("build_env", dict, {})
    return FlashAttentionPin(repository=g.req("repository", str), branch=g.req("branch", str),
                             commit=g.req("commit", str), cutlass_commit=g.req("cutlass_commit", str),
                             subdirectory=g.req("subdirectory", str),
                             build_env={str(k): str(v) for k, v in env.items()})


def _software(f: Fields) -> Software:
    f.only("python", "torch", "torch_cuda", "triton", "flash_attention")
    fa = flash_attention_pin(f.sub("flash_attention")) if f.data.get("flash_attention") is not None else None
    return Software(
        python=f.opt("python", str, ""), torch=f.opt("torch", str, ""),
        torch_cuda=f.opt("torch_cuda", str, ""), triton=f.opt("triton", str, ""), flash_attention=fa)


def _derived(f: Fields) -> DataNeed:
    f.only("train_shards", "val_shards", "steps", "train_tokens", "tokens_per_step", "val_tokens", "margin",
           "derivation")
    return DataNeed(train_shards=f.req("train_shards", int), val_shards=f.req("val_shards", int),
                    steps=f.req("steps", int), train_tokens=f.req("train_tokens", int),
                    tokens_per_step=f.req("tokens_per_step", int), val_tokens=f.req("val_tokens", int),
                    margin=f.req("margin", float), derivation=f.req("derivation", str))


def _dataset(f: Fields) -> DatasetRef:
    f.only("name", "train_shards", "val_shards", "val_tokens", "tokens_per_step", "derived")
    derived = f.sub("derived", required=False)
    return DatasetRef(name=f.req("name", str), train_shards=f.req("train_shards", int),
                      val_shards=f.req("val_shards", int), val_tokens=f.req("val_tokens", int),
                      tokens_per_step=f.req("tokens_per_step", int),
                      derived=_derived(derived) if derived.data else None)


def _rules(f: Fields) -> Rules:
    f.only("version", "target_val_loss", "p_value_max", "loss_evidence", "consistency_alpha", "consistency_required",
           "time_confidence", "time_tolerance", "compare_hardware", "compare_software")
    version = f.req("version", int)
    evidence = f.req("loss_evidence", str)
    known = EVIDENCE_BY_VERSION.get(version, LOSS_EVIDENCE)
    if evidence not in known:
        raise f.fail("loss_evidence", f"is {evidence!r}, not one rules version {version} knows",
                     f"use one of: {', '.join(known)}" + ("" if version == max(EVIDENCE_BY_VERSION)
                                                          else f" (or rules version {max(EVIDENCE_BY_VERSION)})"))
    required = f.list_of("consistency_required", str)
    for item in required:
        if item not in ("record", "parent"):
            raise f.fail("consistency_required", f"names {item!r}", "list only: record, parent")
    for key in ("p_value_max", "consistency_alpha", "time_confidence"):
        value = f.req(key, float)
        if not 0 < value < 1:
            raise f.fail(key, f"is {value}, outside (0, 1)", "give a probability such as 0.01 or 0.95")
    tolerance = _finite(f, "time_tolerance", f.req("time_tolerance", float))
    if tolerance < 0:
        raise f.fail("time_tolerance", f"is {tolerance}, a tolerance cannot be negative",
                     "give the allowed slowdown as a fraction (0.02 = 2% slower than the record)")
    return Rules(version=version,
                 target_val_loss=_finite(f, "target_val_loss", f.req("target_val_loss", float)),
                 p_value_max=f.req("p_value_max", float), loss_evidence=evidence,
                 consistency_alpha=f.req("consistency_alpha", float), consistency_required=required,
                 time_confidence=f.req("time_confidence", float), time_tolerance=f.req("time_tolerance", float),
                 compare_hardware=f.list_of("compare_hardware", str),
                 compare_software=f.list_of("compare_software", str))


def _parent(top: Fields) -> str:
    parent = top.opt("parent", str, "")
    if parent and (not NAME_RE.match(parent) or ".." in parent):
        raise top.fail("parent", f"is {parent!r}, not a record name (one path component, no '..')",
                       "name the parent record as `repro records list` shows it, or leave it empty")
    return parent


def _selection(top: Fields) -> str | None:
    """The editor's `selection: {folder: this_pr_v3}`: the folder below the record's whose logs are its runs."""
    if top.data.get("selection") is None:
        return None
    sel = top.sub("selection")
    sel.only("folder")
    folder = sel.req("folder", str).strip("/")
    if folder:
        _relative_file(sel, folder)
    return folder


def load_record_file(path: Path) -> Record:
    top = Fields(load_yaml(path), path)
    check_schema_version(top, SCHEMA_VERSION)
    top.only("schema_version", "name", "title", "date", "track", "description", "parent", "upstream", "logs",
             "program", "published", "hardware", "software", "environment", "dataset", "rules", "imported", "notes",
             "selection", "edited")
    name = top.req("name", str)
    if name != Path(path).stem:
        raise top.fail("name", f"is {name!r} but the file is {Path(path).name}",
                       "name the file <name>.yaml or correct the name field")
    program = top.sub("program")
    program.only("fingerprint", "separator", "trainer", "smoke_fields")
    smoke_fields = program.opt("smoke_fields", dict, {})
    for key, value in smoke_fields.items():
        if not isinstance(key, str) or not isinstance(value, (str, int)):
            raise program.fail(f"smoke_fields.{key}", "must map a field name to the expression the program assigns",
                               'write e.g. `num_iterations: "1640"`')
    trainer = program.opt("trainer", str, "record")
    if trainer not in TRAINERS:
        raise program.fail("trainer", f"is {trainer!r}", f"use one of: {', '.join(TRAINERS)}")
    record = Record(
        name=name, title=top.req("title", str), date=top.req("date", str), track=top.req("track", str),
        description=top.req("description", str).strip(), parent=_parent(top),
        upstream=_upstream(top.sub("upstream")),
        logs=tuple(_log(f) for f in top.items("logs", required=False)),
        program=ProgramPin(fingerprint=program.opt("fingerprint", str, ""), separator=program.req("separator", str),
                           trainer=trainer, smoke_fields={k: str(v) for k, v in smoke_fields.items()}),
        published=_published(top.sub("published")), hardware=_hardware(top.sub("hardware")),
        software=_software(top.sub("software", required=False)), environment=top.req("environment", str),
        dataset=_dataset(top.sub("dataset")), rules=_rules(top.sub("rules")), path=Path(path),
        imported=_imported(top.sub("imported")) if top.data.get("imported") is not None else None,
        notes=top.opt("notes", str, "").strip(), selection_folder=_selection(top),
        edited=tuple(top.list_of("edited", str, required=False)))
    if record.logs and not record.run_logs:
        raise top.fail("logs", f"are all re-timings ({len(record.logs)} with role retiming): no run carries the "
                               "record's loss evidence", "mark the runs the re-timing stands on as runs (no role)")
    hw_fields = {f.name for f in dataclasses.fields(Hardware)}
    sw_fields = {f.name for f in dataclasses.fields(Software)} - {"flash_attention"}
    for key, allowed in (("compare_hardware", hw_fields), ("compare_software", sw_fields)):
        for item in getattr(record.rules, key):
            if item not in allowed:
                raise top.sub("rules").fail(key, f"names unknown field {item!r}",
                                            f"use fields of {key.split('_')[1]}: {', '.join(sorted(allowed))}")
    return record


def upstream_order(record: Record) -> tuple:
    """Sort key for upstream's order: track by track, by the records table's row number (a re-timing after the
    record it re-times), then date; records the table does not list (the demo) last."""
    row = record.imported.row if record.imported else ""
    numbered = row.isdigit()
    return (record.imported is None, record.track, not numbered, int(row) if numbered else 0,
            record.rules.loss_evidence == "retiming", record.date, record.name)


def _default_records_dir() -> Path:
    """The registry the tool ships (tests and scripts); commands pass their Registry's (pipeline/registry.py)."""
    from pipeline.workspace import shipped

    return shipped("manifests") / "records"


def record_names(records_dir: Path | None = None) -> list[str]:
    """The records of a registry's records/ folder (Workspace.records_dir; the shipped registry's if omitted)."""
    return sorted(p.stem for p in Path(records_dir or _default_records_dir()).glob("*.yaml"))


def load_record(name: str, records_dir: Path | None = None) -> Record:
    """The record `name` from `records_dir` (the shipped registry by default). The name is checked to be
    one path component before any file is opened, so `../../outside` reads nothing outside the registry."""
    check_record_name(name)
    records_dir = Path(records_dir or _default_records_dir())
    path = records_dir / f"{name}.yaml"
    if path.resolve().parent != records_dir.resolve():  # a symlinked manifest pointing elsewhere
        raise InputError(f"record manifest {path} resolves outside the registry {records_dir}",
                         "replace the link with the manifest itself")
    if not path.is_file():
        import difflib

        names = record_names(records_dir)
        # a date or a title alone, or a typo: the names that hold it, else those most like it
        close = [n for n in names if name.lower() in n.lower()] or \
            difflib.get_close_matches(name, names, n=3, cutoff=0.6)
        if close:
            raise InputError(f"unknown record {name!r}", f"did you mean {', '.join(close[:3])}? "
                                                         "(`repro records list` lists them all)")
        raise InputError(f"unknown record {name!r}", f"use one of: {', '.join(names) or 'none'} "
                                                     "(see `repro records list`)")
    return load_record_file(path)


def load_parent(record: Record) -> Record | None:
    """The parent record, from the same registry folder the record was loaded from; None when the record names
    none, or names the previous row of the table that this registry does not hold (a sample of the history)."""
    from pipeline.regular_file import kind_of

    path = record.path.parent / f"{record.parent}.yaml"
    kind = kind_of(path) if record.parent else None
    if kind is None:
        return None
    if kind != "regular file":  # a folder or a FIFO there was skipped without a word, and the comparison with it
        raise InputError(f"{path}: the parent record's manifest is a {kind}, not a file",
                         "put the parent's manifest there, or remove what is in its place")
    return load_record(record.parent, record.path.parent)
