"""Which FP8 matmuls the device's torch and cuBLAS do, asked before the runs start (seconds): the preflight's
probe (pipeline/preflight/fp8.py: scalar 0-d scales) beside the call 2026-07-17's down projection makes (its
scales are 1-element slices `scales[i:i+1]`, its B a transposed view of a bank), and the lm-head call of the
2025 programs. One line per variant: ok, or the error's first line.

    python3 docs/device-runs/2026-12-02-h200-history-2/fp8_variants.py
"""
import torch

print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))
E4M3 = torch.float8_e4m3fn


def attempt(label, make):
    try:
        a, b, sa, sb = make()
        y = torch._scaled_mm(a, b, out_dtype=torch.bfloat16, scale_a=sa, scale_b=sb, use_fast_accum=True)
        torch.cuda.synchronize()
        print(f"{label}: ok {tuple(y.shape)}")
    except Exception as exc:  # noqa: BLE001 -- the error is the answer
        print(f"{label}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")


def probe():  # the preflight's call: 16384x3072 by 3072x768, B column-major, 0-d scales
    x = torch.randn(16384, 3072, device="cuda").to(E4M3)
    w = torch.randn(3072, 768, device="cuda").to(E4M3)
    one = torch.ones((), device="cuda")
    return x, w.T.contiguous().T, one, one


def down_projection():  # 2026-07-17: B from a (12, 768, 3072) bank transposed, 1-element slice scales
    x = torch.randn(16384, 3072, device="cuda").to(E4M3)
    bank = torch.randn(12, 768, 3072, device="cuda").to(E4M3)
    scales = torch.ones(12, device="cuda")
    w = bank.transpose(1, 2).unbind(0)[3]
    return x, w, torch.ones(1, device="cuda"), scales[3:4]


def down_projection_0d():  # the same with 0-d scales
    x, w, _, _ = down_projection()
    one = torch.ones((), device="cuda")
    return x, w, one, one


def lm_head():  # the 2025 programs' lm head: 49152x768 by 768x50304, B column-major, 0-d scales
    x = torch.randn(49152, 768, device="cuda").to(E4M3)
    w = torch.randn(50304, 768, device="cuda").to(E4M3)
    one = torch.ones((), device="cuda")
    return x, w.T, one, one


for name, make in (("probe", probe), ("down_projection", down_projection),
                   ("down_projection_0d_scales", down_projection_0d), ("lm_head", lm_head)):
    attempt(name, make)
