"""Parse the table that plain `nvidia-smi` prints (as in the record's log header) into typed GPU facts.

    from pipeline.records.nvidia_smi_table import parse_nvidia_smi_table
    table = parse_nvidia_smi_table(log_text)   # finds the table anywhere in the text
    table.driver, table.cuda, [gpu.name for gpu in table.gpus]

The record's logs print this table once at start-up; it is the only hardware evidence they carry, so
the run-log parser and preflight both read it with this one function. The table is meant for eyes,
not machines: columns shift between driver versions and long names are truncated with "...". We
therefore read it by cells between '|' rather than by fixed columns, and keep what a cell shows
verbatim (compute mode, MIG mode) next to the numbers we can read from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.errors import InputError

# Every repetition is bounded: a log is untrusted, and an unbounded `\d+` before a literal that never comes
# makes a search quadratic (a 60,000-digit cell took 112 s). Real cells have a few digits and spaces.
_HEADER = re.compile(r"NVIDIA-SMI\s{1,64}(?P<smi>\S{1,64})\s{1,64}Driver Version:\s{0,64}(?P<driver>\S{1,64})"
                     r"\s{1,64}CUDA Version:\s{0,64}(?P<cuda>[\w.]{1,32})")
PERSISTENCE = ("On", "Off", "N/A")
_POWER = re.compile(r"(?P<draw>[\d.]{1,16}|N/A)\s{0,32}W?\s{0,32}/\s{0,32}(?P<cap>[\d.]{1,16}|N/A)\s{0,32}W?")
_MEMORY = re.compile(r"(?P<used>\d{1,12})\s{0,32}MiB\s{0,32}/\s{0,32}(?P<total>\d{1,12})\s{0,32}MiB")
_PERF = re.compile(r"\bP\d{1,3}\b")
_TEMP = re.compile(r"\b(\d{1,6})C\b")
_PERCENT = re.compile(r"(\d{1,3})%")


@dataclass(frozen=True, kw_only=True)
class TableGpu:
    index: int
    name: str  # as printed; nvidia-smi truncates long names with "..."
    bus_id: str  # "00000000:61:00.0"
    persistence: bool | None
    display_active: str
    ecc_volatile_uncorrected: int | None  # None when the cell says N/A (ECC off or unsupported)
    fan_percent: int | None
    temperature_c: int | None
    perf_state: str  # "P0"
    power_draw_w: float | None
    power_cap_w: float | None
    memory_used_mib: int | None
    memory_total_mib: int | None
    utilization_percent: int | None
    compute_mode: str  # "Default", "E. Process", ...
    mig_mode: str  # "Disabled", "Enabled", "N/A"; "" when this driver's table has no MIG column

    @property
    def name_truncated(self) -> bool:
        return self.name.endswith("...")

    @property
    def mig_enabled(self) -> bool:
        return self.mig_mode == "Enabled"


@dataclass(frozen=True)
class NvidiaSmiTable:
    smi_version: str
    driver: str
    cuda: str  # the highest CUDA version the driver supports, not the toolkit's
    gpus: tuple[TableGpu, ...]


def _cells(line: str) -> list[str]:
    """'| a | b | c |' -> ['a', 'b', 'c'] (stripped)."""
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _int_or_none(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def _float_or_none(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _gpu_head(cell: str) -> tuple[int, str, str] | None:
    """'0  NVIDIA H100 80GB HBM3   On' -> (0, name, 'On'). Split by words, not by a backtracking regex:
    a hostile cell of 60,000 spaces must take microseconds, not hours."""
    words = cell.split(maxsplit=1)
    if len(words) < 2 or not words[0].isdigit() or len(words[0]) > 6:
        return None
    name, _, persistence = words[1].rstrip().rpartition(" ")
    if persistence not in PERSISTENCE or not name.strip():
        return None
    return int(words[0]), name.strip(), persistence


def _gpu_from_rows(rows: list[list[str]]) -> TableGpu:
    """One GPU's rows (2 on old drivers, 3 since MIG): cells [name/persistence, bus/display, ecc]..."""
    first = rows[0]
    head = _gpu_head(first[0])
    if head is None or len(first) < 3:
        raise ValueError(f"unrecognised GPU row: {' | '.join(first)[:120]!r}")
    bus = first[1].split()
    second = rows[1] if len(rows) > 1 else ["", "", ""]
    second += [""] * (3 - len(second))
    fan = second[0].split()[0] if second[0].split() else ""
    power = _POWER.search(second[0])
    temp, perf = _TEMP.search(second[0]), _PERF.search(second[0])
    memory = _MEMORY.search(second[1])
    util_and_compute = second[2].split(maxsplit=1)  # "0%  Default", "N/A  E. Process"
    util = _PERCENT.fullmatch(util_and_compute[0]) if util_and_compute else None
    compute = util_and_compute[1] if len(util_and_compute) > 1 else ""
    third = rows[2] if len(rows) > 2 else []
    mig = third[2] if len(third) > 2 else ""
    index, name, persistence = head
    return TableGpu(
        index=index, name=name, bus_id=bus[0] if bus else "",
        persistence=None if persistence == "N/A" else persistence == "On",
        display_active=bus[1] if len(bus) > 1 else "",
        ecc_volatile_uncorrected=_int_or_none(first[2]),
        fan_percent=_int_or_none(fan.rstrip("%")) if fan.endswith("%") else None,
        temperature_c=int(temp.group(1)) if temp else None, perf_state=perf.group(0) if perf else "",
        power_draw_w=_float_or_none(power["draw"]) if power else None,
        power_cap_w=_float_or_none(power["cap"]) if power else None,
        memory_used_mib=int(memory["used"]) if memory else None,
        memory_total_mib=int(memory["total"]) if memory else None,
        utilization_percent=int(util.group(1)) if util else None, compute_mode=compute, mig_mode=mig)


def find_nvidia_smi_table(text: str) -> NvidiaSmiTable | None:
    """The first nvidia-smi table in `text`, or None when there is none."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _HEADER.search(line)), None)
    if start is None:
        return None
    header = _HEADER.search(lines[start])
    # GPU rows begin after the '|====|' line that closes the column titles.
    body = next((i for i in range(start, len(lines)) if lines[i].startswith("|=")), None)
    gpus: list[TableGpu] = []
    block: list[list[str]] = []
    for line in lines[body + 1:] if body is not None else []:
        if line.startswith("|") and line.rstrip().endswith("|"):
            block.append(_cells(line))
            continue
        if block:  # a '+---+' separator closes one GPU's rows
            gpus.append(_gpu_from_rows(block))
            block = []
        if not line.startswith("+"):
            break  # a blank line or anything else: the GPU table is over
    if block:
        gpus.append(_gpu_from_rows(block))
    return NvidiaSmiTable(smi_version=header["smi"], driver=header["driver"], cuda=header["cuda"],
                          gpus=tuple(gpus))


def parse_nvidia_smi_table(text: str, source: str = "the text") -> NvidiaSmiTable:
    """Like find_nvidia_smi_table, but a missing or unreadable table is an InputError naming `source`."""
    try:
        table = find_nvidia_smi_table(text)
    except ValueError as exc:
        raise InputError(f"{source}: the nvidia-smi table could not be read ({exc})",
                         "pass the unmodified output of `nvidia-smi` (a log header or a saved file)") from None
    if table is None:
        raise InputError(f"{source}: no nvidia-smi table found (no 'NVIDIA-SMI ... Driver Version' line)",
                         "pass the output of plain `nvidia-smi`, as printed at the top of the record's logs")
    return table
