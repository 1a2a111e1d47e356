"""Pure parsers: the text a node prints -> frozen facts (pipeline/preflight/facts.py).

    gpus, driver, cuda = parse_nvidia_smi_xml(Path("nvidia-smi-q.xml").read_text())
    topology = parse_topology(Path("nvidia-smi-topo.txt").read_text())

No parser touches the machine; pipeline/preflight/collect.py decides where the text comes from
(this machine, a folder of saved outputs, a run log). Unreadable text raises InputError naming
the source, and the collector records it as a missing source rather than stopping.
"""

from __future__ import annotations

import re
import shlex
import xml.etree.ElementTree as ET
from collections.abc import Mapping

from pipeline.errors import InputError
from pipeline.preflight.facts import (
    CpuFacts,
    DockerFacts,
    GpuFacts,
    GpuLink,
    MemoryFacts,
    OsFacts,
    RuntimeFacts,
    Topology,
)
from pipeline.records.nvidia_smi_table import NvidiaSmiTable
from pipeline.redact import is_secret_name

_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_MATRIX_COLUMN = re.compile(r"^(GPU|NIC)\d+$")
# Environment variables worth recording: they change what a run does. Everything else stays out.
_ENV_ALLOWED = re.compile(r"^(CUDA_VISIBLE_DEVICES|NVIDIA_VISIBLE_DEVICES|NVIDIA_DRIVER_CAPABILITIES|CUDA_DEVICE_ORDER"
                          r"|CUDA_LAUNCH_BLOCKING|OMP_NUM_THREADS|PYTORCH_CUDA_ALLOC_CONF|NCCL_\w+|TORCH_NCCL_\w+"
                          r"|TORCHINDUCTOR_\w+|TRITON_\w+)$")


def _number(text: str | None) -> float | None:
    """'700.00 W' -> 700.0, '143771 MiB' -> 143771.0, 'N/A' -> None."""
    match = _NUMBER.match(text.strip()) if text else None
    return float(match.group(0)) if match else None


def _int(text: str | None) -> int | None:
    value = _number(text)
    return int(value) if value is not None else None


def _text(node: ET.Element | None, path: str) -> str | None:
    found = node.find(path) if node is not None else None
    value = found.text.strip() if found is not None and found.text else None
    return None if value in (None, "", "N/A") else value


def infer_form_factor(name: str, max_power_w: float | None) -> str:
    """nvidia-smi has no form-factor field: read it from the product name, then from the power ceiling.

    "H100 80GB HBM3" is how the SXM5 board names itself (the PCIe card is "H100 PCIe", the dual-card
    one "H100 NVL"); SXM Hopper boards allow 700 W while PCIe cards stop at 350-400 W.
    """
    upper = name.upper()
    if "PCIE" in upper:
        return "PCIe"
    if re.search(r"\bNVL\b", upper):
        return "NVL"
    if "SXM" in upper or ("H100" in upper and "HBM3" in upper):
        return "SXM"
    if max_power_w is not None and max_power_w >= 500:
        return "SXM"
    return "unknown"


def _error_counts(ecc: ET.Element | None, kind: str, uncorrected: bool) -> int | None:
    """Sum one ECC block. Drivers name its counters three ways over the years:
    double_bit/total (old), sram_uncorrectable + dram_uncorrectable, sram_uncorrectable_parity/_secded (R570+)."""
    block = ecc.find(kind) if ecc is not None else None
    if block is None:
        return None
    legacy = _int(_text(block, "double_bit/total" if uncorrected else "single_bit/total"))
    if legacy is not None:
        return legacy
    values = [_int(child.text) for child in block
              if ("uncorrectable" in child.tag) == uncorrected and "correctable" in child.tag]
    counted = [v for v in values if v is not None]
    return sum(counted) if counted else None


def _active_reasons(gpu: ET.Element) -> tuple[str, ...] | None:
    # R535+ says "clocks_event_reasons"; older drivers said "clocks_throttle_reasons".
    for tag, prefix in (("clocks_event_reasons", "clocks_event_reason_"),
                        ("clocks_throttle_reasons", "clocks_throttle_reason_")):
        block = gpu.find(tag)
        if block is not None:
            return tuple(child.tag.removeprefix(prefix) for child in block
                         if (child.text or "").strip() == "Active")
    return None


def _yes_no(text: str | None) -> bool | None:
    return None if text is None else text.lower() in ("yes", "enabled", "on")


def _gpu_from_xml(index: int, gpu: ET.Element) -> GpuFacts:
    name = _text(gpu, "product_name") or "unknown GPU"
    power = gpu.find("gpu_power_readings")
    power = power if power is not None else gpu.find("power_readings")  # before R535
    max_power = _number(_text(power, "max_power_limit"))
    mig_devices = gpu.find("mig_devices")
    processes = gpu.find("processes")
    return GpuFacts(
        index=index, name=name, bus_id=_text(gpu, "pci/pci_bus_id") or gpu.get("id", ""), source="nvidia-smi -q -x",
        form_factor=infer_form_factor(name, max_power), uuid=_text(gpu, "uuid"),
        architecture=_text(gpu, "product_architecture"), vbios=_text(gpu, "vbios_version"),
        memory_total_mib=_int(_text(gpu, "fb_memory_usage/total")),
        memory_used_mib=_int(_text(gpu, "fb_memory_usage/used")),
        sm_clock_mhz=_int(_text(gpu, "clocks/sm_clock")), mem_clock_mhz=_int(_text(gpu, "clocks/mem_clock")),
        max_sm_clock_mhz=_int(_text(gpu, "max_clocks/sm_clock")),
        max_mem_clock_mhz=_int(_text(gpu, "max_clocks/mem_clock")),
        applications_sm_clock_mhz=_int(_text(gpu, "applications_clocks/graphics_clock")),
        power_draw_w=_number(_text(power, "average_power_draw") or _text(power, "power_draw")),
        power_limit_w=_number(_text(power, "current_power_limit") or _text(power, "power_limit")),
        default_power_limit_w=_number(_text(power, "default_power_limit")), max_power_limit_w=max_power,
        ecc_mode=_text(gpu, "ecc_mode/current_ecc"),
        ecc_volatile_uncorrected=_error_counts(gpu.find("ecc_errors"), "volatile", uncorrected=True),
        ecc_volatile_corrected=_error_counts(gpu.find("ecc_errors"), "volatile", uncorrected=False),
        ecc_aggregate_uncorrected=_error_counts(gpu.find("ecc_errors"), "aggregate", uncorrected=True),
        remapped_rows_pending=_yes_no(_text(gpu, "remapped_rows/remapped_row_pending")),
        remapped_rows_failure=_yes_no(_text(gpu, "remapped_rows/remapped_row_failure")),
        mig_mode=_text(gpu, "mig_mode/current_mig"),
        mig_devices=len(mig_devices.findall("mig_device")) if mig_devices is not None else None,
        persistence=_yes_no(_text(gpu, "persistence_mode")), compute_mode=_text(gpu, "compute_mode"),
        throttle_reasons=_active_reasons(gpu), performance_state=_text(gpu, "performance_state"),
        temperature_c=_int(_text(gpu, "temperature/gpu_temp")),
        pcie_gen=_int(_text(gpu, "pci/pci_gpu_link_info/pcie_gen/current_link_gen")),
        pcie_gen_max=_int(_text(gpu, "pci/pci_gpu_link_info/pcie_gen/max_link_gen")),
        pcie_width=_int(_text(gpu, "pci/pci_gpu_link_info/link_widths/current_link_width")),
        pcie_width_max=_int(_text(gpu, "pci/pci_gpu_link_info/link_widths/max_link_width")),
        processes=len(processes.findall("process_info")) if processes is not None else None)


def parse_nvidia_smi_xml(text: str, source: str = "nvidia-smi -q -x") -> tuple[tuple[GpuFacts, ...], str, str]:
    """`nvidia-smi -q -x` -> (gpus in nvidia-smi index order, driver version, CUDA driver version)."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise InputError(f"{source}: not valid XML ({exc})",
                         "pass the unmodified output of `nvidia-smi -q -x`") from None
    if root.tag != "nvidia_smi_log":
        raise InputError(f"{source}: the XML root is <{root.tag}>, not <nvidia_smi_log>",
                         "pass the output of `nvidia-smi -q -x`")
    gpus = tuple(_gpu_from_xml(i, gpu) for i, gpu in enumerate(root.findall("gpu")))
    return gpus, _text(root, "driver_version") or "", _text(root, "cuda_version") or ""


def gpus_from_table(table: NvidiaSmiTable) -> tuple[GpuFacts, ...]:
    """The plain nvidia-smi table (a record log's header) as GpuFacts: only what the table shows."""
    return tuple(GpuFacts(
        index=g.index, name=g.name, bus_id=g.bus_id, source="nvidia-smi table",
        form_factor=infer_form_factor(g.name, g.power_cap_w), memory_total_mib=g.memory_total_mib,
        memory_used_mib=g.memory_used_mib, power_draw_w=g.power_draw_w, power_limit_w=g.power_cap_w,
        # the ECC cell reads N/A when ECC is off or unsupported, a count when it is on
        ecc_mode=None if g.ecc_volatile_uncorrected is None else "Enabled",
        ecc_volatile_uncorrected=g.ecc_volatile_uncorrected, mig_mode=g.mig_mode or None,
        persistence=g.persistence, compute_mode=g.compute_mode or None, performance_state=g.perf_state or None,
        temperature_c=g.temperature_c) for g in table.gpus)


def parse_topology(text: str, source: str = "nvidia-smi topo -m") -> Topology:
    """`nvidia-smi topo -m` -> the link kind of every GPU pair plus each GPU's CPU and NUMA affinity.

    Columns are tab-separated but padded irregularly (empty cells, a bold header in ANSI codes), so
    the GPU/NIC matrix is read positionally and the trailing affinity cells by what is left."""
    lines = [_ANSI.sub("", line) for line in text.splitlines()]
    header_at = next((i for i, line in enumerate(lines) if "GPU0" in line.split()), None)
    if header_at is None:
        raise InputError(f"{source}: no GPU0 column header", "pass the output of `nvidia-smi topo -m`")
    columns = [c.strip() for c in re.split(r"\t+|\s{2,}", lines[header_at].strip()) if c.strip()]
    matrix = [c for c in columns if _MATRIX_COLUMN.match(c)]
    extra = columns[len(matrix):]
    rows: dict[int, list[str]] = {}
    affinity: dict[int, dict[str, str]] = {}
    for line in lines[header_at + 1:]:
        if not line.strip():
            break
        cells = [c.strip() for c in re.split(r"\t+|\s{2,}", line.strip())]
        match = re.match(r"^GPU(\d+)$", cells[0])
        if not match:
            continue  # NIC rows: their links to GPUs are already in the GPU rows
        gpu = int(match.group(1))
        rows[gpu] = cells[1:1 + len(matrix)]
        affinity[gpu] = dict(zip(extra, [c for c in cells[1 + len(matrix):] if c]))
    gpu_columns = [int(c[3:]) for c in matrix if c.startswith("GPU")]
    if not rows or sorted(rows) != sorted(gpu_columns):
        raise InputError(f"{source}: GPU rows {sorted(rows)} do not match GPU columns {sorted(gpu_columns)}",
                         "pass the complete output of `nvidia-smi topo -m`")
    links = []
    for a in sorted(rows):
        for col, kind in zip(matrix, rows[a]):
            b = int(col[3:]) if col.startswith("GPU") else None
            if b is not None and a < b:
                links.append(GpuLink(a=a, b=b, kind=kind))
    order = sorted(rows)
    return Topology(gpu_count=len(order), links=tuple(links),
                    cpu_affinity=tuple(affinity[g].get("CPU Affinity", "") for g in order),
                    numa_affinity=tuple(affinity[g].get("NUMA Affinity", "") for g in order))


def _key_values(text: str, sep: str = ":") -> dict[str, str]:
    pairs = (line.split(sep, 1) for line in text.splitlines() if sep in line)
    return {key.strip(): value.strip() for key, value in pairs}


def parse_lscpu(text: str) -> CpuFacts:
    fields = _key_values(text)
    numa = tuple(f"{k.split()[1]}: {v}" for k, v in fields.items() if re.match(r"^NUMA node\d+ CPU\(s\)$", k))
    return CpuFacts(model=fields.get("Model name"), logical_cpus=_int(fields.get("CPU(s)")),
                    sockets=_int(fields.get("Socket(s)")), cores_per_socket=_int(fields.get("Core(s) per socket")),
                    threads_per_core=_int(fields.get("Thread(s) per core")),
                    numa_nodes=_int(fields.get("NUMA node(s)")), numa_node_cpus=numa)


def parse_meminfo(text: str, source: str = "/proc/meminfo") -> MemoryFacts:
    fields = _key_values(text)
    total = _int(fields.get("MemTotal"))
    if total is None:
        raise InputError(f"{source}: no MemTotal line", "pass the contents of /proc/meminfo")
    return MemoryFacts(total_kib=total, available_kib=_int(fields.get("MemAvailable")))


def parse_os_release(text: str, kernel: str | None) -> OsFacts:
    fields = {}
    for key, value in _key_values(text, "=").items():
        try:
            fields[key] = " ".join(shlex.split(value))
        except ValueError:
            fields[key] = value.strip('"')
    return OsFacts(pretty_name=fields.get("PRETTY_NAME"), id=fields.get("ID"), version_id=fields.get("VERSION_ID"),
                   kernel=kernel)


def parse_runtime_versions(text: str, where: str, gpu_access_error: str | None = None) -> RuntimeFacts:
    """The runtime probe's output (pipeline/probe.py; or a saved torch-env.json) as preflight's facts."""
    from pipeline.probe import parse_probe

    p = parse_probe(text, where, gpu_access_error)
    return RuntimeFacts(
        where=p.where, python=p.python, torch=p.torch, torch_cuda=p.torch_cuda, cudnn=p.cudnn, nccl=p.nccl,
        triton=p.triton, cuda_available=p.cuda_available, device_count=p.device_count, devices=p.devices,
        error=p.error, gpu_access_error=p.gpu_access_error)


def parse_docker_info(info: Mapping) -> DockerFacts:
    """The daemon's /info, reduced to what a GPU run needs (proxy settings and the like stay out)."""
    return DockerFacts(server_version=info.get("ServerVersion"), runtimes=tuple(sorted(info.get("Runtimes") or {})),
                       default_runtime=info.get("DefaultRuntime"), root_dir=info.get("DockerRootDir"),
                       cdi_spec_dirs=tuple(info.get("CDISpecDirs") or ()))


def allowed_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """Only variables that shape a run (CUDA_VISIBLE_DEVICES, NCCL_*, ...), never anything secret-looking."""
    return {k: v for k, v in sorted(environ.items()) if _ENV_ALLOWED.match(k) and not is_secret_name(k)}
