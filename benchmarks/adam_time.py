"""What compiling DistAdam's update buys: ms per optimizer step, eager against compiled, on the record's tensors.

    python benchmarks/adam_time.py                          # a GPU, the record's model: JSON on stdout
    TORCHDYNAMO_DISABLE=1 python benchmarks/adam_time.py --device cpu --preset tiny    (CPU smoke, no compile)

The Adam parameters of train/'s record model (embedding, 3 value embeddings and head, 50,304 x 768 bf16 each;
the 72 scalars in float32), random gradients, one process (world size 1: every tensor whole; at world size N
each rank updates 1/N of every tensor, so the update's time divides by about N and the collectives come on top).
Timed: DistAdam.step() with compile=False (about eight bf16 passes per tensor) and compile=True (one fused
kernel per shape), after warm-up steps so that the compile is not counted. Both runs start from the same
parameters and gradients, and the parameters they end with are compared, so a fast wrong update shows.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a file: the repo root for train/

import torch  # noqa: E402

from benchmarks.timing import time_ms  # noqa: E402
from train.adam import DistAdam  # noqa: E402
from train.config import preset  # noqa: E402
from train.model import GPT  # noqa: E402


def time_steps(adam: DistAdam, device: torch.device, steps: int) -> float:
    """Mean ms per adam.step() over `steps` steps (CUDA events on a GPU, wall clock on the CPU)."""
    return time_ms(adam.step, reps=steps, device=device.type)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/adam_time.py")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--preset", default="record")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    a = ap.parse_args(argv)
    device = torch.device(a.device)
    cfg = preset(a.preset)
    torch.manual_seed(0)
    with torch.device(device):
        model = GPT(cfg, attention_backend="dense", fp8=False)
    groups = model.adam_groups()
    params = [p for g in groups for p in g["params"]]
    start = [p.detach().clone() for p in params]
    grads = [torch.randn_like(p) * 1e-3 for p in params]

    result: dict = dict(device=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                        torch=torch.__version__, preset=a.preset,
                        tensors=[[list(p.shape), str(p.dtype).removeprefix("torch.")] for p in params])
    ends = {}
    for compiled in (False, True):
        with torch.no_grad():
            for p, p0, g in zip(params, start, grads):
                p.copy_(p0)
                p.grad = g
        adam = DistAdam(model.adam_groups(), lr=cfg.adam_lr, betas=(0.8, 0.95), eps=1e-8, compile=compiled)
        time_steps(adam, device, a.warmup)  # compiles (compiled=True) and allocates the moments
        result["compiled_ms" if compiled else "eager_ms"] = round(time_steps(adam, device, a.steps), 3)
        ends[compiled] = [p.detach().float().clone() for p in params]
    # the same steps from the same start: fused and unfused arithmetic may differ by bf16 roundings only
    result["max_rel_diff"] = max(((e - c).norm() / c.norm().clamp_min(1e-30)).item()
                                 for e, c in zip(ends[False], ends[True]))
    result["saved_ms"] = round(result["eager_ms"] - result["compiled_ms"], 3)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
