"""Mean milliseconds per call, for the GPU benchmarks and their CPU smoke runs (no Triton import).

    from train.timing import time_ms
    ms = time_ms(lambda: kernel(x), reps=10)                      # CUDA events on the current stream
    ms = time_ms(fn, reps=1, warmup=0, cuda=False)                # wall clock: a CPU smoke run

On CUDA, calls are queued without waiting, so the host clock would time the launches: events bracket the GPU
work instead. The warm-up calls take the first call's compiles and allocations out of the mean.
"""

import time

import torch


def time_ms(fn, reps: int = 20, warmup: int = 3, cuda: bool = True) -> float:
    for _ in range(warmup):
        fn()
    if not cuda:
        began = time.perf_counter()
        for _ in range(reps):
            fn()
        return (time.perf_counter() - began) * 1000 / reps
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps
