"""Preflight parsers on real host output (../shared), the record's log header and the project's own fixtures.

    .venv/bin/python -m pytest -q tests/test_preflight_parse.py
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from pipeline.errors import InputError
from pipeline.preflight.parse import (
    allowed_environment,
    gpus_from_table,
    infer_form_factor,
    parse_docker_info,
    parse_lscpu,
    parse_meminfo,
    parse_nvidia_smi_xml,
    parse_os_release,
    parse_runtime_versions,
    parse_topology,
)
from pipeline.records.nvidia_smi_table import parse_nvidia_smi_table

FIXTURES = Path(__file__).parent / "fixtures"

HOSTS = Path(__file__).parent / "fixtures" / "hosts"


def _h200(name: str) -> str:
    return (FIXTURES / "hosts" / "h200-1gpu" / name).read_text()


def _ours(folder: str, name: str) -> str:
    return (HOSTS / folder / name).read_text()


def test_real_h200_xml_every_field():
    (gpu,), driver, cuda = parse_nvidia_smi_xml(_h200("nvidia-smi-q.xml"))
    assert (driver, cuda) == ("580.159.04", "13.0")
    assert (gpu.index, gpu.name, gpu.bus_id, gpu.architecture, gpu.form_factor) == (
        0, "NVIDIA H200", "00000000:00:06.0", "Hopper", "SXM")
    assert (gpu.uuid, gpu.vbios) == ("GPU-00000000-1111-2222-3333-444444444444", "96.00.A5.00.1A")
    assert (gpu.memory_total_mib, gpu.memory_used_mib) == (143771, 0)
    assert (gpu.sm_clock_mhz, gpu.mem_clock_mhz, gpu.max_sm_clock_mhz, gpu.max_mem_clock_mhz) == (420, 3201, 1980, 3201)
    assert gpu.applications_sm_clock_mhz == 1980
    assert (gpu.power_draw_w, gpu.power_limit_w, gpu.default_power_limit_w, gpu.max_power_limit_w) == (
        119.27, 700.0, 700.0, 700.0)
    assert (gpu.ecc_mode, gpu.ecc_volatile_uncorrected, gpu.ecc_volatile_corrected, gpu.ecc_aggregate_uncorrected) == (
        "Enabled", 0, 0, 0)
    assert (gpu.remapped_rows_pending, gpu.remapped_rows_failure) == (False, False)
    assert (gpu.mig_mode, gpu.mig_devices, gpu.persistence, gpu.compute_mode) == ("Disabled", 0, True, "Default")
    assert gpu.throttle_reasons == ("gpu_idle",)
    assert (gpu.performance_state, gpu.temperature_c) == ("P0", 35)
    assert (gpu.pcie_gen, gpu.pcie_gen_max, gpu.pcie_width, gpu.pcie_width_max) == (5, 5, 16, 16)
    assert gpu.processes == 0


def test_serial_numbers_never_enter_the_facts():
    gpus, _, _ = parse_nvidia_smi_xml(_ours("h100-8gpu-nvlink", "nvidia-smi-q.xml"))
    assert "serial" not in {f.name for f in dataclasses.fields(gpus[0])}
    assert "0000000000000" not in json.dumps([dataclasses.asdict(g) for g in gpus])


def test_real_h200_topology_cpu_memory_os_and_torch():
    topo = parse_topology(_h200("nvidia-smi-topo.txt"))
    assert (topo.gpu_count, topo.links, topo.cpu_affinity, topo.numa_affinity) == (1, (), ("0-15",), ("0",))
    cpu = parse_lscpu(_h200("lscpu.txt"))
    assert (cpu.model, cpu.logical_cpus, cpu.sockets, cpu.cores_per_socket, cpu.threads_per_core) == (
        "Intel(R) Xeon(R) Processor", 16, 1, 16, 1)
    assert (cpu.numa_nodes, cpu.numa_node_cpus) == (1, ("node0: 0-15",))
    mem = parse_meminfo(_h200("meminfo.txt"))
    assert (mem.total_kib, mem.available_kib) == (131981020, 131478416)
    os_facts = parse_os_release(_h200("os-release.txt"), kernel="6.8.0")
    assert (os_facts.pretty_name, os_facts.id, os_facts.version_id, os_facts.kernel) == (
        "Ubuntu 24.04.3 LTS", "ubuntu", "24.04", "6.8.0")
    rt = parse_runtime_versions(_h200("torch-env.json"), "host: saved")
    assert (rt.python, rt.torch, rt.torch_cuda, rt.cudnn, rt.nccl, rt.devices) == (
        "3.12.3", "2.11.0+cu130", "13.0", "9.19.0", "2.28.9", ("NVIDIA H200",))
    assert rt.triton is None and rt.error is None


def test_eight_gpu_nvlink_topology_ignores_nics():
    topo = parse_topology(_ours("h100-8gpu-nvlink", "nvidia-smi-topo.txt"))
    assert topo.gpu_count == 8
    assert len(topo.links) == 28 and all(link.kind == "NV18" and link.nvlink for link in topo.links)
    assert {(link.a, link.b) for link in topo.links} == {(a, b) for a in range(8) for b in range(a + 1, 8)}
    assert topo.cpu_affinity == ("0-55,112-167",) * 4 + ("56-111,168-223",) * 4
    assert topo.numa_affinity == ("0",) * 4 + ("1",) * 4
    cpu = parse_lscpu(_ours("h100-8gpu-nvlink", "lscpu.txt"))
    assert (cpu.logical_cpus, cpu.sockets, cpu.numa_nodes) == (224, 2, 2)


def test_pcie_pair_with_older_driver_names():
    gpus, driver, _ = parse_nvidia_smi_xml(_ours("h100-pcie-pair", "nvidia-smi-q.xml"))
    assert driver == "535.183.01"
    assert [g.form_factor for g in gpus] == ["PCIe", "PCIe"]
    # <clocks_throttle_reasons> and <power_readings>, as drivers before R550 print them
    assert gpus[0].throttle_reasons == ("gpu_idle",)
    assert (gpus[0].power_limit_w, gpus[0].max_power_limit_w, gpus[0].power_draw_w) == (350.0, 350.0, 71.42)
    (link,) = parse_topology(_ours("h100-pcie-pair", "nvidia-smi-topo.txt")).links
    assert (link.a, link.b, link.kind, link.nvlink) == (0, 1, "NODE", False)


def test_mig_ecc_and_throttle_fixtures():
    (mig,), _, _ = parse_nvidia_smi_xml(_ours("h100-mig", "nvidia-smi-q.xml"))
    assert (mig.mig_mode, mig.mig_devices) == ("Enabled", 2)
    ok, bad = parse_nvidia_smi_xml(_ours("h100-ecc-errors", "nvidia-smi-q.xml"))[0]
    assert (ok.ecc_volatile_uncorrected, ok.remapped_rows_pending) == (0, False)
    assert (bad.ecc_volatile_uncorrected, bad.ecc_volatile_corrected, bad.ecc_aggregate_uncorrected) == (2, 3, 2)
    assert bad.remapped_rows_pending is True
    (hot,), _, _ = parse_nvidia_smi_xml(_ours("h100-throttled", "nvidia-smi-q.xml"))
    assert hot.throttle_reasons == ("sw_power_cap", "hw_slowdown", "hw_thermal_slowdown")
    assert (hot.power_limit_w, hot.default_power_limit_w, hot.temperature_c) == (500.0, 700.0, 91)


def test_oldest_ecc_layout_double_bit_totals():
    xml = ("<nvidia_smi_log><driver_version>470.1</driver_version><cuda_version>11.4</cuda_version>"
           "<gpu id='0'><product_name>Tesla V100-SXM2-16GB</product_name><ecc_errors><volatile>"
           "<single_bit><total>5</total></single_bit><double_bit><total>1</total></double_bit></volatile>"
           "</ecc_errors></gpu></nvidia_smi_log>")
    (gpu,), _, _ = parse_nvidia_smi_xml(xml)
    assert (gpu.ecc_volatile_corrected, gpu.ecc_volatile_uncorrected, gpu.form_factor) == (5, 1, "SXM")
    assert gpu.throttle_reasons is None and gpu.memory_total_mib is None  # absent means unknown, not zero


def test_record_header_table_as_gpu_facts():
    folder = FIXTURES / "record-logs" / "2025-09-23_MuonCustomSizing"
    for log in sorted(folder.glob("*.tail.txt")):
        gpus = gpus_from_table(parse_nvidia_smi_table(log.read_text()))
        assert len(gpus) == 8
        for g in gpus:
            assert (g.name, g.form_factor, g.memory_total_mib, g.power_limit_w) == (
                "NVIDIA H100 80GB HBM3", "SXM", 81559, 700.0)
            assert (g.ecc_mode, g.ecc_volatile_uncorrected, g.mig_mode, g.persistence, g.compute_mode) == (
                "Enabled", 0, "Disabled", True, "Default")
            assert g.source == "nvidia-smi table" and g.throttle_reasons is None and g.uuid is None


@pytest.mark.parametrize("name, max_power, expected", [
    ("NVIDIA H100 80GB HBM3", 700.0, "SXM"), ("NVIDIA H100 PCIe", 350.0, "PCIe"), ("NVIDIA H100 NVL", 400.0, "NVL"),
    ("NVIDIA H200", 700.0, "SXM"), ("NVIDIA H200 NVL", 600.0, "NVL"), ("NVIDIA A100-SXM4-80GB", 400.0, "SXM"),
    ("NVIDIA L4", 72.0, "unknown"), ("NVIDIA H200", None, "unknown")])
def test_form_factor_inference(name, max_power, expected):
    assert infer_form_factor(name, max_power) == expected


@pytest.mark.parametrize("text, problem", [
    ("<nvidia_smi_log><gpu>", "not valid XML"), ("<other/>", "not <nvidia_smi_log>")])
def test_bad_xml_is_an_input_error(text, problem):
    with pytest.raises(InputError, match=problem):
        parse_nvidia_smi_xml(text)


def test_bad_topology_and_meminfo_are_input_errors():
    with pytest.raises(InputError, match="no GPU0 column header"):
        parse_topology("nothing here\n")
    with pytest.raises(InputError, match="do not match GPU columns"):
        parse_topology("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-3\n")
    with pytest.raises(InputError, match="no MemTotal"):
        parse_meminfo("MemFree: 1 kB\n")
    with pytest.raises(InputError, match="did not print a JSON object"):
        parse_runtime_versions("Traceback (most recent call last):\n", "host: python")


def test_runtime_versions_tolerate_noise_and_number_formats():
    text = 'UserWarning: something\n{"python": "3.10.12 (main)", "torch": "2.8.0", "cudnn": 8902, "nccl": 22105}\n'
    rt = parse_runtime_versions(text, "host: x")
    assert (rt.python, rt.cudnn, rt.nccl) == ("3.10.12", "8.9.2", "2.21.5")


def test_environment_allow_list_keeps_secrets_out():
    environ = json.loads(_ours("h100-8gpu-nvlink", "environ.json"))
    assert allowed_environment(environ) == {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7", "NCCL_DEBUG": "WARN",
                                            "NCCL_IB_HCA": "mlx5"}


def test_docker_info_keeps_only_what_a_gpu_run_needs():
    info = json.loads(_ours("h100-8gpu-nvlink", "docker-info.json"))
    facts = parse_docker_info(info)
    assert (facts.server_version, facts.runtimes, facts.nvidia_runtime, facts.root_dir) == (
        "27.3.1", ("nvidia", "runc"), True, "/var/lib/docker")
    assert "hunter2" not in json.dumps(dataclasses.asdict(facts))
