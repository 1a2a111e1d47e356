"""The record's program and train/ side by side on the same GPUs: same shards, schedule and attention code.

    python benchmarks/sidebyside.py --data .devcarry/docs-v1 --steps 80 --world-sizes 1,2 --out $OUT/sbs
    python benchmarks/sidebyside.py --data DIR --world-sizes 2 --repeat 3 --out $OUT/ws2   (3 runs each, alternating)
    python benchmarks/sidebyside.py --summarize $OUT/ws1 $OUT/ws2 --out merged   (one table, Welch t-test of losses)
    python benchmarks/sidebyside.py --data DIR --dry-run --out /tmp/sbs               (print the commands only)
    ... --variant unfused:fused_loss=false      (a third program: train/ with an override, named native-unfused)
    ... --variant unfused:fused_loss=false --variants-last   (record and native first, variants in the time left)
    ... --only record --shared-gpu   (runs that share the GPU: their losses count, their step times do not)
    ... --only native,native-off --variant off:KEY=VALUE   (no record: native against one variant, alternating;
        benchmarks/lever_ab.sh)
    ... --site benchmarks/compile_artifacts   (first on the programs' PYTHONPATH: its sitecustomize.py loads or
        saves torch.compiler's cache artifacts in every rank, as REPRO_COMPILE_ARTIFACTS_LOAD/_SAVE say)
    ... --gate-native 20   (each pair overlaps its startups: native starts 20 s first and waits after its warm-up
        at a gate, train.loop.wait_at_start_gate, that opens when the record exits; gated_pair)

For each world size N (CUDA_VISIBLE_DEVICES = --first-gpu .. +N-1), --repeat times, one after the other:
  record  torchrun --standalone --nproc_per_node=N train_gpt.py   (cwd: --program-dir, one path for every run so
          that the compile caches carry over) — the program patched by record_patch.sidebyside_patch (each
          change listed in the run's patch.json): the shards, --steps scheduled iterations and no extension,
          --val-tokens validation tokens in one batch, training files cycled when they cannot last the run,
          optionally --warmup-steps, and (default) the Muon groups cut where attention meets MLP so that below 8
          ranks it does the record's 8-rank math, as train/ does. Attention: pipeline/runs/fa3_standin first on
          PYTHONPATH, i.e. train/'s FlexAttention code behind FA3's signature (unless --attention fa3).
  native  torchrun --standalone --nproc_per_node=N -m train --preset record --set scheduled_steps=<steps>
          --set extension_steps=0 --set attention=flex ... (the same shards, validation, warm-up, cycling)
  native-NAME  the same with --variant NAME's overrides: what one option of train/ buys, in the same call
Both keep the record's Muon momentum warm-up (300 steps), validation every 125 steps (so at 0 and the end),
its windows and lr schedule over --steps (tests/test_train_vs_record.py checks the two loops apply the same
values), and the record's global batch (393,216 tokens: 8 / N micro-steps per rank).

Reported from the record-format logs (rank 0): step time = difference of consecutive `train_time`
(validations excluded by both programs), median and mean per window phase (long window 3 / 7 / 11 blocks)
and over all steps, per run, then the median over runs; each native's ratio to the record; peak memory;
startup (launch to the first timed step's line); MFU = model FLOPs per step (benchmarks/bench.py's count: 6 per
matmul weight per token + attention pairs of the first micro-batch) / step time / (N x the bf16 matmul rate
measured by a separate process, or read by --matmul-file from earlier in the same call); final validation
losses and, with 2+ runs each, Welch's t-test of each native against the record. Written to
<out>/summary.json and <out>/summary.md after every run, so a cut-off call still returns what finished.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import glob
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.record_patch import FIXTURE, STANDIN_DIR, program_text, sidebyside_patch  # noqa: E402
from pipeline.runs.launch import Tee  # noqa: E402  (its first-timed-step marker: repro's startup_s)

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

def shards_tokens(pattern: str) -> int:
    """The token count of the shards PATTERN matches, from their headers (pipeline/data/shards.py: numpy, not torch,
    so that nothing before the first launch imports torch). SystemExit when a file is missing or not a shard."""
    from pipeline.data.shards import header_problems, read_header
    from pipeline.errors import ReproError

    files = [Path(f) for f in sorted(glob.glob(pattern))]
    if not files:
        raise SystemExit(f"sidebyside: no shards match {pattern!r}; pass --data or --train-files")
    try:
        for f in files:
            if problems := header_problems(f):
                raise SystemExit(f"sidebyside: {f} is not a token shard ({'; '.join(problems)}); fetch or generate "
                                 "the data again")
        return sum(read_header(f).num_tokens for f in files)
    except ReproError as exc:
        raise SystemExit(f"sidebyside: {exc}") from None


def flops_by_phase(train_files: str) -> dict[str, float]:
    """Model FLOPs per step of the record configuration for each long window (benchmarks/bench.py's count)."""
    from benchmarks.bench import flops_per_step
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

    from benchmarks.bench import matmul_peak_tflops
    from train.log import triton_version

    device = torch.device("cuda", 0)
    return dict(tflops=matmul_peak_tflops(device), gpu=torch.cuda.get_device_name(device), torch=torch.__version__,
                cuda=torch.version.cuda, triton=triton_version())


# ---- runs -----------------------------------------------------------------------------------------------------------

def torchrun(ws: int) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ws}"]


def record_command(a, ws: int, run_dir: Path, cycle: bool) -> tuple[list[str], dict, Path, list[dict]]:
    """Write the patched program into --program-dir; return (command, extra env, cwd, listed changes).

    Every record run of a call runs one file at one path, so that the compile caches built by the first run
    serve the next ones whatever their world size (cached graphs may carry their source's path)."""
    text, changes = sidebyside_patch(program_text(a.program), train_files=a.train_files, val_files=a.val_files,
                                     steps=a.steps, val_tokens=a.val_tokens, cycle_train=cycle,
                                     warmup_steps=a.warmup_steps, split_muon_groups=a.record_muon_groups == "split",
                                     seed_from_env=a.seed is not None)
    program = a.program_dir / "train_gpt.py"
    a.program_dir.mkdir(parents=True, exist_ok=True)
    if not program.exists() or program.read_text() != text:
        program.write_text(text)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "patch.json").write_text(json.dumps(changes, indent=1))
    path = [str(REPO)] if a.attention == "fa3" else [str(STANDIN_DIR), str(REPO)]
    return torchrun(ws) + ["train_gpt.py"], dict(PYTHONPATH=os.pathsep.join(path)), a.program_dir, changes


def record_log(cwd: Path, stdout: Path, before: set[Path]) -> Path | None:
    """The record's log of this run: the program prints `logs/<uuid>.txt` first; else the one new file in
    <program dir>/logs (two record runs sharing the program folder at once make "new" ambiguous)."""
    text = stdout.read_text(errors="replace") if stdout.exists() else ""
    printed = re.search(r"^(logs/[0-9a-f-]+\.txt)$", text, re.M)
    if printed:
        return cwd / printed[1]
    new = sorted(set((cwd / "logs").glob("*.txt")) - before)
    return new[-1] if len(new) == 1 else None


def native_command(a, ws: int, run_dir: Path, cycle: bool, variant: list[str], seed: int | None
                   ) -> tuple[list[str], dict, Path]:
    run_dir.mkdir(parents=True, exist_ok=True)
    sets = [f"scheduled_steps={a.steps}", "extension_steps=0", f"val_tokens={a.val_tokens}",
            f"val_batch_tokens={a.val_tokens}", f"attention={a.attention}", f"data_cycle={str(cycle).lower()}"]
    if a.warmup_steps is not None:
        sets.append(f"warmup_steps={a.warmup_steps}")
    sets += a.native_set  # options of train/ under test (e.g. fused_loss=true), recorded in the summary
    sets += variant  # a --variant's own overrides, after the common ones
    if seed is not None:
        sets.append(f"seed={seed}")
    cmd = torchrun(ws) + ["-m", "train", "--preset", "record", "--train-files", a.train_files,
                          "--val-files", a.val_files, "--log-file", str(run_dir / "log.txt"),
                          "--metrics-file", str(run_dir / "metrics.jsonl")]
    for s in sets:
        cmd += ["--set", s]
    return cmd, dict(PYTHONPATH=str(REPO)), REPO


def parse_variants(specs: list[str]) -> dict[str, list[str]]:
    """--variant NAME:KEY=VALUE[,KEY=VALUE...] -> {"native-NAME": ["KEY=VALUE", ...]}."""
    out = {}
    for spec in specs:
        name, _, sets = spec.partition(":")
        if not re.fullmatch(r"[a-z0-9_]+", name) or not sets or not all("=" in x for x in sets.split(",")):
            raise ValueError(f"--variant {spec!r}: write NAME:KEY=VALUE[,KEY=VALUE] (NAME in a-z, 0-9, _)")
        out[f"native-{name}"] = sets.split(",")
    return out


def programs_of(pair: dict) -> list[str]:
    """The programs in one world size's results: the record, native, then the variants in their order."""
    return [who for who in pair if who != "patch"]


def stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM to a program's process group (torchrun passes it to its ranks), SIGKILL 15 s later."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _interrupt(_signum, _frame):
    raise KeyboardInterrupt


TIMING_STARTS = b"step:0/"  # the validation before the first timed step: the clock starts when it ends


class Launched:
    """A started program: its process (own session), the thread copying its output to a file, and when it printed
    the lines that bound its startup (time.time(), so that a gate file's mtime compares with them)."""

    def __init__(self, cmd: list[str], env_extra: dict, cwd: Path, out_file: Path, gpus: list[int]):
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=",".join(map(str, gpus)), PYTHONUNBUFFERED="1", **env_extra)
        env.pop("DISABLE_FP8", None)  # FP8 head in both
        self.gpus, self.started = gpus, time.time()
        self.timing_at: float | None = None  # its step-0 validation line: its timed steps follow at once
        self.first_step_at: float | None = None  # its first timed step's line
        self._out = out_file.open("wb")
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self._reader = threading.Thread(target=self._copy, daemon=True)
        self._reader.start()

    def _copy(self) -> None:
        for line in iter(self.proc.stdout.readline, b""):
            if self.timing_at is None and line.startswith(TIMING_STARTS):
                self.timing_at = time.time()
            if self.first_step_at is None and Tee.FIRST_STEP in line:
                self.first_step_at = time.time()
            self._out.write(line)
            self._out.flush()

    def finish(self, timeout: float) -> dict:
        """Wait for the program (its process group stopped at the timeout or on an interrupt).

        startup_s: launch to the first timed step's line (process start, imports, compile, warm-up, validation 0)."""
        try:
            rc = self.proc.wait(timeout=max(timeout, 1))
        except subprocess.TimeoutExpired:
            stop_group(self.proc)
            rc = "timeout"
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (main): the program runs in its own session, stop it too
            stop_group(self.proc)
            raise
        finally:
            self._reader.join(timeout=10)
            self._out.close()
        startup = round(self.first_step_at - self.started, 1) if self.first_step_at else None
        return dict(rc=rc, wall_s=round(time.time() - self.started, 1), startup_s=startup, gpus=self.gpus)


def run(cmd: list[str], env_extra: dict, cwd: Path, out_file: Path, gpus: list[int], timeout: float) -> dict:
    """Run one program on `gpus`; stdout+stderr to out_file; kill its process group on timeout."""
    return Launched(cmd, env_extra, cwd, out_file, gpus).finish(timeout)


def gated_pair(record: tuple[list[str], dict, Path], native: tuple[list[str], dict, Path], record_out: Path,
               native_out: Path, gpus: list[int], lead_s: float, timeout: float) -> tuple[dict, dict]:
    """One (record, native) pair whose startups overlap and whose timed steps do not: native starts first and
    waits after its warm-up at a gate (train.loop.wait_at_start_gate); the record starts lead_s later; once the
    record has exited, the gate opens and native's timed steps have the GPU alone. The pair takes about the
    record's run and native's timed part, instead of both runs whole.

    The record has no gate (its program is not changed for this): if native reached its gate only after the
    record's timing began, native's warm-up shared the GPU with the record's first timed steps, and the record's
    run is marked shared_gpu (its loss counts, its step times do not), with how long the overlap lasted. Native's
    startup_s leaves out its wait at the gate (gate_wait_s)."""
    gate = native_out.parent / "start-gate"
    for stale in (gate, gate.with_name(gate.name + ".ready")):
        stale.unlink(missing_ok=True)
    (n_cmd, n_env, n_cwd), (r_cmd, r_env, r_cwd) = native, record
    began = time.time()
    waiting = Launched(n_cmd, dict(n_env, REPRO_START_GATE=str(gate)), n_cwd, native_out, gpus)
    try:
        time.sleep(lead_s)
        rec_run = Launched(r_cmd, r_env, r_cwd, record_out, gpus)
        rec = rec_run.finish(timeout - (time.time() - began))
        gate.write_text("open\n")
        opened_at = time.time()
        nat = waiting.finish(timeout - (opened_at - began))
    except BaseException:
        if waiting.proc.poll() is None:
            stop_group(waiting.proc)
        raise
    ready = gate.with_name(gate.name + ".ready")
    ready_at = ready.stat().st_mtime if ready.exists() else None  # None: native never finished its warm-up
    if ready_at is not None:
        nat["gate_wait_s"] = round(max(0.0, opened_at - ready_at), 1)
        if nat["startup_s"] is not None:
            nat["startup_s"] = round(nat["startup_s"] - nat["gate_wait_s"], 1)
    timing_at = rec_run.timing_at
    overlap = (ready_at or time.time()) - timing_at if timing_at is not None else None
    rec["native_ready_before_timing_s"] = None if overlap is None else round(-overlap, 1)
    if overlap is not None and overlap > 0:
        rec["shared_gpu"] = True
        rec["void"] = f"native's warm-up ran {overlap:.1f} s into this run's timed steps"
    return rec, nat


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


def welch(a: list[float], b: list[float]) -> dict | None:
    """Welch's unequal-variance t-test of a against b: t, degrees of freedom, two-sided p (scipy, as the verdict's
    consistency test); None with fewer than 2 values a side or no spread at all."""
    if len(a) < 2 or len(b) < 2 or statistics.variance(a) + statistics.variance(b) == 0:
        return None
    from scipy import stats

    result = stats.ttest_ind(a, b, equal_var=False)
    return dict(t=float(result.statistic), df=float(result.df), p=float(result.pvalue))


def merge(summaries: list[dict]) -> dict:
    """One summary from several invocations (phases of one device call): runs pooled by world size and program."""
    out = dict(summaries[0], runs={})
    out["native_set"] = sorted({x for summary in summaries for x in summary.get("native_set", [])})
    out["variants"] = {k: v for summary in summaries for k, v in summary.get("variants", {}).items()}
    for summary in summaries:
        for ws, pair in summary["runs"].items():
            into = out["runs"].setdefault(ws, {})
            for who in programs_of(pair):
                into.setdefault(who, []).extend(pair[who])
            if "patch" in pair:
                into["patch"] = pair["patch"]
    return out


def _median_of(runs: list[dict], phase: str, key: str = "median_ms") -> float | None:
    """Over the runs that had the GPU to themselves (a --shared-gpu run's step times measure the sharing)."""
    values = [r["phases"][phase][key] for r in runs
              if key in r.get("phases", {}).get(phase, {}) and not r.get("shared_gpu")]
    return statistics.median(values) if values else None


def table(summary: dict) -> str:
    """Markdown: per world size, native program and window phase, the median over runs of each run's median step
    time against the record's; the ratio; MFU; then each run (startup, peak memory, final validation loss) and
    each native's loss comparison with the record."""
    env = summary.get("env", {})
    variants = "".join(f"; {who}: {' '.join(sets)}" for who, sets in summary.get("variants", {}).items())
    lines = [f"# side by side: {env.get('gpu', '?')}, torch {env.get('torch')}",
             f"steps {summary['steps']}, val tokens {summary['val_tokens']}, attention {summary['attention']}, "
             f"bf16 matmul rate {summary.get('tflops')} TFLOP/s"
             + (f", native with {' '.join(summary['native_set'])}" if summary.get("native_set") else "") + variants,
             "", "| ws | program | phase | record ms | program ms | program / record | MFU record / program |",
             "|---|---|---|---|---|---|---|"]
    for ws, pair in summary["runs"].items():
        rec = pair.get("record", [])
        for who in [w for w in programs_of(pair) if w != "record"]:
            for phase in ("3", "7", "11", "all"):
                r, n = _median_of(rec, phase), _median_of(pair[who], phase)
                mr, mn = _median_of(rec, phase, "mfu"), _median_of(pair[who], phase, "mfu")
                lines.append(f"| {ws} | {who} | {phase} | {f'{r:.1f}' if r else '—'} | {f'{n:.1f}' if n else '—'} | "
                             f"{f'{n / r:.3f}' if r and n else '—'} | "
                             f"{f'{100 * mr:.1f} %' if mr else '—'} / {f'{100 * mn:.1f} %' if mn else '—'} |")
    lines += ["", "| ws | program | run | seed | rc | startup s | peak GiB | final val loss |",
              "|---|---|---|---|---|---|---|---|"]
    for ws, pair in summary["runs"].items():
        for who in programs_of(pair):
            for i, res in enumerate(pair[who]):
                peak = res.get("peak_mib")
                final = res.get("val_losses", [])[-1][1] if res.get("val_losses") else None
                seed = res.get("seed")
                rc = f"{res.get('rc')}{' (shared GPU)' if res.get('shared_gpu') else ''}"
                lines.append(f"| {ws} | {who} | {i + 1} | {'—' if seed is None else seed} | {rc} | "
                             f"{res.get('startup_s')} | {f'{peak[0] / 1024:.2f}' if peak else '—'} | "
                             f"{final if final is not None else '—'} |")
    for ws, pair in summary["runs"].items():
        finals = {who: [r["val_losses"][-1][1] for r in pair[who] if r.get("val_losses")] for who in programs_of(pair)}
        record = finals.get("record", [])
        for who, values in finals.items():
            if who == "record" or len(record) < 2 or len(values) < 2:
                continue
            test = welch(values, record)
            desc = {w: f"{statistics.fmean(v):.4f} ± {statistics.stdev(v):.4f} (n={len(v)})"
                    for w, v in (("record", record), (who, values))}
            line = f"\nws {ws} final val loss: record {desc['record']}, {who} {desc[who]}"
            if test:
                line += f"; Welch t = {test['t']:.2f}, df = {test['df']:.1f}, p = {test['p']:.3f}"
            lines.append(line)
    return "\n".join(lines) + "\n"


def _needs(ap: argparse.ArgumentParser, given: list[str]) -> dict[str, float]:
    """--need-s PROGRAM=S values -> {program: seconds}."""
    out = {}
    for item in given:
        who, _, seconds = item.partition("=")
        try:
            out[who] = float(seconds)
        except ValueError:
            ap.error(f"--need-s {item}: expected PROGRAM=SECONDS, e.g. --need-s record=171")
    return out


def main(argv: list[str] | None = None) -> int:
    # SIGTERM stops the running program too (device_session.sh stops a priming run that way): without this the
    # program, in its own session, would outlive this process and share the GPU with the next timed run
    signal.signal(signal.SIGTERM, _interrupt)
    ap = argparse.ArgumentParser(prog="benchmarks/sidebyside.py")
    ap.add_argument("--data", help="folder with fineweb_train_*.bin and fineweb_val_*.bin")
    ap.add_argument("--train-files", help="glob of training shards (instead of --data)")
    ap.add_argument("--val-files", help="glob of validation shards (instead of --data)")
    ap.add_argument("--program", type=Path, default=FIXTURE, help="the record's program (default: the fixture)")
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--val-tokens", type=int, default=524_288)
    ap.add_argument("--warmup-steps", type=int, default=None, help="default: each program's own (30)")
    ap.add_argument("--world-sizes", default="1,2")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each program per world size, alternating")
    ap.add_argument("--seed", type=int, default=None, metavar="BASE",
                    help="run i of every program starts from torch seed BASE+i-1 (default: the record's weights "
                         "from a per-process seed, train/'s from a seed it draws and logs)")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME:KEY=VALUE[,KEY=VALUE]",
                    help="also run train/ with these overrides, as program native-NAME (repeatable)")
    ap.add_argument("--only", help="run only these programs, comma-separated, alternating in this order: record, "
                                   "native or native-NAME")
    ap.add_argument("--variants-last", action="store_true",
                    help="all record/native pairs first, then the variants' runs: a budget that runs out cuts "
                         "variants, not the pairs a loss comparison needs")
    ap.add_argument("--first-gpu", type=int, default=0, help="world size N runs on GPUs first-gpu .. first-gpu+N-1")
    ap.add_argument("--matmul-file", type=Path,
                    help="JSON printed by --matmul earlier in this call: its rate and versions, not measured again")
    ap.add_argument("--record-muon-groups", choices=("split", "as-is"), default="split",
                    help="split (default): the record's Muon does 8-rank math at 1, 2, 4 ranks, like train/")
    ap.add_argument("--attention", choices=("flex", "fa3"), default="flex")
    ap.add_argument("--native-set", action="append", default=[], metavar="KEY=VALUE",
                    help="an extra train/ config override for the native runs (repeatable)")
    ap.add_argument("--budget-s", type=float, default=570, help="stop starting runs after this many seconds")
    ap.add_argument("--need-s", action="append", default=[], metavar="PROGRAM=S",
                    help="no run of PROGRAM (record, native, native-NAME) starts with less than S seconds of the "
                         "budget left (its slowest measured run with a margin; default 60); repeatable")
    ap.add_argument("--shared-gpu", action="store_true",
                    help="these runs share the GPU with other work: losses and startups kept, step times left out "
                         "of the speed table")
    ap.add_argument("--gate-native", type=float, metavar="LEAD_S",
                    help="each (record, native) pair overlaps its startups: native starts first, waits at a gate "
                         "after its warm-up, the record LEAD_S later; the gate opens when the record exits. "
                         "--need-s native= is then what native's run adds after the record's")
    ap.add_argument("--site", type=Path, help="a folder put first on both programs' PYTHONPATH (sitecustomize.py)")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--program-dir", type=Path, help="where the patched record program runs (default <out>/record)")
    ap.add_argument("--dry-run", action="store_true", help="write the patched programs, print the commands")
    ap.add_argument("--summarize", type=Path, nargs="+", metavar="OUT", help="merge earlier --out folders, print")
    ap.add_argument("--matmul", action="store_true", help=argparse.SUPPRESS)  # the child that measures the rate
    a = ap.parse_args(argv)
    needs = _needs(ap, a.need_s)
    started = time.perf_counter()
    if a.matmul:
        print(json.dumps(measure_matmul()))
        return 0
    if a.summarize:
        merged = merge([json.loads((d / "summary.json").read_text()) for d in a.summarize])
        if a.out:
            a.out.mkdir(parents=True, exist_ok=True)
            (a.out / "summary.json").write_text(json.dumps(merged, indent=1))
            (a.out / "summary.md").write_text(table(merged))
        print(table(merged))
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
    try:
        variants = parse_variants(a.variant)
    except ValueError as e:
        ap.error(str(e))
    programs = ["record", "native", *variants]
    only = a.only.split(",") if a.only else programs
    if not set(only) <= set(programs) or len(set(only)) != len(only):
        ap.error(f"--only {a.only}: distinct programs among {', '.join(programs)}")
    programs = only

    # cycle only where the data cannot last: BOS alignment skips the tails of long documents, so ask for twice
    cycle = shards_tokens(a.train_files) < 2 * a.steps * RECORD_BATCH
    # the FLOPs need torch and the first batch (about 8 s on the device host before the first launch, 2026-12-06):
    # counted beside the runs, wanted only once one has ended
    flops_count = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="flops")
    flops_job = flops_count.submit(flops_by_phase, a.train_files)
    flops_count.shutdown(wait=False)
    a.out.mkdir(parents=True, exist_ok=True)
    a.program_dir = (a.program_dir or a.out / "record").resolve()
    summary: dict = dict(steps=a.steps, val_tokens=a.val_tokens, attention=a.attention, cycle_train=cycle,
                         train_files=a.train_files, val_files=a.val_files, program=str(a.program),
                         record_muon_groups=a.record_muon_groups, native_set=a.native_set, variants=variants,
                         seed=a.seed, model_flops_per_step=None, runs={})

    def save() -> None:
        (a.out / "summary.json").write_text(json.dumps(summary, indent=1))
        (a.out / "summary.md").write_text(table(summary))

    def matmul_rate() -> float | None:
        rate = subprocess.run([sys.executable, __file__, "--matmul"], capture_output=True, text=True, cwd=REPO,
                              env=dict(os.environ, PYTHONPATH=str(REPO),
                                       CUDA_VISIBLE_DEVICES=str(a.first_gpu)))
        if rate.returncode != 0:
            print(rate.stderr, file=sys.stderr)
            return None
        return rate_from(rate.stdout.strip().splitlines()[-1])

    def rate_from(matmul_json: str) -> float:  # --matmul's line: the rate, and the versions kept as env
        summary["env"] = json.loads(matmul_json)
        return round(summary["env"].pop("tflops"), 1)

    if a.matmul_file:
        summary["tflops_start"] = summary["tflops"] = rate_from(a.matmul_file.read_text())
    elif not a.dry_run:
        summary["tflops_start"] = summary["tflops"] = matmul_rate()
        if summary["tflops"] is None:
            return 4
        print(f"bf16 matmul rate {summary['tflops']} TFLOP/s", flush=True)

    def one_world_size(ws: int) -> None:
        """Every run at world size ws, in order (a gated pair as one item)."""
        pair = summary["runs"].setdefault(str(ws), {})
        gpus = list(range(a.first_gpu, a.first_gpu + ws))
        order = [(i, who) for i in range(a.repeat) for who in programs]
        if a.variants_last:  # stable: pairs keep alternating, each variant's runs follow in turn
            order.sort(key=lambda run: run[1] in variants)

        def command(i: int, who: str) -> tuple[list[str], dict, Path, Path, int | None]:
            """(command, env, cwd, run folder, seed) of run i of a program, printed."""
            run_dir = a.out / (f"{who}-ws{ws}" + (f"-{i + 1}" if a.repeat > 1 else ""))
            seed = None if a.seed is None else a.seed + i
            if who == "record":
                cmd, env, cwd, changes = record_command(a, ws, run_dir, cycle)
                pair["patch"] = changes
                if seed is not None:
                    env["SBS_SEED"] = str(seed)
            else:
                cmd, env, cwd = native_command(a, ws, run_dir, cycle, variants.get(who, []), seed)
            if a.site:
                env["PYTHONPATH"] = os.pathsep.join((str(a.site.resolve()), env["PYTHONPATH"]))
            print(f"[{who} ws{ws} run {i + 1}] cd {cwd} && {' '.join(f'{k}={v}' for k, v in env.items())} "
                  f"{' '.join(cmd)}", flush=True)
            return cmd, env, cwd, run_dir, seed

        def keep(i: int, who: str, res: dict, cwd: Path, run_dir: Path, seed: int | None, before: set) -> None:
            """A finished run's result, with what its log says, into the summary (saved at once)."""
            res = dict(res, seed=seed, shared_gpu=a.shared_gpu or res.get("shared_gpu", False))
            log = record_log(cwd, run_dir / "stdout.txt", before) if who == "record" else run_dir / "log.txt"
            log_text = log.read_text() if log and log.exists() else ""
            if who == "record" and log_text:
                (run_dir / "log.txt").write_text(log_text)
            if log_text:
                flops = summary["model_flops_per_step"] = flops_job.result()
                res.update(run_result(log_text, a.steps, flops, summary["tflops"], ws))
            pair.setdefault(who, []).append(res)
            print(f"[{who} ws{ws} run {i + 1}] rc {res['rc']}, wall {res['wall_s']} s, startup "
                  f"{res['startup_s']} s, all-step median {res.get('phases', {}).get('all', {}).get('median_ms')}"
                  f" ms" + (f"; {res['void']}" if res.get("void") else ""), flush=True)
            save()

        gated = set()  # native runs already run, gated, beside their record run
        for at, (i, who) in enumerate(order):
            if (i, who) in gated:
                continue
            cmd, env, cwd, run_dir, seed = command(i, who)
            partner = (i, "native")  # gated with this record run when it comes after it (--only native,record: not)
            if a.gate_native is not None and who == "record" and partner in order[at + 1:]:
                gated.add(partner)
                n_cmd, n_env, n_cwd, n_dir, n_seed = command(*partner)
                if a.dry_run:
                    continue
                left = a.budget_s - (time.perf_counter() - started) - 20
                if left < a.gate_native + needs.get("record", 60.0) + needs.get("native", 60.0):
                    for w in ("record", "native"):
                        pair.setdefault(w, []).append(dict(rc="skipped: out of budget"))
                    continue
                before = set((cwd / "logs").glob("*.txt"))
                rec, nat = gated_pair((cmd, env, cwd), (n_cmd, n_env, n_cwd), run_dir / "stdout.txt",
                                      n_dir / "stdout.txt", gpus, a.gate_native, left)
                keep(i, "record", rec, cwd, run_dir, seed, before)
                keep(i, "native", nat, n_cwd, n_dir, n_seed, set())
                continue
            if a.dry_run:
                continue
            left = a.budget_s - (time.perf_counter() - started) - 20  # 20 s for the closing matmul, summary
            if left < needs.get(who, 60.0):
                pair.setdefault(who, []).append(dict(rc="skipped: out of budget"))
                continue
            before = set((cwd / "logs").glob("*.txt")) if who == "record" else set()
            keep(i, who, run(cmd, env, cwd, run_dir / "stdout.txt", gpus, left), cwd, run_dir, seed, before)

    for ws in world_sizes:
        one_world_size(ws)

    if not a.dry_run and not a.matmul_file and a.budget_s - (time.perf_counter() - started) > 15:
        summary["tflops_end"] = matmul_rate()
    summary["wall_s"] = round(time.perf_counter() - started, 1)
    if not a.dry_run:
        summary["model_flops_per_step"] = flops_job.result()
        save()
        print(table(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
