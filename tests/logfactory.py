"""Build record-format run logs for tests: the layout of trainer.md section 5, any hardware, any cut."""

from __future__ import annotations

SEP = "=" * 100

PROGRAM = '''"""A stand-in training program."""
import os

# learning rate
LR = 0.05


def train(steps):
    """Run the steps."""
    total = 0
    for s in range(steps):
        total += s * LR
    return total
'''


def nvidia_smi(gpu_name="NVIDIA H100 80GB HBM3", count=8, driver="570.148.08", cuda="12.8", mem=81559):
    rows = []
    for i in range(count):
        rows += [
            f"|   {i}  {gpu_name:<26}On  |   00000000:{0x61 + i:02X}:00.0 Off |                    0 |",
            f"| N/A   31C    P0            120W /  700W |    1519MiB /  {mem}MiB |      0%      Default |",
            "|                                         |                        |             Disabled |",
            "+-----------------------------------------+------------------------+----------------------+",
        ]
    return "\n".join([
        "Wed Sep 24 06:04:47 2025       ",
        "+-----------------------------------------------------------------------------------------+",
        f"| NVIDIA-SMI {driver:<22} Driver Version: {driver:<14} CUDA Version: {cuda:<9}|",
        "|-----------------------------------------+------------------------+----------------------+",
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |                        |               MIG M. |",
        "|=========================================+========================+======================|",
        *rows,
        "",
    ])


def make_log(program: str | None = PROGRAM, *, steps=1680, final_loss=3.2795, step_ms=89.1, val_every=125,
             python="3.10.12", torch="2.9.0.dev20250726+cu126", torch_cuda="12.6", triton="3.4.0",
             cut_after_step: int | None = None, **smi) -> str:
    head = [SEP,
            f"Running Python {python} (main, May 27 2025, 17:12:29) [GCC 11.4.0]",
            f"Running PyTorch {torch} compiled for CUDA {torch_cuda}",
            f"Running Triton version {triton}",
            nvidia_smi(**smi), SEP]
    lines = []
    for s in range(steps + 1):
        ms = round(s * step_ms)
        if s == 0 or s % val_every == 0 or s == steps:
            loss = final_loss if s == steps else 10.8 - 7.4 * s / steps
            lines.append(f"step:{s}/{steps} val_loss:{loss:.4f} train_time:{ms}ms step_avg:{ms / max(s, 1):.2f}ms")
        if cut_after_step is not None and s == cut_after_step:
            lines.append(f"step:{s + 1}/{steps} train_ti")  # a line cut mid-write by the crash
            break
        if s < steps:
            ms = round((s + 1) * step_ms)
            lines.append(f"step:{s + 1}/{steps} train_time:{ms}ms step_avg:{ms / (s + 1):.2f}ms")
    else:
        lines.append("peak memory allocated: 30760 MiB reserved: 45914 MiB")
    body = "\n".join(head + lines) + "\n"
    return (program + "\n" + body) if program is not None else body
