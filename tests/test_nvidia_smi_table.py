"""The nvidia-smi table parser on the record's real log headers, the real H200 host and written variants.

    .venv/bin/python -m pytest -q tests/test_nvidia_smi_table.py
"""

from __future__ import annotations

import pytest

from pipeline.errors import InputError
from pipeline.records.nvidia_smi_table import find_nvidia_smi_table, parse_nvidia_smi_table
from tests.conftest import shared_path

# A 2-row-per-GPU table as drivers before MIG printed it, a truncated name, ECC off (N/A), fan present.
OLD_DRIVER_TABLE = """\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 450.80.02    Driver Version: 450.80.02    CUDA Version: 11.0     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  GeForce RTX 208...  Off  | 00000000:01:00.0  On |                  N/A |
| 41%   48C    P2    68W / 250W |   1034MiB / 11019MiB |     12%   E. Process |
+-------------------------------+----------------------+----------------------+
|   1  GeForce RTX 208...  Off  | 00000000:02:00.0 Off |                  N/A |
| 30%   35C    P8    N/A /  N/A |      1MiB / 11019MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+
"""

# A current-format table with MIG on and one uncorrected ECC error, surrounded by other log text.
MIG_TABLE_IN_LOG = """\
step:0 something before
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 570.148.08             Driver Version: 570.148.08     CUDA Version: 12.8     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA H100 PCIe               On  |   00000000:17:00.0 Off |                    1 |
| N/A   44C    P0             85W /  350W |      13MiB /  81559MiB |     N/A      Default |
|                                         |                        |              Enabled |
+-----------------------------------------+------------------------+----------------------+

+-----------------------------------------------------------------------------------------+
| MIG devices:                                                                            |
+------------------+----------------------------------+-----------+-----------------------+
"""


def _tail_texts() -> list[str]:
    folder = shared_path("fixtures", "record-logs", "2025-09-23_MuonCustomSizing")
    return [p.read_text() for p in sorted(folder.glob("*.tail.txt"))]


def test_record_log_header_has_eight_h100_sxm():
    texts = _tail_texts()
    assert len(texts) == 4
    for text in texts:
        table = parse_nvidia_smi_table(text)
        assert (table.smi_version, table.driver, table.cuda) == ("570.148.08", "570.148.08", "12.8")
        assert [g.index for g in table.gpus] == list(range(8))
        assert {g.name for g in table.gpus} == {"NVIDIA H100 80GB HBM3"}
        assert [g.bus_id for g in table.gpus] == [
            "00000000:61:00.0", "00000000:62:00.0", "00000000:63:00.0", "00000000:64:00.0",
            "00000000:6A:00.0", "00000000:6B:00.0", "00000000:6C:00.0", "00000000:6D:00.0"]
        for gpu in table.gpus:
            assert gpu.memory_total_mib == 81559
            assert gpu.power_cap_w == 700.0
            assert gpu.persistence is True
            assert gpu.ecc_volatile_uncorrected == 0
            assert gpu.compute_mode == "Default"
            assert gpu.mig_mode == "Disabled" and not gpu.mig_enabled
            assert gpu.perf_state == "P0"
            assert gpu.fan_percent is None  # SXM boards have no fan: "N/A"


def test_record_log_first_gpu_readings():
    gpu0 = parse_nvidia_smi_table(_tail_texts()[0]).gpus[0]
    assert (gpu0.temperature_c, gpu0.power_draw_w, gpu0.memory_used_mib, gpu0.utilization_percent) == (
        31, 120.0, 5858, 0)
    assert gpu0.display_active == "Off"


def test_real_h200_host_table():
    text = shared_path("fixtures", "hosts", "h200-1gpu", "nvidia-smi.txt").read_text()
    table = parse_nvidia_smi_table(text)
    assert (table.driver, table.cuda) == ("580.159.04", "13.0")
    (gpu,) = table.gpus
    assert (gpu.name, gpu.bus_id, gpu.memory_total_mib, gpu.memory_used_mib) == (
        "NVIDIA H200", "00000000:00:06.0", 143771, 0)
    assert (gpu.power_draw_w, gpu.power_cap_w, gpu.ecc_volatile_uncorrected, gpu.mig_mode) == (
        116.0, 700.0, 0, "Disabled")


def test_old_two_row_table_with_truncated_names_and_ecc_off():
    table = parse_nvidia_smi_table(OLD_DRIVER_TABLE)
    assert (table.driver, table.cuda) == ("450.80.02", "11.0")
    first, second = table.gpus
    assert first.name == "GeForce RTX 208..." and first.name_truncated
    assert first.persistence is False and first.display_active == "On"
    assert first.ecc_volatile_uncorrected is None
    assert (first.fan_percent, first.temperature_c, first.perf_state) == (41, 48, "P2")
    assert (first.power_draw_w, first.power_cap_w) == (68.0, 250.0)
    assert (first.utilization_percent, first.compute_mode, first.mig_mode) == (12, "E. Process", "")
    assert (second.power_draw_w, second.power_cap_w) == (None, None)


def test_table_inside_other_text_with_mig_and_ecc_error():
    table = parse_nvidia_smi_table(MIG_TABLE_IN_LOG)
    (gpu,) = table.gpus  # the MIG devices table that follows is not a GPU row
    assert gpu.name == "NVIDIA H100 PCIe"
    assert gpu.mig_enabled and gpu.ecc_volatile_uncorrected == 1
    assert (gpu.utilization_percent, gpu.compute_mode) == (None, "Default")


def test_missing_table_is_a_clear_input_error():
    assert find_nvidia_smi_table("step:1/1680 train_time:155ms\n") is None
    with pytest.raises(InputError, match="run.log: no nvidia-smi table found") as info:
        parse_nvidia_smi_table("step:1/1680 train_time:155ms\n", source="run.log")
    assert "fix:" in str(info.value)


def test_garbled_gpu_row_is_a_clear_input_error():
    broken = MIG_TABLE_IN_LOG.replace("|   0  NVIDIA H100 PCIe               On  |", "| garbage |")
    with pytest.raises(InputError, match="could not be read"):
        parse_nvidia_smi_table(broken, source="x.txt")
