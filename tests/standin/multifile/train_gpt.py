"""A stand-in for a 2026 record's program in tests: two files, the record's Hyperparameters layout, hub kernels.

Like 2026-07-17_FP8DownProjection's train_gpt.py it reads its own source and triton_kernels.py from its folder
and logs both, one after the other under a divider; its schedule is num_scheduled_iterations +
num_extension_iterations, and with {"hub": true} in data/fineweb10B/standin.json it takes FA3 from the kernels
hub (`get_kernel`) and runs one attention call on the CPU; {"show_kernels": true} prints where `kernels` is
found; with {"raise": TEXT} every worker raises
RuntimeError(TEXT) before training, as a failing GPU kernel would.
"""
import os
import sys
import uuid
from dataclasses import dataclass

with open(sys.argv[0]) as f:
    code = f.read()
with open(os.path.join(os.path.dirname(sys.argv[0]), 'triton_kernels.py')) as f:
    code += f"\n\n{'-'*40}\n# triton_kernels.py\n{'-'*40}\n\n"
    code += f.read()

import json  # noqa: E402

from triton_kernels import step_time_ms  # noqa: E402

rank = int(os.environ.get("RANK", "0"))
world_size = int(os.environ["WORLD_SIZE"])
assert 8 % world_size == 0, "world_size must be a divisor of 8"


@dataclass
class Hyperparameters:
    data_path = os.environ.get("DATA_PATH", ".")
    train_files: str = os.path.join(data_path, "data/fineweb10B/fineweb_train_*.bin")
    val_files: str = os.path.join(data_path, "data/fineweb10B/fineweb_val_*.bin")
    val_tokens: int = 10485760  # fixed for comparisons
    val_batch_size: int = 4 * 64 * 1024 * 8
    num_scheduled_iterations: int = 1380  # steps of the lr and window schedule
    num_extension_iterations: int = 10  # steps at the final lr and window
    val_loss_every: int = 250


args = Hyperparameters()
options_file = os.path.join("data/fineweb10B", "standin.json")
options = json.load(open(options_file)) if os.path.exists(options_file) else {}
if options.get("hub"):
    import torch
    from kernels import get_kernel

    flash_attn_interface = get_kernel('kernels-community/flash-attn3', version=1).flash_attn_interface
    q = torch.randn(8, 2, 4)
    bounds = torch.tensor([0, 8], dtype=torch.int32)
    y = flash_attn_interface.flash_attn_varlen_func(q, q, q, cu_seqlens_q=bounds, cu_seqlens_k=bounds, max_seqlen_q=8,
                                                    max_seqlen_k=8, causal=True, softmax_scale=0.5, window_size=(4, 0))
    print(f"attention through {getattr(flash_attn_interface, 'REPRO_STANDIN', 'FA3')}: {tuple(y.shape)}", flush=True)

if options.get("show_kernels"):  # where `kernels` would come from, without importing it (no torch needed)
    import importlib.util

    found = importlib.util.find_spec("kernels")
    print(f"kernels from {found.origin if found else None}", flush=True)
if options.get("raise"):  # a failure as a GPU would report it, raised in every worker
    raise RuntimeError(options["raise"])

logfile = None
if rank == 0:
    os.makedirs("logs", exist_ok=True)
    logfile = f"logs/{uuid.uuid4()}.txt"


def print0(s):
    if rank == 0:
        with open(logfile, "a") as f:
            print(s, file=f)
        print(s, flush=True)


print0(code)
print0("=" * 100)
print0(f"Running Python {sys.version}")
print0("Running PyTorch 0.0.0+standin compiled for CUDA none")
print0("Running Triton version 0.0.0")
print0("=" * 100)
assert args.val_tokens % args.val_batch_size == 0
steps = args.num_scheduled_iterations + args.num_extension_iterations
train_ms = 0.0
for step in range(steps + 1):
    if step == steps or step % args.val_loss_every == 0:
        loss = 10.83 - 7.5 * step / steps
        print0(f"step:{step}/{steps} val_loss:{loss:.4f} train_time:{train_ms:.0f}ms "
               f"step_avg:{train_ms / max(step, 1):.2f}ms")
    if step == steps:
        break
    train_ms += step_time_ms()
    print0(f"step:{step + 1}/{steps} train_time:{train_ms:.0f}ms step_avg:{train_ms / (step + 1):.2f}ms")
print0("peak memory allocated: 30220 MiB reserved: 45914 MiB")
