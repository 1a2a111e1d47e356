"""Mean milliseconds per call, for the GPU benchmarks and their CPU smoke runs (no Triton import).

    from train.timing import time_ms
    ms = time_ms(lambda: kernel(x), reps=10)                      # CUDA events on the current stream
    ms = time_ms(fn, reps=1, device="cpu")                        # wall clock, no warm-up: a CPU smoke run
    both = record_and_fused((rec_fwd, fused_fwd), (rec_step, fused_step), reps=20)   # a kernel's --time core

On CUDA, calls are queued without waiting, so the host clock would time the launches: events bracket the GPU
work instead, after 3 warm-up calls that take the first call's compiles and allocations out of the mean. On the
CPU (the smoke runs of the GPU benchmarks' code) the numbers mean nothing, so nothing is warmed up.
"""

import time

import torch


def time_ms(fn, reps: int = 20, device: str = "cuda") -> float:
    if device != "cuda":
        began = time.perf_counter()
        for _ in range(reps):
            fn()
        return (time.perf_counter() - began) * 1000 / reps
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


def record_and_fused(forward: tuple, step: tuple, reps: int = 20, device: str = "cuda") -> dict:
    """The core of a fused kernel's --time report: (record, fused) forward calls and forward + backward calls ->
    ms of each, and each side's forward + backward under the profiler (train/profile.py's per_call: kernels,
    and whether the GPU waits on the host)."""
    from train.profile import per_call

    return dict(record_fwd_ms=time_ms(forward[0], reps, device), fused_fwd_ms=time_ms(forward[1], reps, device),
                record_fwd_bwd_ms=time_ms(step[0], reps, device), fused_fwd_bwd_ms=time_ms(step[1], reps, device),
                profile_fwd_bwd={"record": per_call(step[0], device=device), "fused": per_call(step[1], device=device)})
