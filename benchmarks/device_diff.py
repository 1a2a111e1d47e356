"""GPU variant of tests/test_train_vs_record.py: train/ against the record's own program in bf16, with the FP8
head and compiled graphs, at world size 1 and 2 (not a pytest test: run it on a GPU node).

    torchrun --standalone --nproc_per_node=1 benchmarks/device_diff.py --out $OUT/diff-ws1
    torchrun --standalone --nproc_per_node=2 benchmarks/device_diff.py --out $OUT/diff-ws2
    torchrun --standalone --nproc_per_node=2 benchmarks/device_diff.py --cpu-smoke --out /tmp/diff   (CPU, gloo)
    ... device_diff.py --set fused_loss=true --out $OUT/diff-fused     (train/ with an option; repeatable)

The record's program is loaded by benchmarks/record_program.py (its real Triton Newton–Schulz kernels, its
compiled DistAdam step and FP8 custom ops; FA3 if installed, else pipeline/runs/fa3_standin, i.e. train/'s
FlexAttention). Model: the record's 12 layers at --dim/--heads (default the record's 768/6), one micro-batch of
--tokens per rank (default 4096), the same random non-zero weights in both (bf16 where the record casts to bf16).

Three models: the record's (bf16, FP8 head, compiled), train/'s (the same), and a reference, the record's model in
float32 without FP8, eager. bf16 and FP8 make exact agreement impossible, so each check asks whether train/ is as
close to the float32 reference as the record itself is:
  loss, gradients:  err(train/, ref) <= max(2 * err(record, ref), floor)   (relative L2 error, per parameter;
                    per rank, as each rank has its own batch: every rank must pass, the nearest one is reported)
The optimizers get identical inputs: the record's gradients are copied into train/'s model before one step of
each codebase's DistAdam and Muon (step 0: lr x1, momentum 0.85), and the parameter updates are compared:
  Adam: rel <= 2e-2   both fuse the update under torch.compile (float32 inside, bf16 moments); a bf16 parameter
                      (embeddings, head) moves in steps of its own ulp (2^-8 relative), so an update of a few ulps
                      can round either way.
  Muon: rel <= 5e-2   both run Newton–Schulz in bf16 with float32-accumulating Triton kernels of different tiling;
                      summation order differences (~1e-3) grow through 5 iterations (1.1e-2 measured on CPU, random
                      64x64 blocks; the record's and train/'s CUDA kernels are each within 1e-2 of float32 torch).
The record's Muon groups are cut where attention meets MLP ([1, 10, 10, 6, 16], record_program.split_mixed_muon_groups):
at 1 or 2 ranks its [1, 10, 16, 16] would orthogonalize 6 MLP matrices as attention blocks (trainer.md section 3).
Results: <out>/device_diff.json and a table on stdout; exit code 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a file: the repo root for train/

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from benchmarks.numerics import rel  # noqa: E402
from benchmarks.record_program import (  # noqa: E402
    RecordSetup,
    bind_globals,
    load_record,
    name_map,
    random_weights,
    run_main_statement,
    split_mixed_muon_groups,
)
from train.config import apply_overrides, preset  # noqa: E402
from train.data import max_docs  # noqa: E402
from train.loop import AttnArgs, build_optimizers, set_hyperparameters  # noqa: E402
from train.model import GPT  # noqa: E402

LOSS_FLOOR, GRAD_FLOOR = 1e-4, 1e-3  # below these the reference comparison is float32 noise
ADAM_RTOL, MUON_RTOL = 2e-2, 5e-2


def judge(rows: torch.Tensor) -> tuple[bool, int]:
    """rows: one (value, bound, ...) row per rank -> (every rank within its own bound, the rank nearest or
    furthest over its bound). A NaN value fails."""
    ratio = (rows[:, 0] / rows[:, 1]).nan_to_num(float("inf"))
    return bool((ratio <= 1).all()), int(ratio.argmax())


def make_batch(T: int, seed: int, device: torch.device):
    """Random tokens and documents of 50..3000 tokens (some longer than the windows and max_seq_len 2048)."""
    gen = torch.Generator().manual_seed(seed)
    inputs = torch.randint(0, 50257, (T,), generator=gen, dtype=torch.int32)
    targets = torch.randint(0, 50257, (T,), generator=gen)
    starts, pos = [0], 0
    while True:
        pos += int(torch.randint(50, 3000, (1,), generator=gen))
        if pos >= T or len(starts) == max_docs(T) - 1:
            break
        starts.append(pos)
    bounds = torch.full((max_docs(T),), T, dtype=torch.int32)
    bounds[: len(starts)] = torch.tensor(starts)
    return inputs.to(device), targets.to(device), bounds.to(device)


def init(cpu_smoke: bool) -> tuple[int, int, torch.device]:
    if "RANK" not in os.environ:  # plain `python benchmarks/device_diff.py`: one rank
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="29577")
    rank, world, local = (int(os.environ[k]) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))
    if cpu_smoke:
        torch.set_num_threads(1)
        dist.init_process_group("gloo")
        return rank, world, torch.device("cpu")
    if not torch.cuda.is_available():
        raise SystemExit("device_diff needs CUDA (or --cpu-smoke)")
    device = torch.device("cuda", local)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    return rank, world, device


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/device_diff.py")
    ap.add_argument("--out", required=True)
    # --cpu-smoke's defaults are smaller: three float32 models of the record's size on each of two ranks, with
    # gradients and optimizer state, do not fit a 24 GiB machine
    ap.add_argument("--tokens", type=int, default=None, help="micro-batch tokens per rank, a multiple of 128 "
                    "(default 4096; 1024 with --cpu-smoke)")
    ap.add_argument("--dim", type=int, default=None, help="model width (default 768; 256 with --cpu-smoke)")
    ap.add_argument("--heads", type=int, default=None, help="attention heads (default 6; 2 with --cpu-smoke)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cpu-smoke", action="store_true", help="CPU, float32, eager, dense attention: checks the script")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="train/ config override for train/'s model, e.g. fused_loss=true (repeatable)")
    a = ap.parse_args(argv)
    rank, world, device = init(a.cpu_smoke)
    a.dim, a.heads = a.dim or (256 if a.cpu_smoke else 768), a.heads or (2 if a.cpu_smoke else 6)
    started = time.perf_counter()
    gpu = device.type == "cuda"
    T, bs = a.tokens or (1024 if a.cpu_smoke else 4096), 128
    rec = load_record(device.type)

    # train/'s config: the record's, at this size; the record's Hyperparameters to match (it reads them globally)
    cfg = apply_overrides(preset("record"), [
        f"model_dim={a.dim}", f"num_heads={a.heads}", f"train_batch_tokens={8 * T}", f"val_batch_tokens={8 * T}",
        f"val_tokens={8 * T}", f"compile={gpu}", f"fp8={gpu}", f"bf16={gpu}",
        f"attention={'flex' if gpu else 'dense'}", *a.overrides])
    args = rec.Hyperparameters(train_batch_size=8 * T, val_batch_size=8 * T, val_tokens=8 * T)
    bind_globals(rec, args, device, 8 // world)

    def record_model():
        with torch.device(device):
            return rec.GPT(vocab_size=cfg.vocab_size, num_layers=cfg.num_layers, num_heads=cfg.num_heads,
                           head_dim=cfg.head_dim, model_dim=cfg.model_dim, max_seq_len=cfg.rotary_len)

    with torch.device(device):
        ours = GPT(cfg, attention_backend=cfg.attention, fp8=cfg.fp8, world_size=world)
    record, ref = record_model(), record_model()
    if cfg.bf16:
        run_main_statement(rec, "m.bfloat16()", model=record)  # the record's own cast loop
    record.lm_head.use_fp8 = cfg.fp8
    ref.lm_head.use_fp8 = False
    names = name_map(cfg.num_layers)
    ours_p, rec_p, ref_p = dict(ours.named_parameters()), dict(record.named_parameters()), dict(ref.named_parameters())
    assert set(names) == set(ours_p) and set(names.values()) == set(rec_p) == set(ref_p)
    with torch.no_grad():
        for name, value in random_weights(ours, a.seed).items():
            rec_p[names[name]].copy_(value)  # rounds to bf16 where the record keeps bf16
            ours_p[name].copy_(rec_p[names[name]])
            ref_p[names[name]].copy_(rec_p[names[name]])  # float32 copy of the same (rounded) values
            assert ours_p[name].dtype == rec_p[names[name]].dtype, name
    fwd_ours, fwd_rec = ours, record
    if cfg.compile:
        fwd_ours = torch.compile(ours, dynamic=False, fullgraph=True)
        fwd_rec = torch.compile(record, dynamic=False, fullgraph=True)
    attn_args = AttnArgs(cfg.attention, bs, device)
    inputs, targets, bounds = make_batch(T, a.seed + 1 + rank, device)
    report: dict = dict(world_size=world, device=str(torch.cuda.get_device_name(device) if gpu else "cpu"),
                        torch=torch.__version__, real_fa3=rec.REAL_FA3, tokens_per_rank=T, dim=a.dim, heads=a.heads,
                        overrides=a.overrides,
                        bf16=cfg.bf16, fp8=cfg.fp8, compiled=cfg.compile, checks=[])

    def check(what: str, value: float, bound: float, **extra) -> None:
        # Each rank has its own batch, so its own value and its own bound (from its record-vs-reference noise):
        # every rank must pass, and the rank nearest its bound is the one reported.
        keys = sorted(extra)
        rows = torch.zeros(world, 2 + len(keys), dtype=torch.float64, device=device)
        rows[rank] = torch.tensor([value, bound, *(extra[k] for k in keys)], dtype=torch.float64)
        dist.all_reduce(rows)  # each rank fills its own row
        ok, worst = judge(rows)
        v, b, *rest = rows[worst].tolist()
        report["checks"].append(dict(what=what, value=v, bound=b, ok=ok, rank=worst, **dict(zip(keys, rest))))

    # ---- training mode: windows (3, 7) after one YaRN step, loss and every gradient -------------------------------
    for m in (ours,):
        m.yarn.extend(3, 7)
        m.refresh_step_weights()  # the bf16 copies the training forward multiplies by
    for m in (record, ref):
        m.yarn.apply(3, 7)
    loss_ours = fwd_ours(inputs, targets, bounds, *attn_args(3, 7, ours.yarn.attn_scale))
    loss_rec = fwd_rec(inputs, targets, bounds, 3, 7)
    loss_ref = ref(inputs, targets, bounds, 3, 7)
    for loss in (loss_ours, loss_rec, loss_ref):
        loss.backward()
    noise = rel(loss_rec, loss_ref)
    check("train loss", rel(loss_ours, loss_ref), max(2 * noise, LOSS_FLOOR), record_vs_ref=noise,
          ours_vs_record=rel(loss_ours, loss_rec))
    for name in names:
        g_ours, g_rec, g_ref = ours_p[name].grad, rec_p[names[name]].grad, ref_p[names[name]].grad
        noise = rel(g_rec, g_ref)
        value = rel(g_ours, g_ref) if g_ref.abs().sum() > 0 else float("inf")  # a zero gradient proves nothing
        check(f"grad {name}", value, max(2 * noise, GRAD_FLOOR), record_vs_ref=noise,
              ours_vs_record=rel(g_ours, g_rec))

    # ---- optimizers: the record's gradients into train/'s model, one step of each codebase ----------------------
    with torch.no_grad():
        for name in names:
            ours_p[name].grad.copy_(rec_p[names[name]].grad)
    adam, muon = build_optimizers(ours, cfg)
    setup = RecordSetup(rec, record)  # the record's own optimizer setup statements, on its (uncompiled) model
    report["record_muon_groups"] = split_mixed_muon_groups(setup.optimizer2)
    report["ours_muon_plan"] = muon.plan.to_dict()
    set_hyperparameters(adam, muon, cfg, 0)
    setup.apply_step_hyperparameters(0)
    before = {n: (ours_p[n].detach().clone(), rec_p[names[n]].detach().clone()) for n in names}
    adam.step()
    muon.step()
    for opt in setup.ns["optimizers"]:
        opt.step()
    adam_ids = {id(p) for g in adam.param_groups for p in g["params"]}
    for name in names:
        d_ours = ours_p[name].detach().float() - before[name][0].float()
        d_rec = rec_p[names[name]].detach().float() - before[name][1].float()
        is_adam = id(ours_p[name]) in adam_ids
        value = rel(d_ours, d_rec) if d_rec.abs().sum() > 0 else float("inf")
        check(f"{'adam' if is_adam else 'muon'} update {name}", value, ADAM_RTOL if is_adam else MUON_RTOL)

    # ---- eval mode: the final validation's windows (short 6, long 20) after YaRN 7 -> 11 -> 13 ----------------
    for old, new in ((7, 11), (11, 13)):
        ours.yarn.extend(old, new)
        record.yarn.apply(old, new)
        ref.yarn.apply(old, new)
    for m in (ours, record, ref):
        m.eval()
    with torch.no_grad():  # after the optimizer step: all three need the same weights again
        for name in names:
            ours_p[name].copy_(rec_p[names[name]])
            ref_p[names[name]].copy_(rec_p[names[name]])
        eval_inputs, eval_targets, eval_bounds = make_batch(T, a.seed + 100 + rank, device)
        ev_ours = fwd_ours(eval_inputs, eval_targets, eval_bounds, *attn_args(6, 20, ours.yarn.attn_scale))
        ev_rec = fwd_rec(eval_inputs, eval_targets, eval_bounds, 6, 20)
        ev_ref = ref(eval_inputs, eval_targets, eval_bounds, 6, 20)
    noise = rel(ev_rec, ev_ref)
    check("eval loss", rel(ev_ours, ev_ref), max(2 * noise, LOSS_FLOOR), record_vs_ref=noise,
          ours_vs_record=rel(ev_ours, ev_rec))

    report["seconds"] = round(time.perf_counter() - started, 1)
    failed = [c for c in report["checks"] if not c["ok"]]
    report["failed"] = len(failed)
    if rank == 0:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "device_diff.json").write_text(json.dumps(report, indent=1))
        print(f"device_diff: world size {world}, {report['device']}, torch {torch.__version__}, "
              f"FA3 {'real' if rec.REAL_FA3 else 'stand-in'}, {report['seconds']} s")
        print(f"{'check':44}{'value':>11}{'bound':>11}  {'record vs ref':>13}  {'ours vs record':>14}")
        for c in report["checks"]:
            print(f"{c['what'][:44]:44}{c['value']:11.2e}{c['bound']:11.2e}  "
                  f"{c.get('record_vs_ref', float('nan')):13.2e}  {c.get('ours_vs_record', float('nan')):14.2e}"
                  f"  {'ok' if c['ok'] else 'FAIL'}")
        print(f"{len(report['checks']) - len(failed)} ok, {len(failed)} failed")
    dist.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
