"""The record-format run log (trainer.md section 5) and the metrics.jsonl beside it. Rank 0 writes both.

    from train.log import RunLog
    log = RunLog(Path("log.txt"), Path("metrics.jsonl"), enabled=rank == 0)
    log.header()                                       # program text, environment block, nvidia-smi
    log.val(0, 1680, 10.8258, 0.0); log.step(1, 1680, 155.0)
    log.event("step", step=1, train_time_ms=155.0)     # one JSON object per line
    log.peak_memory(30760, 45914)

Log layout: <program> "\n" "="*100 "\n" Running Python ... / Running PyTorch ... compiled for CUDA ... /
Running Triton version ... / nvidia-smi output / "="*100 / step and val lines / peak memory line.
For the native trainer the program is the declared files of train/program.py, each preceded by a marker line
`# ---- train/<name>.py ----`.
"""

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

from train import program

SEPARATOR = "=" * 100


def program_text() -> str:
    return program.program_text().decode("utf-8")


def triton_version() -> str:
    try:
        import triton
    except ImportError:
        return "unavailable"
    return triton.__version__


def nvidia_smi_output() -> str:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return "nvidia-smi: not found on this machine (no NVIDIA driver tools)\n"
    done = subprocess.run([exe], capture_output=True, text=True, timeout=60, check=False)
    return done.stdout if done.returncode == 0 else f"nvidia-smi failed ({done.returncode}): {done.stderr}"


class RunLog:
    def __init__(self, log_path: Path | None, metrics_path: Path | None, enabled: bool = True,
                 console: bool = True):
        self.enabled, self.console = enabled, console
        self._log = self._metrics = None
        if enabled:
            for path in (log_path, metrics_path):
                if path is not None:
                    Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._log = open(log_path, "w") if log_path else None  # noqa: SIM115 - closed in close()
            self._metrics = open(metrics_path, "w") if metrics_path else None  # noqa: SIM115

    def _write(self, text: str, console: bool) -> None:
        if not self.enabled:
            return
        if self._log:
            self._log.write(text)
            self._log.flush()
        if console and self.console:
            print(text, end="", flush=True)

    def header(self) -> None:
        self._write(program_text() + "\n" + SEPARATOR + "\n", console=False)
        env = (f"Running Python {sys.version}\n"
               f"Running PyTorch {torch.version.__version__} compiled for CUDA {torch.version.cuda}\n"
               f"Running Triton version {triton_version()}\n")
        self._write(env + nvidia_smi_output() + "\n" + SEPARATOR + "\n", console=True)

    def val(self, step: int, total: int, loss: float, train_time_ms: float) -> None:
        self._write(f"step:{step}/{total} val_loss:{loss:.4f} train_time:{train_time_ms:.0f}ms "
                    f"step_avg:{train_time_ms / max(step, 1):.2f}ms\n", console=True)

    def step(self, step: int, total: int, train_time_ms: float) -> None:
        """`step` counts completed steps (the record prints s+1 after training step s)."""
        self._write(f"step:{step}/{total} train_time:{train_time_ms:.0f}ms step_avg:{train_time_ms / step:.2f}ms\n",
                    console=True)

    def peak_memory(self, allocated_mib: int, reserved_mib: int) -> None:
        self._write(f"peak memory allocated: {allocated_mib} MiB reserved: {reserved_mib} MiB\n", console=True)

    def note(self, text: str) -> None:
        """Console only (the log keeps the record's format)."""
        if self.enabled and self.console:
            print(text, flush=True)

    def event(self, kind: str, **fields) -> None:
        if self.enabled and self._metrics:
            self._metrics.write(json.dumps(dict(event=kind, time=round(time.time(), 3), **fields)) + "\n")
            self._metrics.flush()

    def close(self) -> None:
        for f in (self._log, self._metrics):
            if f:
                f.close()
        self._log = self._metrics = None
