"""Benchmark of the record configuration on one GPU: step time, peak memory, MFU (not a test).

    python benchmarks/bench.py --data .devcarry/docs-v1 --steps 160 --out /tmp/bench [--checks]
    python benchmarks/bench.py --data .devcarry/docs-v1 --steps 300 --val-every 50 --warmup-steps 3 --out /tmp/curve

Runs the record's model, batch (393,216 tokens = 8 micro-steps at world size 1) and schedule scaled to --steps,
on the shards in --data with data cycling on (small data sets) and a small validation set. MFU is model FLOPs
per second over the bf16 matmul rate measured here on an 8192³ product of random matrices. Model FLOPs per
token: 6 per matmul weight (attention, MLP, head) plus 12·D per attended (query, key) pair in each attention
layer, the pairs counted on the first training micro-batch for each window setting. --checks first compares
compiled FlexAttention and the FP8 head with references on this GPU. Results: <out>/log.txt, metrics.jsonl,
summary.json, and a table on stdout. Numbers and the exact device command: train/BENCHMARKS.md.
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a file: the repo root for train/

import torch  # noqa: E402

from train.config import apply_overrides, preset  # noqa: E402
from train.data import TrainLoader  # noqa: E402
from train.model import layer_plan  # noqa: E402
from train.schedule import window_blocks  # noqa: E402


def matmul_peak_tflops(device: torch.device, n: int = 8192, reps: int = 20) -> float:
    """Median bf16 rate of an n³ product of random matrices, timed with CUDA events."""
    a, b = (torch.randn(n, n, device=device, dtype=torch.bfloat16) for _ in range(2))
    for _ in range(3):
        a @ b
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000)
    return 2 * n**3 / statistics.median(times) / 1e12


def attended_pairs(doc_lengths: list[int], window: int) -> int:
    """(query, key) pairs with key <= query, query - key <= window, same document."""
    total = 0
    for n in doc_lengths:
        w = window + 1  # keys per query once the window is full
        total += n * (n + 1) // 2 if n <= w else w * (w + 1) // 2 + (n - w) * w
    return total


def flops_per_step(cfg, doc_lengths: list[int], ws_short: int, ws_long: int) -> dict:
    D, Vp = cfg.model_dim, cfg.padded_vocab
    plan = layer_plan(cfg.num_layers)
    weights = sum(4 * D * D for s in plan if s.has_attn) + sum(8 * D * D for s in plan if s.has_mlp) + D * Vp
    tokens = cfg.train_batch_tokens
    pairs = sum(attended_pairs(doc_lengths, (ws_long if s.long_window else ws_short) * cfg.block_size)
                for s in plan if s.has_attn)
    matmul, attention = 6 * weights * tokens, 12 * D * pairs * cfg.batch_slots
    return dict(matmul=matmul, attention=attention, total=matmul + attention)


def gpu_checks(device: torch.device) -> dict:
    """Compiled FlexAttention vs a float32 reference, and the FP8 head vs bf16, on random inputs."""
    from train.attention import attention
    from train.model import Head

    def rel(a, b):
        return ((a.float() - b.float()).norm() / b.float().norm()).item()

    results = {}
    T, H, hd = 4096, 6, 128
    bounds = torch.tensor([0, 700, 701, 2500, 3000] + [T] * 11, dtype=torch.int32, device=device)
    flex = torch.compile(lambda q, k, v, w, s: attention(q, k, v, bounds, w, s, backend="flex", max_seqlen=T),
                         dynamic=False, fullgraph=True)
    for window in (128, 384, 1664):
        q, k, v = (torch.randn(T, H, hd, device=device, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        grad = torch.randn(T, H, hd, device=device, dtype=torch.bfloat16)
        w_t, s_t = torch.tensor(window, device=device), torch.tensor(0.12, device=device)
        out = flex(q, k, v, w_t, s_t)
        got = [out, *torch.autograd.grad(out, (q, k, v), grad)]
        ref_out = attention(q, k, v, bounds, window, 0.12, backend="dense", max_seqlen=T)
        ref = [ref_out, *torch.autograd.grad(ref_out, (q, k, v), grad)]
        results[f"flex_window{window}"] = {n: rel(g, r) for n, g, r in zip(("out", "dq", "dk", "dv"), got, ref)}

    head = Head(768, 50304, fp8=True).to(device).bfloat16()
    with torch.no_grad():
        head.weight.normal_(0, 0.02)
    x = torch.nn.functional.rms_norm(torch.randn(8192, 768, device=device), (768,)).bfloat16().requires_grad_()
    g = torch.randn(8192, 50304, device=device, dtype=torch.bfloat16) * 1e-3
    compiled_head = torch.compile(head, dynamic=False, fullgraph=True)
    out8 = compiled_head(x)
    dx8, dw8 = torch.autograd.grad(out8, (x, head.weight), g)
    head.fp8 = False
    out16 = head(x)
    dx16, dw16 = torch.autograd.grad(out16, (x, head.weight), g)
    results["fp8_head_vs_bf16"] = dict(out=rel(out8, out16), dx=rel(dx8, dx16), dw=rel(dw8, dw16),
                                       dw_dtype=str(dw8.dtype))
    return results


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="benchmarks/bench.py")
    ap.add_argument("--data", required=True, help="folder with fineweb_train_*.bin and fineweb_val_*.bin")
    ap.add_argument("--steps", type=int, default=160)
    ap.add_argument("--val-every", type=int, default=125)
    ap.add_argument("--val-tokens", type=int, default=524_288)
    ap.add_argument("--warmup-steps", type=int, default=30)
    ap.add_argument("--checks", action="store_true", help="run the GPU correctness checks first")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", required=True)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    if not torch.cuda.is_available():
        print("benchmarks/bench.py needs a CUDA GPU", file=sys.stderr)
        return 4
    from train.loop import train

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda", 0)
    summary: dict = dict(gpu=torch.cuda.get_device_name(device), torch=torch.__version__)
    if args.checks:
        t = time.perf_counter()
        summary["checks"] = gpu_checks(device)
        summary["checks_s"] = round(time.perf_counter() - t, 1)
        print(json.dumps(summary["checks"], indent=1), flush=True)
    summary["matmul_peak_tflops"] = matmul_peak_tflops(device)
    print(f"bf16 matmul peak (8192^3, random): {summary['matmul_peak_tflops']:.0f} TFLOP/s", flush=True)

    data = Path(args.data)
    cfg = apply_overrides(preset("record"), [
        f"train_files={data / 'fineweb_train_*.bin'}", f"val_files={data / 'fineweb_val_*.bin'}",
        "data_cycle=true", f"val_tokens={args.val_tokens}", f"val_batch_tokens={args.val_tokens}",
        f"val_every={args.val_every}", f"warmup_steps={args.warmup_steps}", *args.overrides])
    cfg = cfg.with_total_steps(args.steps).validate()

    first = TrainLoader(cfg.train_files, cfg.train_tokens_per_slot, cfg.train_max_seq_len, cfg.batch_slots, 1,
                        0).next_batch()
    bounds = first.doc_bounds.tolist()
    doc_lengths = [b - a for a, b in zip(bounds, bounds[1:]) if b > a]
    per_step = [flops_per_step(cfg, doc_lengths, *window_blocks(s, cfg))["total"] for s in range(cfg.total_steps)]

    t = time.perf_counter()
    result = train(cfg, out / "log.txt", out / "metrics.jsonl")
    wall = time.perf_counter() - t
    events = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    warm_end = next(e["time"] for e in events if e["event"] == "warmup")
    first_val = next(e["time"] for e in events if e["event"] == "val")
    model_flops = sum(per_step) / cfg.total_steps
    mfu = model_flops / (result.step_avg_ms / 1000) / (summary["matmul_peak_tflops"] * 1e12)
    summary.update(
        steps=cfg.total_steps, step_avg_ms=result.step_avg_ms, train_time_ms=result.train_time_ms,
        peak_allocated_mib=result.peak_allocated_mib, peak_reserved_mib=result.peak_reserved_mib,
        model_tflop_per_step=model_flops / 1e12,
        matmul_share=flops_per_step(cfg, doc_lengths, 3, 7)["matmul"] / flops_per_step(cfg, doc_lengths, 3, 7)["total"],
        mfu=mfu, compile_and_warmup_s=result.warmup_s, first_validation_s=first_val - warm_end, wall_s=wall,
        val_losses=result.val_losses, attention=result.attention, fp8=result.fp8,
        config=dict(steps=cfg.total_steps, val_tokens=cfg.val_tokens, val_every=cfg.val_every,
                    warmup_steps=cfg.warmup_steps, data=str(data)))
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"\n{'steps':24}{cfg.total_steps}\n{'step_avg':24}{result.step_avg_ms:.1f} ms"
          f"\n{'peak allocated':24}{result.peak_allocated_mib / 1024:.2f} GiB (reserved "
          f"{result.peak_reserved_mib / 1024:.2f} GiB)\n{'model TFLOP / step':24}{model_flops / 1e12:.1f}"
          f"\n{'MFU':24}{100 * mfu:.1f} % of {summary['matmul_peak_tflops']:.0f} TFLOP/s"
          f"\n{'compile + warm-up':24}{result.warmup_s:.0f} s (first validation {first_val - warm_end:.0f} s)"
          f"\n{'val losses':24}{', '.join(f'{s}:{v:.3f}' for s, v in result.val_losses)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
