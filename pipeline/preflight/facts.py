"""What preflight knows about a node (frozen facts, filled by pipeline/preflight/parse.py) and its Check type.

Every field that a source may not provide is Optional: None means "not known", never "zero" or
"off", so the checks can tell a missing reading from a bad one. Serial numbers and anything from
the environment outside an allow-list are never part of these types.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class GpuFacts:
    index: int
    name: str
    bus_id: str
    source: str  # "nvidia-smi -q -x" or "nvidia-smi table"
    form_factor: str  # "SXM", "PCIe", "NVL" or "unknown": inferred, nvidia-smi does not print it
    uuid: str | None = None
    architecture: str | None = None
    vbios: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    max_sm_clock_mhz: int | None = None
    max_mem_clock_mhz: int | None = None
    applications_sm_clock_mhz: int | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    default_power_limit_w: float | None = None
    max_power_limit_w: float | None = None
    ecc_mode: str | None = None  # "Enabled", "Disabled", "N/A"
    ecc_volatile_uncorrected: int | None = None
    ecc_volatile_corrected: int | None = None
    ecc_aggregate_uncorrected: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    mig_mode: str | None = None  # "Enabled", "Disabled", "N/A"
    mig_devices: int | None = None
    persistence: bool | None = None
    compute_mode: str | None = None
    throttle_reasons: tuple[str, ...] | None = None  # the active ones, e.g. ("gpu_idle",)
    performance_state: str | None = None
    temperature_c: int | None = None
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    processes: int | None = None


@dataclass(frozen=True)
class GpuLink:
    a: int
    b: int
    kind: str  # as `nvidia-smi topo -m` prints it: "NV18", "PIX", "PXB", "PHB", "NODE", "SYS"

    @property
    def nvlink(self) -> bool:
        return self.kind.startswith("NV")


@dataclass(frozen=True)
class Topology:
    gpu_count: int
    links: tuple[GpuLink, ...]  # one per unordered pair a < b
    cpu_affinity: tuple[str, ...]
    numa_affinity: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class RuntimeFacts:
    where: str  # "host: /usr/bin/python3" or "docker: sha256:..."
    python: str | None = None
    torch: str | None = None
    torch_cuda: str | None = None
    cudnn: str | None = None
    nccl: str | None = None
    triton: str | None = None
    cuda_available: bool | None = None
    device_count: int | None = None
    devices: tuple[str, ...] = ()
    error: str | None = None  # the runtime answered but could not import torch, for example
    gpu_access_error: str | None = None  # docker: why a container could not be given the GPUs


@dataclass(frozen=True, kw_only=True)
class CpuFacts:
    model: str | None
    logical_cpus: int | None
    sockets: int | None
    cores_per_socket: int | None
    threads_per_core: int | None
    numa_nodes: int | None
    numa_node_cpus: tuple[str, ...]


@dataclass(frozen=True)
class MemoryFacts:
    total_kib: int
    available_kib: int | None


@dataclass(frozen=True)
class OsFacts:
    pretty_name: str | None
    id: str | None
    version_id: str | None
    kernel: str | None


@dataclass(frozen=True, kw_only=True)
class DiskFacts:
    label: str  # "data", "runs", "image", "shm"
    path: str
    total_bytes: int
    free_bytes: int
    present_bytes: int | None = None  # what of ours is already there (fetched shards), when known


@dataclass(frozen=True, kw_only=True)
class DockerFacts:
    server_version: str | None
    runtimes: tuple[str, ...]
    default_runtime: str | None
    root_dir: str | None
    cdi_spec_dirs: tuple[str, ...]

    @property
    def nvidia_runtime(self) -> bool:
        return "nvidia" in self.runtimes or bool(self.cdi_spec_dirs)


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # "pass", "warn", "fail" or "skip"
    reason: str
    timing_impact: str  # what this means for a time measured here, against the record's


@dataclass(frozen=True)
class MissingSource:
    source: str  # "nvidia-smi -q -x", "docker", ...
    reason: str


@dataclass(frozen=True, kw_only=True)
class HostFacts:
    gpus: tuple[GpuFacts, ...] = ()
    driver: str | None = None
    cuda_driver: str | None = None
    topology: Topology | None = None
    runtime: RuntimeFacts | None = None
    cpu: CpuFacts | None = None
    memory: MemoryFacts | None = None
    os: OsFacts | None = None
    disks: tuple[DiskFacts, ...] = ()
    docker: DockerFacts | None = None
    environment: dict[str, str] = field(default_factory=dict)
    missing: tuple[MissingSource, ...] = ()

    def missing_reason(self, source: str) -> str | None:
        return next((m.reason for m in self.missing if m.source == source), None)

    def disk(self, label: str) -> DiskFacts | None:
        return next((d for d in self.disks if d.label == label), None)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# ---- reading facts back (preflight.json): the same types, validated field by field ---------------

class FactsError(ValueError):
    """A field of a saved preflight report has the wrong shape; `field` is its dotted path."""

    def __init__(self, field_path: str, problem: str):
        super().__init__(f"field '{field_path}': {problem}")
        self.field = field_path


def _from_json(kind, value, where: str):
    """`value` (parsed JSON) as an instance of the annotated type `kind`, or FactsError naming `where`."""
    import types
    import typing

    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _from_json(inner[0], value, where)
    if dataclasses.is_dataclass(kind):
        if not isinstance(value, dict):
            raise FactsError(where, f"must be a mapping, got {type(value).__name__}")
        hints = typing.get_type_hints(kind)
        names = {f.name for f in dataclasses.fields(kind)}
        unknown = sorted(set(value) - names)
        if unknown:
            raise FactsError(f"{where}.{unknown[0]}", "is not a known field")
        out = {}
        for f in dataclasses.fields(kind):
            if f.name in value:
                out[f.name] = _from_json(hints[f.name], value[f.name], f"{where}.{f.name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise FactsError(f"{where}.{f.name}", "is missing")
        return kind(**out)
    if origin is tuple:
        if not isinstance(value, list):
            raise FactsError(where, f"must be a list, got {type(value).__name__}")
        return tuple(_from_json(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise FactsError(where, "must be a mapping of strings")
        return dict(value)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind in (str, int, float, bool) and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
        raise FactsError(where, f"must be {kind.__name__}, got {value!r}")
    return value


def host_facts_from_dict(data) -> HostFacts:
    return _from_json(HostFacts, data, "facts")


def check_from_dict(data, where: str) -> Check:
    return _from_json(Check, data, where)
