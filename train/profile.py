"""torch.profiler over a few timed steps: where the GPU's time goes, by kernel family.

    python -m train --preset record ... --profile runs/x/profile      (steps 6..8 of the timed loop, rank 0)

Writes <dir>/kernels.txt (the profiler's table, top 40 by device self time), <dir>/kernels_all.txt (every kernel
by full name, per step), <dir>/copies.txt (each device-to-device copy's neighbouring kernels, and the host call and
operators that launched it), <dir>/ops.txt
(every operator that took time, grouped by operator and input shapes: which tensors a copy or an add_ moves) and
<dir>/profile.json:
wall_ms (the profiled steps), gpu_busy_ms (union of kernel intervals on all streams), busy_fraction, and the
device time per family (matmul, attention, collectives, fused elementwise, copies, other). The profiled steps
run slower than the others (the profiler's own overhead), so their times stay in the log but are not a
benchmark; the shares are what this is for.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import torch
from torch.autograd.profiler_util import EventList
from torch.profiler import ProfilerActivity, profile

FAMILIES = (  # first match wins; lower-case substrings of kernel names
    ("matmul", ("gemm", "cutlass", "nvjet", "xmma", "triton_tem_fused_mm", "triton_tem_fused_addmm")),
    # before "triton_": FlexAttention's kernels are Inductor templates ("triton_tem_"), the only ones besides mm's
    ("attention", ("flex_attention", "flash", "fmha", "triton_tem_")),
    ("collectives", ("nccl",)),
    ("copies", ("memcpy", "memset")),
    ("fused elementwise", ("triton_",)),
)
# CUDA runtime activities that the profiler lists beside kernels but that are no GPU work; and torch's own marks of
# a compiled graph's span on the device ("## Call CompiledFxGraph ... ##", torch 2.11), which cover its kernels
NOT_KERNELS = ("command buffer full",)


def is_kernel(name: str) -> bool:
    return name.lower() not in NOT_KERNELS and not name.startswith("## ")


def family(kernel: str) -> str:
    name = kernel.lower()
    return next((fam for fam, keys in FAMILIES if any(k in name for k in keys)), "other")


def busy_us(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of [start, end) intervals (kernels on several streams may overlap)."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def kernel_table(kernels: list, steps: int) -> str:
    """Every kernel by full name (the profiler's table cuts names at 55 characters and keeps 40 rows): calls and
    device ms per step, largest first, with its family; the many small kernels are where a fusion shows."""
    total: dict[str, list[float]] = {}
    for e in kernels:
        row = total.setdefault(e.name, [0, 0.0])
        row[0] += 1
        row[1] += e.time_range.elapsed_us() / 1000
    lines = [f"# {steps} steps; per step: calls, device ms, mean us per call, family, kernel"]
    for name, (calls, ms) in sorted(total.items(), key=lambda kv: -kv[1][1]):
        lines.append(f"{calls / steps:8.1f} {ms / steps:9.3f} {1000 * ms / calls:9.1f}  {family(name):17s} {name}")
    return "\n".join(lines) + "\n"


def copy_neighbours(kernels: list, steps: int) -> str:
    """Where the device-to-device copies sit: for each (kernel before, kernel after) on the copy's stream, the copies
    per step and their mean µs. Copies issued inside a compiled graph have no operator of their own in ops.txt
    (2026-12-04: 249 per step, 5.8 ms, that no aten::copy_ row accounted for); their neighbours name the graph's
    node."""
    by_stream: dict[object, list] = {}
    for e in kernels:
        by_stream.setdefault(getattr(e, "device_resource_id", 0), []).append(e)
    pairs: dict[tuple[str, str], list[float]] = {}
    for events in by_stream.values():
        events.sort(key=lambda e: e.time_range.start)
        for i, e in enumerate(events):
            if not e.name.startswith("Memcpy DtoD"):
                continue
            before = next((x.name for x in reversed(events[:i]) if not x.name.startswith("Memcpy")), "-")
            after = next((x.name for x in events[i + 1:] if not x.name.startswith("Memcpy")), "-")
            row = pairs.setdefault((before, after), [0, 0.0])
            row[0] += 1
            row[1] += e.time_range.elapsed_us()
    lines = [f"# {steps} steps; device-to-device copies per step, mean us, kernel before -> kernel after"]
    for (before, after), (calls, us) in sorted(pairs.items(), key=lambda kv: -kv[1][1]):
        lines.append(f"{calls / steps:8.1f} {us / calls:9.1f}  {before}  ->  {after}")
    return "\n".join(lines) + "\n"


def copy_launchers(trace: list[dict], steps: int) -> str:
    """Who launched each device-to-device copy: the host call (cudaMemcpyAsync, cuMemcpyDtoDAsync, ...) that the
    profiler's correlation id ties to it and the innermost three operators or marks around that call on its thread,
    with the copies per step, their mean µs and MB. `trace` is the events of torch.profiler's Chrome trace."""
    copies = {e["args"]["correlation"]: e for e in trace if e.get("cat") == "gpu_memcpy"
              and "DtoD" in e.get("name", "") and "correlation" in e.get("args", {})}
    calls = [e for e in trace if e.get("cat") in ("cuda_runtime", "cuda_driver")
             and e.get("args", {}).get("correlation") in copies]
    spans: dict[tuple, list] = {}  # (pid, tid) -> (start, -end, name, call) of operators, marks and those calls
    for e in trace:
        if e.get("cat") in ("cpu_op", "user_annotation") and "dur" in e:
            spans.setdefault((e.get("pid"), e.get("tid")), []).append((e["ts"], -(e["ts"] + e["dur"]), e["name"], None))
    for call in calls:
        spans.setdefault((call.get("pid"), call.get("tid")), []).append((call["ts"], float("inf"), "", call))
    rows: dict[tuple[str, ...], list[float]] = {}
    for thread in spans.values():
        open_ops: list[tuple[float, str]] = []  # operators nest on one thread: a stack of (end, name)
        for start, neg_end, name, call in sorted(thread, key=lambda s: s[:2]):
            while open_ops and open_ops[-1][0] < start:
                open_ops.pop()
            if call is None:
                open_ops.append((-neg_end, name))
                continue
            copy = copies[call["args"]["correlation"]]
            key = (call["name"], *(n[:70] for _, n in open_ops[-3:]))
            row = rows.setdefault(key, [0, 0.0, 0.0])
            row[0] += 1
            row[1] += copy.get("dur", 0.0)
            row[2] += copy.get("args", {}).get("bytes", 0) / 1e6
    lines = [f"# {steps} steps; device-to-device copies per step, mean us, mean MB, host call <- operators (innermost "
             "last)"]
    for key, (n, us, mb) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
        lines.append(f"{n / steps:8.1f} {us / n:9.1f} {mb / n:8.2f}  {key[0]}  <-  {' > '.join(key[1:]) or '-'}")
    return "\n".join(lines) + "\n"


class StepProfiler:
    """Profiles steps first..first+count-1 of the timed loop; a no-op when out_dir is None or not rank 0."""

    def __init__(self, out_dir: Path | None, enabled: bool, first: int = 6, count: int = 3):
        self.out_dir, self.first, self.count = out_dir, first, count
        self.on = out_dir is not None and enabled
        self._prof = None
        self._started = 0.0

    def before_step(self, step: int) -> None:
        if self.on and step == self.first:
            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
            self._prof = profile(activities=activities, record_shapes=True)  # shapes: ops.txt
            self._prof.__enter__()
            self._started = time.perf_counter()

    def after_step(self, step: int) -> None:
        if self._prof is None or step != self.first + self.count - 1:
            return
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        wall_ms = 1000 * (time.perf_counter() - self._started)
        self._prof.__exit__(None, None, None)
        self.write(self._prof, wall_ms)
        self._prof, self.on = None, False

    def write(self, prof, wall_ms: float) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
                   and is_kernel(e.name)]
        by_family: dict[str, float] = {}
        for e in kernels:
            fam = family(e.name)
            by_family[fam] = by_family.get(fam, 0.0) + e.time_range.elapsed_us() / 1000
        busy_ms = busy_us([(e.time_range.start, e.time_range.end) for e in kernels]) / 1000
        summary = dict(steps=list(range(self.first, self.first + self.count)), wall_ms=round(wall_ms, 2),
                       gpu_busy_ms=round(busy_ms, 2), busy_fraction=round(busy_ms / wall_ms, 4) if wall_ms else None,
                       kernels=len(kernels), device_ms_by_family={k: round(v, 2) for k, v in sorted(
                           by_family.items(), key=lambda kv: -kv[1])})
        (self.out_dir / "profile.json").write_text(json.dumps(summary, indent=1) + "\n")
        (self.out_dir / "kernels_all.txt").write_text(kernel_table(kernels, self.count))
        launchers = ""
        if kernels:  # the Chrome trace holds the correlation ids; it is large, so it is read and dropped
            with tempfile.TemporaryDirectory(dir=self.out_dir) as tmp:
                prof.export_chrome_trace(f"{tmp}/trace.json")
                with open(f"{tmp}/trace.json") as f:
                    launchers = "\n" + copy_launchers(json.load(f).get("traceEvents", []), self.count)
        (self.out_dir / "copies.txt").write_text(copy_neighbours(kernels, self.count) + launchers)
        sort = "self_device_time_total" if kernels else "self_cpu_time_total"
        (self.out_dir / "kernels.txt").write_text(prof.key_averages().table(sort_by=sort, row_limit=40) + "\n")
        # Every operator that took time, not a top 40: the copies and add_ that matter are many small rows (a
        # profile of 2026-12-03 with the top 40 named 35 add_ per step on (50304, 768) but none of its 129 copies).
        by_shape = prof.key_averages(group_by_input_shape=True)
        timed = EventList([e for e in by_shape if (e.self_device_time_total if kernels else e.self_cpu_time_total) > 0])
        (self.out_dir / "ops.txt").write_text(timed.table(sort_by=sort, row_limit=-1, max_shapes_column_width=120)
                                              + "\n")
