"""Mean milliseconds per call, for the GPU benchmarks and their CPU smoke runs (no Triton import).

    from benchmarks.timing import time_ms
    ms = time_ms(lambda: kernel(x), reps=10)                      # CUDA events on the current stream
    ms = time_ms(fn, reps=1, device="cpu")                        # wall clock, no warm-up: a CPU smoke run

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
