"""A failed run's reason, in the trainer's words, reaches run.yaml and the verdict (never a traceback of repro's).

The end-to-end cases start the two-file stand-in under the real torchrun of this venv: once raising the
error the newest record met on torch 2.11 (an FP8 matmul cuBLAS does not support), once at a world size its
assertion refuses.
"""

from __future__ import annotations

import pytest
import yaml

from pipeline.runs.failure import failure_reason
from tests.standin.record import NAME, multifile_program, repro, served_record, write_data

CUBLAS = ("CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasLtMatmul( ltHandle, computeDesc.descriptor(), "
          "&alpha_val, mat1_ptr, ...)`")
TORCHRUN_OUTPUT = f"""step:0/40 val_loss:10.8258
[rank0]: Traceback (most recent call last):
[rank0]:   File "/run/work/train_gpt.py", line 2188, in <module>
[rank0]:     loss.backward()
[rank0]: RuntimeError: {CUBLAS}
E1201 12:00:00.000000 123 torch/distributed/elastic/multiprocessing/api.py:882] failed (exitcode: 1)
Traceback (most recent call last):
  File "/usr/local/bin/torchrun", line 8, in <module>
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train_gpt.py FAILED
[repro] run X failed (exit code 1): /runs/X
"""


def test_the_workers_last_exception_is_the_reason_not_torchruns_wrapper(tmp_path):
    out = tmp_path / "stdout.txt"
    out.write_text(TORCHRUN_OUTPUT)
    assert failure_reason(out) == f"RuntimeError: {CUBLAS}"
    out.write_text("step:1/40 train_time:1ms\n")
    assert failure_reason(out) is None
    assert failure_reason(tmp_path / "absent.txt") is None


@pytest.mark.parametrize("options, nproc, reason", [
    ({"raise": CUBLAS}, "1", f"RuntimeError: {CUBLAS}"),
    ({}, "3", "AssertionError: world_size must be a divisor of 8"),
])
def test_a_failed_run_ends_with_a_verdict_naming_its_reason(tmp_path, options, nproc, reason):
    with served_record(tmp_path, multifile_program()) as env:
        done = repro(env, "train", "--record", NAME, "--runtime", "host", "--nproc", nproc,
                     "--data-dir", str(write_data(tmp_path / "data", **options)), "--runs-dir", str(tmp_path / "runs"))
        assert done.returncode != 0
        (run,) = (tmp_path / "runs" / NAME).iterdir()
        assert yaml.safe_load((run / "run.yaml").read_text())["failure"] == reason
        verdict = repro(env, "verify", "--record", NAME, str(run))
    assert verdict.returncode == 1 and "Traceback" not in verdict.stderr
    assert f"run status is failed (exit code 1): {reason}" in verdict.stdout


# 2025-11-29_BatchSizeSchedule on the H200 beside two 2026 programs (docs/device-runs/2026-12-02-h200-history-3)
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.61 GiB. GPU 0 has a total capacity of 139.80 "
       "GiB of which 4.11 GiB is free. Including non-PyTorch memory, this process has 29.83 GiB memory in use. "
       "Process 1304 has 52.77 GiB memory in use. Process 1296 has 53.08 GiB memory in use.")


def test_out_of_memory_beside_other_processes_is_named_a_shared_gpu(tmp_path):
    from pipeline.runs.failure import shared_gpu

    assert shared_gpu(OOM) == ("other processes (2) held 105.85 GiB of the GPU when it ran out, this run 29.83 GiB: "
                               "the GPU was shared, run it alone")
    assert shared_gpu("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.61 GiB.") is None  # alone
    assert shared_gpu(f"RuntimeError: {CUBLAS}") is None and shared_gpu(None) is None
    with served_record(tmp_path, multifile_program()) as env:  # the worker dies with the message, as on the H200
        repro(env, "train", "--record", NAME, "--runtime", "host", "--nproc", "1",
              "--data-dir", str(write_data(tmp_path / "data", **{"raise": OOM})), "--runs-dir", str(tmp_path / "runs"))
        (run,) = (tmp_path / "runs" / NAME).iterdir()
        verdict = repro(env, "verify", "--record", NAME, str(run))
    assert "(other processes (2) held 105.85 GiB of the GPU when it ran out, this run 29.83 GiB" in verdict.stdout
