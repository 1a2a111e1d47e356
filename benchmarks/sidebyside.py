"""The record's program and train/ side by side on the same GPUs: same shards, schedule and attention code.

    python benchmarks/sidebyside.py --data .devcarry/docs-v1 --steps 80 --world-sizes 1,2 --out $OUT/sbs
    python benchmarks/sidebyside.py --data DIR --program path/to/train_gpt.py ...   (default: the test fixture)
    python benchmarks/sidebyside.py --data DIR --dry-run --out /tmp/sbs               (print the commands only)

For each world size (CUDA_VISIBLE_DEVICES = the first N GPUs), one after the other:
  record  torchrun --standalone --nproc_per_node=N <out>/record-wsN/train_gpt.py   (cwd: that folder)
          the program patched by record_program.sidebyside_patch (each change listed in patch.json):
          the shards, --steps scheduled iterations and no extension, --val-tokens validation tokens in one
          batch, training files cycled when they cannot last the run, optionally --warmup-steps.
          Attention: pipeline/runs/fa3_standin first on PYTHONPATH, i.e. train/'s FlexAttention code behind FA3's
          signature (also where FA3 is installed, unless --attention fa3).
  native  torchrun --standalone --nproc_per_node=N -m train --preset record --set scheduled_steps=<steps>
          --set extension_steps=0 --set attention=flex ... (the same shards, validation, warm-up, cycling)
Both keep the record's Muon momentum warm-up (300 steps), validation every 125 steps (so at 0 and the end),
its windows and lr schedule over --steps (tests/test_train_vs_record.py checks the two loops apply the same
values), and the record's global batch (393,216 tokens: 8 / N micro-steps per rank).

Reported from the two record-format logs (rank 0): step time = difference of consecutive `train_time`
(validations excluded by both programs), median and mean per window phase (long window 3 / 7 / 11 blocks)
and over all steps; the ratio native / record; peak memory; MFU = model FLOPs per step (train/bench.py's count:
6 per matmul weight per token + attention pairs of the first micro-batch) / step time / (N x the bf16 matmul
rate measured by a separate process at the start and at the end of this call). Written to <out>/summary.json
and <out>/summary.md after every run, so a cut-off call still returns what finished.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.record_program import FIXTURE, STANDIN_DIR, program_text, sidebyside_patch  # noqa: E402

STEP_RE = re.compile(r"^step:(\d+)/(\d+) train_time:(\d+)ms step_avg:([\d.]+)ms\s*$")
VAL_RE = re.compile(r"^step:(\d+)/(\d+) val_loss:([\d.]+) train_time:(\d+)ms")
PEAK_RE = re.compile(r"^peak memory allocated: (\d+) MiB reserved: (\d+) MiB")
RECORD_BATCH = 2048 * 24 * 8


# ---- logs -> step times --------------------------------------------------------------------------------------------

def parse_log(text: str) -> dict:
    """Step clock readings, validations and peak memory from a record-format log (either program's).

    The clock at step k is read from `step_avg` x k (2 decimals) while that is finer than `train_time`'s whole
    milliseconds, i.e. for k < 100, else from train_time."""
    clock, vals, peak, total = {}, [], None, None
    for line in text.splitlines():
        if m := STEP_RE.match(line):
            k, total = int(m[1]), int(m[2])
            clock[k] = float(m[4]) * k if k < 100 else float(m[3])
        elif m := VAL_RE.match(line):
            vals.append((int(m[1]), float(m[3])))
            total = int(m[2])
            if int(m[1]) == 0:
                clock[0] = float(m[4])
        elif m := PEAK_RE.match(line):
            peak = (int(m[1]), int(m[2]))
    clock.setdefault(0, 0.0)
    return dict(clock=clock, vals=vals, peak_mib=peak, total=total)


def step_times(clock: dict[int, float]) -> dict[int, float]:
    """{training step s (0-based): ms}, from consecutive clock readings."""
    return {k - 1: clock[k] - clock[k - 1] for k in sorted(clock) if k >= 1 and k - 1 in clock}


def phase_of(step: int, steps: int, schedule=(3, 7, 11)) -> int:
    """Long window (blocks) of training step `step` in a run of `steps` scheduled steps (train.schedule's rule)."""
    x = min(step / (1 + steps), 0.9999)
    return schedule[int(len(schedule) * x)]


def phase_stats(times: dict[int, float], steps: int) -> dict:
    """Per long window and overall: step count, median and mean ms. A phase's first step is left out of the
    phase (step 0 follows the first validation; later ones hold YaRN's table update and, in the record, a graph
    switch), not out of "all"."""
    phases: dict[str, list[float]] = {}
    for s, ms in sorted(times.items()):
        ws = phase_of(s, steps)
        if s == 0 or phase_of(s - 1, steps) != ws:
            continue
        phases.setdefault(str(ws), []).append(ms)
    out = {ws: dict(n=len(v), median_ms=statistics.median(v), mean_ms=statistics.fmean(v))
           for ws, v in phases.items() if v}
    every = list(times.values())
    if every:
        out["all"] = dict(n=len(every), median_ms=statistics.median(every), mean_ms=statistics.fmean(every))
    return out


# ---- FLOPs ----------------------------------------------------------------------------------------------------------

def flops_by_phase(train_files: str) -> dict[str, float]:
    """Model FLOPs per step of the record configuration for each long window (train/bench.py's count)."""
    from train.bench import flops_per_step
    from train.config import preset
    from train.data import TrainLoader

    cfg = preset("record")
    first = TrainLoader(train_files, cfg.train_tokens_per_slot, cfg.train_max_seq_len, cfg.batch_slots, 1,
                        0).next_batch()
    bounds = first.doc_bounds.tolist()
    lengths = [b - a for a, b in zip(bounds, bounds[1:]) if b > a]
    return {str(ws): flops_per_step(cfg, lengths, ws // 2, ws)["total"] for ws in cfg.ws_schedule}


def measure_matmul() -> dict:
    """Run in a separate process (`--matmul`): the bf16 matmul rate and the software versions."""
    import torch

    from train.bench import matmul_peak_tflops
    from train.log import triton_version

    device = torch.device("cuda", 0)
    return dict(tflops=matmul_peak_tflops(device), gpu=torch.cuda.get_device_name(device), torch=torch.__version__,
                cuda=torch.version.cuda, triton=triton_version())


# ---- runs -----------------------------------------------------------------------------------------------------------

def torchrun(ws: int) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ws}"]


def record_command(a, ws: int, run_dir: Path, cycle: bool) -> tuple[list[str], dict, Path, list[dict]]:
    """Write the patched program into run_dir; return (command, extra env, cwd, listed changes)."""
    text, changes = sidebyside_patch(program_text(a.program), train_files=a.train_files, val_files=a.val_files,
                                     steps=a.steps, val_tokens=a.val_tokens, cycle_train=cycle,
                                     warmup_steps=a.warmup_steps)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "train_gpt.py").write_text(text)
    (run_dir / "patch.json").write_text(json.dumps(changes, indent=1))
    path = [str(REPO)] if a.attention == "fa3" else [str(STANDIN_DIR), str(REPO)]
    return torchrun(ws) + ["train_gpt.py"], dict(PYTHONPATH=os.pathsep.join(path)), run_dir, changes


def native_command(a, ws: int, run_dir: Path, cycle: bool) -> tuple[list[str], dict, Path]:
    run_dir.mkdir(parents=True, exist_ok=True)
    sets = [f"scheduled_steps={a.steps}", "extension_steps=0", f"val_tokens={a.val_tokens}",
            f"val_batch_tokens={a.val_tokens}", f"attention={a.attention}", f"data_cycle={str(cycle).lower()}"]
    if a.warmup_steps is not None:
        sets.append(f"warmup_steps={a.warmup_steps}")
    cmd = torchrun(ws) + ["-m", "train", "--preset", "record", "--train-files", a.train_files,
                          "--val-files", a.val_files, "--log-file", str(run_dir / "log.txt"),
                          "--metrics-file", str(run_dir / "metrics.jsonl")]
    for s in sets:
        cmd += ["--set", s]
    return cmd, dict(PYTHONPATH=str(REPO)), REPO


def run(cmd: list[str], env_extra: dict, cwd: Path, out_file: Path, ws: int, timeout: float) -> dict:
    """Run one program with the first `ws` GPUs; stdout+stderr to out_file; kill its process group on timeout."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=",".join(str(i) for i in range(ws)), PYTHONUNBUFFERED="1",
               **env_extra)
    env.pop("DISABLE_FP8", None)  # FP8 head in both
    started = time.perf_counter()
    with out_file.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait(timeout=max(timeout, 1))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            rc = "timeout"
    return dict(rc=rc, wall_s=round(time.perf_counter() - started, 1))


def run_result(log_text: str, steps: int, flops: dict[str, float], tflops: float | None, ws: int) -> dict:
    """Phases with MFU: a phase's FLOPs over its median step; over all steps, total FLOPs over total time."""
    parsed = parse_log(log_text)
    times = step_times(parsed["clock"])
    stats = phase_stats(times, steps)
    if tflops and times:
        rate = ws * tflops * 1e12
        for ws_long, s in stats.items():
            if ws_long == "all":
                mean_flops = statistics.fmean(flops[str(phase_of(step, steps))] for step in times)
                s["mfu"] = mean_flops / (s["mean_ms"] / 1000) / rate
            else:
                s["mfu"] = flops[ws_long] / (s["median_ms"] / 1000) / rate
    return dict(phases=stats, val_losses=parsed["vals"], peak_mib=parsed["peak_mib"],
                steps_logged=max(parsed["clock"]))


def table(summary: dict) -> str:
    lines = [f"# side by side: {summary.get('env', {}).get('gpu', '?')}, torch {summary.get('env', {}).get('torch')}",
             f"steps {summary['steps']}, val tokens {summary['val_tokens']}, attention {summary['attention']}, "
             f"bf16 matmul rate {summary.get('tflops')} TFLOP/s", "",
             "| ws | phase | record ms (median / mean) | native ms (median / mean) | native / record (median) "
             "| MFU record / native |", "|---|---|---|---|---|---|"]
    for ws, pair in summary["runs"].items():
        rec, nat = pair.get("record", {}).get("phases", {}), pair.get("native", {}).get("phases", {})
        for phase in ("3", "7", "11", "all"):
            r, n = rec.get(phase), nat.get(phase)
            ratio = f"{n['median_ms'] / r['median_ms']:.3f}" if r and n else "—"

            def cell(s):
                return f"{s['median_ms']:.1f} / {s['mean_ms']:.1f}" if s else "—"

            def mfu(s):
                return f"{100 * s['mfu']:.1f} %" if s and "mfu" in s else "—"

            lines.append(f"| {ws} | {phase} | {cell(r)} | {cell(n)} | {ratio} | {mfu(r)} / {mfu(n)} |")
        for who in ("record", "native"):
            res = pair.get(who, {})
            peak = res.get("peak_mib")
            memory = f"{peak[0] / 1024:.2f} GiB allocated ({peak[1] / 1024:.2f} reserved)" if peak else "—"
            lines.append(f"|  | {who}: rc {res.get('rc')}, wall {res.get('wall_s')} s, peak {memory}, "
                         f"val {res.get('val_losses')} | | | | |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/sidebyside.py")
    ap.add_argument("--data", help="folder with fineweb_train_*.bin and fineweb_val_*.bin")
    ap.add_argument("--train-files", help="glob of training shards (instead of --data)")
    ap.add_argument("--val-files", help="glob of validation shards (instead of --data)")
    ap.add_argument("--program", type=Path, default=FIXTURE, help="the record's program (default: the fixture)")
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--val-tokens", type=int, default=524_288)
    ap.add_argument("--warmup-steps", type=int, default=None, help="default: each program's own (30)")
    ap.add_argument("--world-sizes", default="1,2")
    ap.add_argument("--attention", choices=("flex", "fa3"), default="flex")
    ap.add_argument("--budget-s", type=float, default=570, help="stop starting runs after this many seconds")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--dry-run", action="store_true", help="write the patched programs, print the commands")
    ap.add_argument("--matmul", action="store_true", help=argparse.SUPPRESS)  # the child that measures the rate
    a = ap.parse_args(argv)
    started = time.perf_counter()
    if a.matmul:
        print(json.dumps(measure_matmul()))
        return 0
    if a.out is None:
        ap.error("--out is required")
    if a.data:
        a.train_files = a.train_files or str(Path(a.data).resolve() / "fineweb_train_*.bin")
        a.val_files = a.val_files or str(Path(a.data).resolve() / "fineweb_val_*.bin")
    if not (a.train_files and a.val_files):
        ap.error("give --data or both --train-files and --val-files")
    a.train_files = str(Path(a.train_files).expanduser().resolve())  # the record runs from its own folder
    a.val_files = str(Path(a.val_files).expanduser().resolve())
    world_sizes = [int(w) for w in a.world_sizes.split(",")]

    from train.data import shards_total_tokens

    # cycle only where the data cannot last: BOS alignment skips the tails of long documents, so ask for twice
    cycle = shards_total_tokens(a.train_files, "train") < 2 * a.steps * RECORD_BATCH
    flops = flops_by_phase(a.train_files)
    a.out.mkdir(parents=True, exist_ok=True)
    summary: dict = dict(steps=a.steps, val_tokens=a.val_tokens, attention=a.attention, cycle_train=cycle,
                         train_files=a.train_files, val_files=a.val_files, program=str(a.program),
                         model_flops_per_step=flops, runs={})

    def save() -> None:
        (a.out / "summary.json").write_text(json.dumps(summary, indent=1))
        (a.out / "summary.md").write_text(table(summary))

    if not a.dry_run:
        rate = subprocess.run([sys.executable, __file__, "--matmul"], capture_output=True, text=True, cwd=REPO,
                              env=dict(os.environ, PYTHONPATH=str(REPO)))
        if rate.returncode != 0:
            print(rate.stderr, file=sys.stderr)
            return 4
        summary["env"] = json.loads(rate.stdout.strip().splitlines()[-1])
        summary["tflops_start"] = summary["tflops"] = round(summary["env"].pop("tflops"), 1)
        print(f"bf16 matmul rate {summary['tflops']} TFLOP/s on {summary['env']['gpu']}", flush=True)

    for ws in world_sizes:
        pair = summary["runs"].setdefault(str(ws), {})
        for who in ("record", "native"):
            run_dir = a.out / f"{who}-ws{ws}"
            if who == "record":
                cmd, env, cwd, changes = record_command(a, ws, run_dir, cycle)
                pair["patch"] = changes
            else:
                cmd, env, cwd = native_command(a, ws, run_dir, cycle)
            print(f"[{who} ws{ws}] cd {cwd} && {' '.join(f'{k}={v}' for k, v in env.items())} {' '.join(cmd)}",
                  flush=True)
            if a.dry_run:
                continue
            left = a.budget_s - (time.perf_counter() - started) - 20  # 20 s for the closing matmul and summary
            if left < 60:
                pair[who] = dict(rc="skipped: out of budget")
                continue
            res = run(cmd, env, cwd, run_dir / "stdout.txt", ws, left)
            logs = sorted((run_dir / "logs").glob("*.txt")) if who == "record" else [run_dir / "log.txt"]
            log_text = logs[-1].read_text() if logs and logs[-1].exists() else ""
            if log_text:
                res.update(run_result(log_text, a.steps, flops, summary["tflops"], ws))
            pair[who] = res
            print(f"[{who} ws{ws}] rc {res['rc']}, wall {res['wall_s']} s, "
                  f"all-step median {res.get('phases', {}).get('all', {}).get('median_ms')} ms", flush=True)
            save()

    if not a.dry_run and a.budget_s - (time.perf_counter() - started) > 15:
        rate = subprocess.run([sys.executable, __file__, "--matmul"], capture_output=True, text=True, cwd=REPO,
                              env=dict(os.environ, PYTHONPATH=str(REPO)))
        if rate.returncode == 0:
            summary["tflops_end"] = round(json.loads(rate.stdout.strip().splitlines()[-1])["tflops"], 1)
    summary["wall_s"] = round(time.perf_counter() - started, 1)
    save()
    print(table(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
