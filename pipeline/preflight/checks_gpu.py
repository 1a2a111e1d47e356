"""The GPU checks of preflight (pipeline/preflight/checks.py runs them): model, count, links, MIG, ECC, clocks.

Each is a pure function (HostFacts, Record) -> Check, called only when at least one GPU is visible.
"""

from __future__ import annotations

import re

from pipeline.preflight.facts import Check, GpuFacts, HostFacts
from pipeline.records.model import Record

GPU_MEMORY_HEADROOM = 1.10  # allocator fragmentation and the CUDA context on top of peak allocated
# Active clock-event reasons that are normal on an idle GPU or harmless to throughput.
BENIGN_REASONS = {"gpu_idle", "applications_clocks_setting", "display_clocks_setting", "sync_boost"}
HARDWARE_REASONS = {"hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
SAME = "none: as on the record's node"
NOT_COMPARABLE = "time not comparable to the record's"


def _gpu_list(gpus: list[GpuFacts]) -> str:
    return ", ".join(f"GPU{g.index}" for g in gpus)


def _major_minor(version: str | None) -> tuple[int, int] | None:
    match = re.match(r"^(\d+)\.(\d+)", version or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def check_gpus_visible(facts: HostFacts, record: Record) -> Check:
    if facts.gpus:
        names = sorted({g.name for g in facts.gpus})
        return Check("gpus_visible", "pass", f"{len(facts.gpus)} GPU(s) via {facts.gpus[0].source}: {', '.join(names)}",
                     SAME)
    if record.hardware.gpu_count == 0:
        return Check("gpus_visible", "pass", "no GPU, and none needed: the record trains on the CPU", SAME)
    why = facts.missing_reason("nvidia-smi -q -x") or "nvidia-smi lists no GPU"
    return Check("gpus_visible", "fail", f"no GPU visible ({why})",
                 "nothing to time: the record trains on CUDA GPUs (use the CPU demo, `make demo`, on this machine)")


def check_gpu_count(facts: HostFacts, record: Record) -> Check:
    have, want = len(facts.gpus), record.hardware.gpu_count
    if have == want:
        return Check("gpu_count", "pass", f"{have} GPUs, as the record", SAME)
    if have < want:
        return Check("gpu_count", "warn", f"{have} GPU(s); the record used {want}",
                     f"each step's batch is split over {have} instead of {want} GPUs, so each does {want / have:g}x "
                     f"the work (gradient accumulation) and the collectives change: expect roughly {want / have:g}x "
                     f"the record's time; {NOT_COMPARABLE}")
    return Check("gpu_count", "warn", f"{have} GPUs; the record used {want}",
                 f"restrict the run to {want} GPUs (CUDA_VISIBLE_DEVICES) to match the record's data-parallel "
                 f"split; on {have} the per-GPU batch and the collectives differ: {NOT_COMPARABLE}")


def check_gpu_model(facts: HostFacts, record: Record) -> Check:
    want = record.hardware.gpu_model
    others = [g for g in facts.gpus if g.name != want]
    if not others:
        return Check("gpu_model", "pass", f"all {want}", SAME)
    names = sorted({g.name for g in facts.gpus})
    mixed = " (mixed models: the slowest GPU paces every synchronous step)" if len(names) > 1 else ""
    return Check("gpu_model", "warn", f"{', '.join(names)}, not the record's {want}{mixed}",
                 f"another GPU model has other compute throughput and memory bandwidth: the time measures this "
                 f"node, not the record; {NOT_COMPARABLE}")


def check_gpu_form_factor(facts: HostFacts, record: Record) -> Check:
    want = record.hardware.gpu_form_factor
    forms = sorted({g.form_factor for g in facts.gpus})
    if forms == [want]:
        return Check("gpu_form_factor", "pass", f"{want} (inferred from the name and power limit)", SAME)
    if forms == ["unknown"]:
        return Check("gpu_form_factor", "warn", "form factor could not be inferred from the name or power limit",
                     f"cannot confirm {want}: PCIe boards run at lower power and clocks than SXM boards")
    return Check("gpu_form_factor", "warn", f"{', '.join(forms)}, not the record's {want}",
                 f"PCIe/NVL boards have lower power limits and clocks than {want} boards and no NVSwitch fabric; "
                 f"{NOT_COMPARABLE}")


def check_interconnect(facts: HostFacts, record: Record) -> Check:
    if len(facts.gpus) < 2:
        return Check("interconnect", "skip", "one GPU: no GPU pairs",
                     "no inter-GPU communication, which the record's time includes")
    want_nvlink = record.hardware.interconnect.lower().startswith("nvlink")
    topo = facts.topology
    if topo is None:
        why = facts.missing_reason("nvidia-smi topo -m") or "not read"
        return Check("interconnect", "warn", f"topology unknown ({why})",
                     f"cannot confirm {record.hardware.interconnect} between every pair; over PCIe the gradient "
                     "reduce-scatter and all-gather take several times longer")
    pairs = len(topo.links)
    slow = [link for link in topo.links if not link.nvlink]
    kinds = ", ".join(sorted({link.kind for link in topo.links}))
    if want_nvlink and slow:
        shown = ", ".join(f"GPU{link.a}-GPU{link.b} {link.kind}" for link in slow[:6])
        more = f" and {len(slow) - 6} more" if len(slow) > 6 else ""
        return Check("interconnect", "warn", f"{len(slow)} of {pairs} GPU pairs not NVLink-connected: {shown}{more}",
                     "collectives between these pairs go over PCIe (64 GB/s per direction on gen5 x16, against "
                     f"NVLink's hundreds): communication becomes a large share of each step; {NOT_COMPARABLE}")
    return Check("interconnect", "pass", f"all {pairs} GPU pairs {'NVLink' if want_nvlink else 'connected'} ({kinds})",
                 SAME)


def check_mig(facts: HostFacts, record: Record) -> Check:
    enabled = [g for g in facts.gpus if g.mig_mode == "Enabled"]
    if enabled:
        return Check("mig", "fail", f"MIG enabled on {_gpu_list(enabled)}: a process sees one slice, not the GPU",
                     "a slice has a fraction of the SMs and memory and NCCL cannot train across MIG instances; "
                     "disable MIG (`nvidia-smi -i N -mig 0` and a GPU reset) or rent a node without it")
    if any(g.mig_mode is None for g in facts.gpus):
        return Check("mig", "skip", f"MIG mode not shown by {facts.gpus[0].source}", "unknown")
    return Check("mig", "pass", "MIG off (or unsupported) on every GPU", SAME)


def check_ecc(facts: HostFacts, record: Record) -> Check:
    gpus = facts.gpus
    broken = [g for g in gpus if (g.ecc_volatile_uncorrected or 0) > 0 or g.remapped_rows_failure]
    if broken:
        counts = ", ".join(f"GPU{g.index}: {g.ecc_volatile_uncorrected or 0} uncorrected"
                           + (", row remapping failed" if g.remapped_rows_failure else "") for g in broken)
        return Check("ecc", "fail", f"uncorrected memory errors since the last reset ({counts})",
                     "results computed on these GPUs cannot be trusted; reset them or ask the provider for another "
                     "node before timing anything")
    if all(g.ecc_mode is None for g in gpus):
        return Check("ecc", "skip", f"ECC not shown by {gpus[0].source}", "unknown")
    off = [g for g in gpus if g.ecc_mode == "Disabled"]
    if off:
        return Check("ecc", "warn", f"ECC off on {_gpu_list(off)}; the record ran with ECC on",
                     "memory errors would go unnoticed; ECC off also frees a little memory bandwidth, so a time "
                     "here can be slightly better than the record's node would give")
    history = [g for g in gpus if (g.ecc_aggregate_uncorrected or 0) > 0 or g.remapped_rows_pending]
    if history:
        return Check("ecc", "warn", f"{_gpu_list(history)}: uncorrected errors in the past or a row remap pending",
                     "a pending remap takes effect at the next GPU reset; such GPUs fail more often mid-run")
    return Check("ecc", "pass", f"ECC on, no uncorrected errors on {len(gpus)} GPU(s)", SAME)


def check_throttling(facts: HostFacts, record: Record) -> Check:
    known = [g for g in facts.gpus if g.throttle_reasons is not None]
    if not known:
        return Check("throttling", "skip", f"clock event reasons not shown by {facts.gpus[0].source}", "unknown")
    active = {g.index: sorted(set(g.throttle_reasons) - BENIGN_REASONS) for g in known}
    active = {i: r for i, r in active.items() if r}
    shown = "; ".join(f"GPU{i}: {', '.join(r)}" for i, r in active.items())
    if any(HARDWARE_REASONS & set(r) for r in active.values()):
        return Check("throttling", "fail", f"hardware slowdown active at rest ({shown})",
                     "the card is overheating, its power is being braked or it is faulty: every step runs at "
                     "reduced clocks; fix cooling/power or use another node")
    if active:
        return Check("throttling", "warn", f"clocks held down ({shown})",
                     f"steps run below full clocks while this lasts; {NOT_COMPARABLE} until it clears")
    return Check("throttling", "pass", "no active slowdown reasons (idle is normal)", SAME)


def check_power_and_clocks(facts: HostFacts, record: Record) -> Check:
    findings = []
    for g in facts.gpus:
        if g.power_limit_w and g.default_power_limit_w and g.power_limit_w < g.default_power_limit_w - 1:
            findings.append(f"GPU{g.index} power limit {g.power_limit_w:.0f} W < default "
                            f"{g.default_power_limit_w:.0f} W")
        if g.applications_sm_clock_mhz and g.max_sm_clock_mhz and g.applications_sm_clock_mhz < g.max_sm_clock_mhz:
            findings.append(f"GPU{g.index} application clock {g.applications_sm_clock_mhz} MHz < max "
                            f"{g.max_sm_clock_mhz} MHz")
    if findings:
        return Check("power_and_clocks", "warn", "; ".join(findings),
                     "a lowered power limit or clock caps throughput under load; `nvidia-smi -rac` and "
                     f"`nvidia-smi -pl <default>` restore them; {NOT_COMPARABLE}")
    if all(g.default_power_limit_w is None for g in facts.gpus):
        return Check("power_and_clocks", "skip", f"default power limit not shown by {facts.gpus[0].source}", "unknown")
    return Check("power_and_clocks", "pass", "power limits at default, application clocks at maximum", SAME)


def check_gpu_memory(facts: HostFacts, record: Record) -> Check:
    peak = record.published.peak_memory_allocated_mib
    sizes = [g.memory_total_mib for g in facts.gpus]
    if peak is None or None in sizes:
        return Check("gpu_memory", "skip", "record peak or GPU memory size unknown", "unknown")
    need = int(peak * GPU_MEMORY_HEADROOM)
    small = [g for g in facts.gpus if g.memory_total_mib < need]
    if small:
        return Check("gpu_memory", "fail", f"{_gpu_list(small)} have {min(sizes)} MiB; the record peaks at {peak} MiB "
                     f"allocated per GPU (about {need} MiB with overhead)", "the run would stop out of memory")
    return Check("gpu_memory", "pass", f"{min(sizes)} MiB per GPU >= {need} MiB needed (record peak {peak} MiB)", SAME)


def check_gpus_idle(facts: HostFacts, record: Record) -> Check:
    if any(g.processes is None for g in facts.gpus):
        return Check("gpus_idle", "skip", f"process list not read from {facts.gpus[0].source}", "unknown")
    busy = [g for g in facts.gpus if g.processes]
    if busy:
        return Check("gpus_idle", "warn", "other processes on " + ", ".join(
            f"GPU{g.index} ({g.processes}, {g.memory_used_mib} MiB)" for g in busy),
            f"they compete for compute and memory during the run; {NOT_COMPARABLE}")
    return Check("gpus_idle", "pass", "no other process on any GPU", SAME)


def check_driver(facts: HostFacts, record: Record) -> Check:
    want = record.hardware.driver
    if not facts.driver:
        return Check("driver", "skip", "driver version not read", "unknown")
    if not want or facts.driver == want:
        return Check("driver", "pass", f"driver {facts.driver}", SAME)
    return Check("driver", "warn", f"driver {facts.driver}; the record ran {want}",
                 "a recorded hardware deviation; drivers seldom change kernel speed by much")


def check_cuda_driver(facts: HostFacts, record: Record) -> Check:
    have, want = facts.cuda_driver, record.hardware.cuda_driver
    if not have:
        return Check("cuda_driver", "skip", "CUDA driver version not read", "unknown")
    runtime = facts.runtime.torch_cuda if facts.runtime else None
    if _major_minor(runtime) and _major_minor(have) and _major_minor(runtime)[0] > _major_minor(have)[0]:
        return Check("cuda_driver", "fail", f"the runtime's torch is built for CUDA {runtime}; this driver supports "
                     f"CUDA {have}", "torch cannot use the GPUs: update the driver or use a runtime built for "
                     f"CUDA {_major_minor(have)[0]}.x")
    if want and have != want:
        return Check("cuda_driver", "warn", f"driver supports CUDA {have}; the record's supported {want}",
                     "a recorded hardware deviation; the runtime's own CUDA libraries do the work")
    return Check("cuda_driver", "pass", f"CUDA {have}" + (f", runtime CUDA {runtime} fits" if runtime else ""), SAME)


GPU_CHECKS = (check_gpu_count, check_gpu_model, check_gpu_form_factor, check_interconnect, check_mig, check_ecc,
              check_throttling, check_power_and_clocks, check_gpu_memory, check_gpus_idle, check_driver,
              check_cuda_driver)
