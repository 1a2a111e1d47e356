"""Preflight checks (pure) on facts parsed from real and generated host outputs, against the record.

    .venv/bin/python -m pytest -q tests/test_preflight_checks.py
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pipeline.preflight.checks import STATUSES, outcome, run_checks
from pipeline.preflight.collect import SavedSources, collect
from pipeline.preflight.facts import DiskFacts, HostFacts, RuntimeFacts
from pipeline.preflight.run import facts_from_log
from pipeline.records.model import load_record

FIXTURES = Path(__file__).parent / "fixtures"

HOSTS = Path(__file__).parent / "fixtures" / "hosts"
RECORD = load_record("2025-09-23_MuonCustomSizing")
LOCATIONS = {"data": (Path("/data"), None), "runs": (Path("/runs"), None), "shm": (Path("/dev/shm"), None)}


def facts_of(folder: Path, runtime: str = "docker") -> HostFacts:
    return collect(SavedSources(folder), runtime=runtime, locations=LOCATIONS)


def by_name(checks) -> dict:
    return {c.name: c for c in checks}


def statuses(checks) -> dict[str, str]:
    return {c.name: c.status for c in checks}


@pytest.fixture(scope="module")
def record_node() -> HostFacts:
    return facts_of(HOSTS / "h100-8gpu-nvlink")


def test_the_records_kind_of_node_passes_everything(record_node):
    checks = run_checks(record_node, RECORD, "docker")
    # the CPU model is asked only of CPU records (a GPU record times its GPUs)
    assert statuses(checks) == {c.name: "skip" if c.name == "cpu" else "pass" for c in checks}, \
        [c for c in checks if c.status != "pass"]
    assert outcome(checks, strict=True) == "pass"
    assert by_name(checks)["interconnect"].reason == "all 28 GPU pairs NVLink (NV18)"


def test_every_check_explains_itself(record_node):
    for facts in (record_node, HostFacts()):
        checks = run_checks(facts, RECORD, "docker")
        assert len({c.name for c in checks}) == len(checks)
        assert all(c.status in STATUSES and c.reason and c.timing_impact for c in checks)
    # without a GPU the same questions are asked, and the GPU ones are skipped
    assert [c.name for c in run_checks(HostFacts(), RECORD, "docker")] == [
        c.name for c in run_checks(record_node, RECORD, "docker")]


def test_real_h200_host_warns_but_is_not_refused():
    facts = facts_of(FIXTURES / "hosts" / "h200-1gpu", runtime="host")
    checks = run_checks(facts, RECORD, "host")
    got = statuses(checks)
    assert {k for k, v in got.items() if v == "warn"} == {
        "gpu_count", "gpu_model", "driver", "cuda_driver", "software", "disk_data", "disk_runs", "shm"}
    assert "fail" not in got.values()
    assert got["interconnect"] == "skip" and got["docker"] == "skip" and got["disk_image"] == "skip"
    assert "8x the record's time" in by_name(checks)["gpu_count"].timing_impact
    assert "NVIDIA H200, not the record's NVIDIA H100 80GB HBM3" in by_name(checks)["gpu_model"].reason
    assert outcome(checks, strict=False) == "warn"
    assert outcome(checks, strict=True) == "fail"


def test_record_log_header_checks():
    folder = FIXTURES / "record-logs" / "2025-09-23_MuonCustomSizing"
    for log in sorted(folder.glob("*.tail.txt")):
        checks = run_checks(facts_from_log(log), RECORD, "host", from_log=True)
        got = statuses(checks)
        assert {k for k, v in got.items() if v == "pass"} == {
            "gpus_visible", "gpu_count", "gpu_model", "gpu_form_factor", "mig", "ecc", "gpu_memory", "driver",
            "cuda_driver", "runtime", "software"}
        # the log proves the GPUs, not how they are linked
        assert got["interconnect"] == "warn" and "does not show it" in by_name(checks)["interconnect"].reason
        assert "fail" not in got.values()


def test_pcie_pair_warns_about_links_and_boards():
    checks = by_name(run_checks(facts_of(HOSTS / "h100-pcie-pair"), RECORD, "host"))
    assert checks["interconnect"].status == "warn"
    assert "1 of 1 GPU pairs not NVLink-connected: GPU0-GPU1 NODE" in checks["interconnect"].reason
    assert checks["gpu_form_factor"].status == "warn" and "PCIe" in checks["gpu_form_factor"].reason
    assert checks["gpu_model"].status == "warn"


def test_mig_fails():
    check = by_name(run_checks(facts_of(HOSTS / "h100-mig"), RECORD, "host"))["mig"]
    assert check.status == "fail" and "GPU0" in check.reason and "-mig 0" in check.timing_impact


def test_uncorrected_ecc_errors_fail():
    check = by_name(run_checks(facts_of(HOSTS / "h100-ecc-errors"), RECORD, "host"))["ecc"]
    assert check.status == "fail" and "GPU1: 2 uncorrected" in check.reason and "GPU0" not in check.reason


def test_ecc_history_off_and_pending_remap_warn(record_node):
    gpus = list(record_node.gpus)
    gpus[3] = dataclasses.replace(gpus[3], ecc_mode="Disabled")
    check = by_name(run_checks(dataclasses.replace(record_node, gpus=tuple(gpus)), RECORD, "docker"))["ecc"]
    assert check.status == "warn" and "ECC off on GPU3" in check.reason
    gpus[3] = dataclasses.replace(record_node.gpus[3], remapped_rows_pending=True)
    check = by_name(run_checks(dataclasses.replace(record_node, gpus=tuple(gpus)), RECORD, "docker"))["ecc"]
    assert check.status == "warn" and "row remap pending" in check.reason


def test_throttled_gpu_fails_and_lowered_power_warns():
    checks = by_name(run_checks(facts_of(HOSTS / "h100-throttled"), RECORD, "host"))
    assert checks["throttling"].status == "fail"
    assert "hw_thermal_slowdown" in checks["throttling"].reason
    assert checks["power_and_clocks"].status == "warn"
    assert "power limit 500 W < default 700 W" in checks["power_and_clocks"].reason


def test_software_power_cap_alone_only_warns(record_node):
    gpus = (dataclasses.replace(record_node.gpus[0], throttle_reasons=("gpu_idle", "sw_power_cap")),
            *record_node.gpus[1:])
    check = by_name(run_checks(dataclasses.replace(record_node, gpus=gpus), RECORD, "docker"))["throttling"]
    assert check.status == "warn" and "GPU0: sw_power_cap" in check.reason


def test_no_gpu_fails_once_and_skips_the_gpu_questions():
    checks = run_checks(HostFacts(), RECORD, "host")
    assert checks[0].name == "gpus_visible" and checks[0].status == "fail"
    gpu_questions = checks[1:13]
    assert len(gpu_questions) == 12 and checks[13].name == "runtime"
    assert all(c.status == "skip" and c.reason == "no GPU" for c in gpu_questions)


def test_other_gpu_model_mixed_and_fewer_gpus(record_node):
    gpus = (*record_node.gpus[:4], *(dataclasses.replace(g, name="NVIDIA H100 PCIe", form_factor="PCIe")
                                     for g in record_node.gpus[4:7]))
    checks = by_name(run_checks(dataclasses.replace(record_node, gpus=gpus), RECORD, "docker"))
    assert checks["gpu_count"].status == "warn" and "7 GPU(s)" in checks["gpu_count"].reason
    assert "mixed models" in checks["gpu_model"].reason


def test_small_gpu_memory_fails(record_node):
    gpus = tuple(dataclasses.replace(g, memory_total_mib=24576) for g in record_node.gpus)
    check = by_name(run_checks(dataclasses.replace(record_node, gpus=gpus), RECORD, "docker"))["gpu_memory"]
    assert check.status == "fail" and "30760 MiB" in check.reason


def test_disks_and_shm(record_node):
    def with_disk(label, total, free, present=None):
        disks = [d for d in record_node.disks if d.label != label] + [DiskFacts(label=label, path="/x",
                                                                                total_bytes=total, free_bytes=free,
                                                                                present_bytes=present)]
        return by_name(run_checks(dataclasses.replace(record_node, disks=tuple(disks)), RECORD, "docker"))

    assert with_disk("shm", 64 * 1024**2, 64 * 1024**2)["shm"].status == "fail"  # Docker's default
    assert with_disk("shm", 512 * 1024**2, 512 * 1024**2)["shm"].status == "warn"
    assert with_disk("data", 10**12, 10**9)["disk_data"].status == "fail"  # 10 shards need 2.0 GB
    assert with_disk("data", 10**12, 10**9, present=1_500_000_000)["disk_data"].status == "pass"
    assert with_disk("runs", 10**12, 10**9)["disk_runs"].status == "warn"
    assert with_disk("image", 10**12, 10**9)["disk_image"].status == "warn"


def test_generated_data_asks_for_megabytes_not_shards(record_node):
    """Issue 37: the demo's data is 0.6 MB; two FineWeb shards' 0.4 GB is not what it needs."""
    from pipeline.preflight.checks_node import check_disk_data

    demo = load_record("demo-cpu-synth")
    disks = tuple(d for d in record_node.disks if d.label != "data") + (DiskFacts(label="data", path="/x",
                                                                                  total_bytes=10**12, free_bytes=10**8,
                                                                                  present_bytes=None),)
    check = check_disk_data(dataclasses.replace(record_node, disks=disks), demo, "host")
    assert check.status == "pass" and "need 16.8 MB" in check.reason, check.reason


def test_runtime_problems(record_node):
    def runtime_checks(**changes):
        rt = dataclasses.replace(record_node.runtime, **changes)
        return by_name(run_checks(dataclasses.replace(record_node, runtime=rt), RECORD, "docker"))

    assert runtime_checks(error="import torch failed: ModuleNotFoundError")["runtime"].status == "fail"
    assert runtime_checks(cuda_available=False)["runtime"].status == "fail"
    assert runtime_checks(device_count=4)["runtime"].status == "warn"
    checks = runtime_checks(torch="2.8.0+cu128", torch_cuda="12.8")
    assert checks["software"].status == "warn" and "torch 2.8.0+cu128 (record 2.9.0.dev20250726+cu126)" in \
        checks["software"].reason
    assert runtime_checks(torch_cuda="13.0")["cuda_driver"].status == "fail"  # driver supports CUDA 12.8 only
    failed = runtime_checks(gpu_access_error="could not select device driver \"\" with capabilities: [[gpu]]")
    assert failed["docker"].status == "fail" and "no GPU" in failed["docker"].reason


def test_docker_absent_fails_only_for_the_docker_runtime(record_node):
    facts = dataclasses.replace(record_node, docker=None)
    assert by_name(run_checks(facts, RECORD, "docker"))["docker"].status == "fail"
    assert by_name(run_checks(facts, RECORD, "host"))["docker"].status == "skip"


def test_missing_runtime_is_a_warning_with_its_reason(record_node):
    from pipeline.preflight.facts import MissingSource

    facts = dataclasses.replace(record_node, runtime=None,
                                missing=(MissingSource("runtime", "no usable image: no image recorded"),))
    check = by_name(run_checks(facts, RECORD, "docker"))["runtime"]
    assert check.status == "warn" and "no image recorded" in check.reason
    assert isinstance(record_node.runtime, RuntimeFacts)


def test_a_cpu_record_checks_the_cpu_model_and_a_gpu_record_does_not(record_node):
    demo = load_record("demo-cpu-synth")
    cpu = record_node.cpu
    same = dataclasses.replace(record_node, cpu=dataclasses.replace(cpu, model=demo.hardware.cpu_model))
    other = dataclasses.replace(record_node, cpu=dataclasses.replace(cpu, model="Intel Xeon Platinum 8480+"))
    assert by_name(run_checks(same, demo, "host"))["cpu"].status == "pass"
    check = by_name(run_checks(other, demo, "host"))["cpu"]
    assert check.status == "warn" and "Intel Xeon Platinum 8480+, the record's is AMD EPYC" in check.reason
    assert "reported, not judged" in check.timing_impact
    unknown = by_name(run_checks(dataclasses.replace(record_node, cpu=None), demo, "host"))["cpu"]
    assert unknown.status == "warn" and "CPU model unknown" in unknown.reason
    assert by_name(run_checks(record_node, RECORD, "host"))["cpu"].status == "skip"
