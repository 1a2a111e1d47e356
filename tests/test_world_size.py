"""A program that asserts its world size (`assert world_size == 8 # this code is designed for 8xH100`, nineteen
programs of 2025) is refused at any other process count before its launch, and runs at its own.

The refusal is read from the syntax tree (pipeline/records/world_size.py); the run is the stand-in record's
(tests/standin/record.py) pinning a program with that assert, served on 127.0.0.1, trained by the real torchrun.
"""

from __future__ import annotations

import pytest

from pipeline.records.world_size import required_world_size, world_size_refusal
from tests.standin.record import NAME, program_bytes, repro, served_record, write_data


@pytest.mark.parametrize(("source", "need"), [
    ("world_size = 8\nassert world_size == 8 # this code is designed for 8xH100\n", (8, 2)),
    ("world_size = 8\nassert 8 == world_size\n", (8, 2)),
    ("def main():\n    assert world_size == 4, 'four'\n", (4, 2)),
    ("#assert world_size == 8 # this code is designed for 8xH100\n", None),  # TritonMuon's, commented out
    ('assert 8 % world_size == 0, "world_size must be a divisor of 8"\n', None),  # 1, 2, 4 and 8 all run
    ("assert world_size <= 8\n", None),
    ("assert world_size == 8.0\n", None),
    ("def broken(:\n", None),  # the program reader refuses it with its own reason
])
def test_the_asserted_world_size_is_read_from_the_tree(source, need):
    assert required_world_size(source.encode()) == need


def test_the_refusal_names_the_line_and_the_node_it_needs():
    program = b"import os\nworld_size = 1\nassert world_size == 8 # this code is designed for 8xH100\n"
    what, fix = world_size_refusal(program, 1)
    assert "asserts world_size == 8 (train_gpt.py line 3)" in what and "1 process(es)" in what
    assert "--nproc 8" in fix and "8 GPUs" in fix
    assert world_size_refusal(program, 8) is None


def _asserting(n: int) -> bytes:
    """The stand-in program with the assert the 2025 programs carry, after its world size is read."""
    line = b'world_size = int(os.environ.get("WORLD_SIZE", "1"))\n'
    assert line in program_bytes()
    return program_bytes().replace(line, line + f"assert world_size == {n} # designed for {n} GPUs\n".encode())


def test_a_run_at_another_world_size_is_refused_before_launch_and_runs_at_its_own(tmp_path):
    with served_record(tmp_path, _asserting(2)) as env:
        data = write_data(tmp_path / "data")
        runs = tmp_path / "runs"
        base = ["train", "--record", NAME, "--runtime", "host", "--data-dir", str(data), "--runs-dir", str(runs)]
        refused = repro(env, *base, "--nproc", "1")
        assert refused.returncode == 3, refused.stdout + refused.stderr
        assert "asserts world_size == 2" in refused.stderr and "--nproc 2" in refused.stderr
        assert "Traceback" not in refused.stderr and not runs.exists()  # no run folder, nothing launched
        done = repro(env, *base, "--nproc", "2")
        assert done.returncode == 0, done.stdout + done.stderr


def test_a_plan_made_on_the_node_counts_its_gpus_without_nproc(tmp_path):
    """`--plan` without --nproc, where nvidia-smi answers (the plan is made on the node): a run would start one
    process per GPU listed, so the program's assert is checked against that count. The driver's tool is a
    stand-in script listing one H200, as the device's does; without it, nothing is counted and nothing refused."""
    import json

    from tests.standin.record import standin_log

    log = tmp_path / "log.txt"
    log.write_bytes(standin_log(_asserting(2)))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text('#!/bin/sh\n[ "$1" = "-L" ] && echo "GPU 0: NVIDIA H200 (UUID: GPU-0)"\n')
    (bin_dir / "nvidia-smi").chmod(0o755)
    with served_record(tmp_path, _asserting(2)) as env:
        plan = ["reproduce", "--record", NAME, "--plan", "--json", "--runtime", "host", "--program-source", str(log)]
        on_node = repro({**env, "PATH": f"{bin_dir}:{env['PATH']}"}, *plan)
        elsewhere = repro({**env, "PATH": "/usr/bin:/bin"}, *plan)
    refusals = json.loads(on_node.stdout)["refusals"]
    assert any(r.startswith("world size: the program asserts world_size == 2") and "this node's 1 GPU(s)" in r
               for r in refusals), refusals
    assert not any(r.startswith("world size:") for r in json.loads(elsewhere.stdout)["refusals"])
