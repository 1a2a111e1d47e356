"""Which one-element scale form the device's torch and cuBLAS refuse in 2026-07-17's FP8 down projection (seconds).

The second lease found `scale_b=scales[3:4]` refused and 0-d scales done; this lease's first attempt found the
preflight's fresh one-element scales (`torch.ones(1)`) done although the program's run then failed. One line per
form: ok, or the error's first line.

    python3 docs/device-runs/2026-12-02-h200-history-3/fp8_scales.py
"""
import torch

E4M3 = torch.float8_e4m3fn
print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))
x = torch.randn(16384, 3072, device="cuda").to(E4M3)
w = torch.randn(3072, 768, device="cuda").to(E4M3).T.contiguous().T  # column-major, as the preflight's
bank = torch.ones(12, device="cuda")
FORMS = {
    "0-d both": (torch.ones((), device="cuda"), torch.ones((), device="cuda")),
    "fresh [1] both": (torch.ones(1, device="cuda"), torch.ones(1, device="cuda")),
    "slice [0:1] of 12 as b": (torch.ones(1, device="cuda"), bank[0:1]),
    "slice [3:4] of 12 as b": (torch.ones(1, device="cuda"), bank[3:4]),
    "slice [4:5] of 12 as b": (torch.ones(1, device="cuda"), bank[4:5]),
    "slice [3:4] of 12 as a and b": (bank[3:4], bank[3:4]),
}
for label, (sa, sb) in FORMS.items():
    try:
        y = torch._scaled_mm(x, w, out_dtype=torch.bfloat16, scale_a=sa, scale_b=sb, use_fast_accum=True)
        torch.cuda.synchronize()
        print(f"{label}: ok {tuple(y.shape)}")
    except Exception as exc:  # noqa: BLE001 -- the error is the answer
        print(f"{label}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
