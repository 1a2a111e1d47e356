"""The CPU-testable parts of benchmarks/sidebyside.py: the patch to the record's program, log parsing and phase
statistics, the commands of a dry run; and benchmarks/device_diff.py's CPU mode. The FA3 stand-in's own tests
are in tests/test_fa3_standin.py.

    .venv/bin/python -m pytest -q tests/test_sidebyside.py
"""

from __future__ import annotations

import ast
import difflib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks import sidebyside
from benchmarks.record_patch import (
    FIXTURE,
    SEED_ANCHOR,
    SEED_LINE,
    STANDIN_DIR,
    PatchError,
    program_text,
    sidebyside_patch,
    split_program,
)
from tests.paths import REPO_ROOT
from train.config import apply_overrides, preset
from train.data import BOS_ID, write_shard
from train.schedule import window_blocks

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # FlexAttention's CPU reference path warns


def hyperparameter_defaults(text: str) -> dict:
    """The Hyperparameters class's default values, read from the program text."""
    tree = ast.parse(text)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Hyperparameters")
    out = {}
    for stmt in cls.body:
        target = stmt.target if isinstance(stmt, ast.AnnAssign) else stmt.targets[0]
        try:
            out[target.id] = ast.literal_eval(stmt.value)
        except ValueError:
            out[target.id] = ast.unparse(stmt.value)
    return out


# ---- the patch -------------------------------------------------------------------------------------------------------

def test_patch_changes_exactly_the_listed_lines():
    text = program_text()
    patched, changes = sidebyside_patch(text, train_files="/d/fineweb_train_*.bin", val_files="/d/fineweb_val_*.bin",
                                        steps=80, val_tokens=524_288, cycle_train=True, warmup_steps=10)
    assert len(changes) == 9 and all(c["why"] for c in changes)
    diff = list(difflib.unified_diff(text.splitlines(), patched.splitlines(), lineterm="", n=0))
    removed = [line for line in diff if line.startswith("-") and not line.startswith("---")]
    added = [line for line in diff if line.startswith("+") and not line.startswith("+++")]
    # one whole line per change, nothing else; the Muon split adds a line after the Muon's construction
    assert (len(removed), len(added)) == (len(changes) - 1, len(changes))
    hp = hyperparameter_defaults(patched)
    assert (hp["train_files"], hp["val_files"]) == ("/d/fineweb_train_*.bin", "/d/fineweb_val_*.bin")
    assert (hp["num_iterations"], hp["iteration_extension"]) == (80, 0)
    assert hp["val_tokens"] == hp["val_batch_size"] == 524_288
    assert (hp["ws_schedule"], hp["block_size"], hp["val_loss_every"]) == ((3, 7, 11), 128, 125)  # untouched
    assert "itertools').cycle(files)" in patched and "warmup_steps = 10\n" in patched
    _, main = split_program(patched)
    assert "train_steps = args.num_iterations + args.iteration_extension" in main


def test_patch_without_cycling_warmup_or_muon_split_changes_six_lines():
    _, changes = sidebyside_patch(program_text(), train_files="a", val_files="b", steps=40, val_tokens=1024,
                                  cycle_train=False, split_muon_groups=False)
    assert [c["why"] for c in changes][-1] == "no extension steps" and len(changes) == 6


def test_patch_refuses_a_program_without_its_targets():
    text = program_text().replace("    num_iterations: int = 1640", "    num_iterations: int = 1700")
    with pytest.raises(PatchError, match="num_iterations"):
        sidebyside_patch(text, train_files="a", val_files="b", steps=40, val_tokens=1024)


# ---- logs, phases, FLOPs ---------------------------------------------------------------------------------------------

def synthetic_log(steps: int, ms_by_phase: dict[int, float]) -> str:
    lines = ["import torch", "=" * 100, f"step:0/{steps} val_loss:10.8258 train_time:0ms step_avg:0.05ms"]
    clock = 0.0
    for s in range(steps):
        clock += ms_by_phase[sidebyside.phase_of(s, steps)] + (50 if s == 0 else 0)  # a slow first step
        lines.append(f"step:{s + 1}/{steps} train_time:{clock:.0f}ms step_avg:{clock / (s + 1):.2f}ms")
    lines += [f"step:{steps}/{steps} val_loss:4.1234 train_time:{clock:.0f}ms step_avg:{clock / steps:.2f}ms",
              "peak memory allocated: 28432 MiB reserved: 30360 MiB"]
    return "\n".join(lines) + "\n"


def test_phase_of_is_the_trainers_window_rule():
    cfg = apply_overrides(preset("record"), ["scheduled_steps=80", "extension_steps=0"])
    assert [sidebyside.phase_of(s, 80) for s in range(80)] == [window_blocks(s, cfg)[1] for s in range(80)]


def test_log_parsing_and_phase_statistics():
    text = synthetic_log(80, {3: 640.0, 7: 666.0, 11: 684.0})
    parsed = sidebyside.parse_log(text)
    assert parsed["peak_mib"] == (28432, 30360) and parsed["vals"] == [(0, 10.8258), (80, 4.1234)]
    stats = sidebyside.phase_stats(sidebyside.step_times(parsed["clock"]), 80)
    for ws, ms in ((3, 640.0), (7, 666.0), (11, 684.0)):
        assert stats[str(ws)]["median_ms"] == pytest.approx(ms, abs=0.5)  # step_avg's 2 decimals x step
    assert stats["3"]["n"] == 26 and stats["all"]["n"] == 80  # steps 0..26, the phase's first left out
    flops = {"3": 2.8e14, "7": 2.85e14, "11": 2.9e14}
    result = sidebyside.run_result(text, 80, flops, 760.0, 1)
    assert result["phases"]["7"]["mfu"] == pytest.approx(2.85e14 / 0.666 / 760e12, rel=1e-3)
    assert 0.5 < result["phases"]["all"]["mfu"] < 0.6
    slower = sidebyside.run_result(synthetic_log(80, {3: 704.0, 7: 732.6, 11: 752.4}), 80, flops, 760.0, 1)
    summary = dict(steps=80, val_tokens=1, attention="flex", tflops=760.0,
                   runs={"1": {"record": [result], "native": [slower]}})
    assert "| 1 | native | 7 | 666.0 | 732.6 | 1.100 |" in sidebyside.table(summary)


def test_welch_matches_a_hand_computation_and_merge_pools_runs():
    a, b = [3.80, 3.85, 3.90], [3.70, 3.72, 3.74]
    test = sidebyside.welch(a, b)
    # means 3.85 / 3.72, variances 0.0025 / 0.0004: t = 0.13 / sqrt(0.0029 / 3), df = 0.0029² / (...)
    assert test["t"] == pytest.approx(0.13 / (0.0029 / 3) ** 0.5, rel=1e-9)
    assert test["df"] == pytest.approx(0.0029**2 / (0.0025**2 + 0.0004**2) * 2, rel=1e-9)
    assert test["p"] == pytest.approx(0.0333, abs=2e-3)  # two-sided, Student t with df ≈ 2.7
    assert sidebyside.welch([1.0], b) is None and sidebyside.welch([1.0, 1.0], [1.0, 1.0]) is None
    run = lambda loss: dict(phases={}, val_losses=[[0, 10.8], [40, loss]])  # noqa: E731
    parts = [dict(steps=40, val_tokens=1, attention="flex", runs={"2": {"record": [run(3.8)], "native": [run(3.7)]}}),
             dict(steps=40, val_tokens=1, attention="flex", runs={"2": {"record": [run(3.9)], "native": [run(3.72)]}})]
    merged = sidebyside.merge(parts)
    assert [r["val_losses"][-1][1] for r in merged["runs"]["2"]["record"]] == [3.8, 3.9]
    assert "Welch t =" in sidebyside.table(merged)


# ---- a dry run: the commands -----------------------------------------------------------------------------------------

def test_dry_run_gives_both_programs_the_same_schedule_and_data(tmp_path, capsys):
    gen = torch.Generator().manual_seed(0)
    docs = []
    while len(docs) < 1_200_000:  # one step takes 8 x 49,153 tokens and BOS alignment skips document tails
        docs += [BOS_ID] + torch.randint(0, 50000, (int(torch.randint(100, 1500, (1,), generator=gen)),),
                                         generator=gen).tolist()
    write_shard(tmp_path / "fineweb_train_000001.bin", docs)
    write_shard(tmp_path / "fineweb_val_000000.bin", docs[:600_000])
    out = tmp_path / "sbs"
    assert sidebyside.main(["--data", str(tmp_path), "--steps", "60", "--warmup-steps", "5", "--dry-run",
                            "--out", str(out)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[")]
    assert len(lines) == 4  # record and native at world sizes 1 and 2
    native = next(line for line in lines if line.startswith("[native ws2 run 1]"))
    for flag in ("--nproc_per_node=2", "scheduled_steps=60", "extension_steps=0", "val_tokens=524288",
                 "val_batch_tokens=524288", "attention=flex", "data_cycle=true", "warmup_steps=5",
                 str(tmp_path / "fineweb_train_*.bin")):
        assert flag in native, flag
    record = next(line for line in lines if line.startswith("[record ws2 run 1]"))
    assert str(STANDIN_DIR) in record and "--nproc_per_node=2 train_gpt.py" in record
    assert f"cd {out / 'record'} &&" in record  # one program path for every record run (compile caches)
    hp = hyperparameter_defaults((out / "record" / "train_gpt.py").read_text())
    assert (hp["num_iterations"], hp["iteration_extension"], hp["val_tokens"]) == (60, 0, 524_288)
    assert hp["train_files"] == str(tmp_path / "fineweb_train_*.bin")
    assert len(json.loads((out / "record-ws2" / "patch.json").read_text())) == 9
    assert FIXTURE.read_text() == program_text()  # the fixture itself is never touched


def small_shards(folder: Path) -> None:
    """A train and a val shard of short documents in folder (dry runs only read their sizes)."""
    folder.mkdir()
    docs = [50256] + list(range(1, 3000))
    write_shard(folder / "fineweb_train_000001.bin", docs * 300)
    write_shard(folder / "fineweb_val_000000.bin", docs * 200)


def test_native_set_reaches_the_native_command_only(tmp_path, capsys):
    small_shards(tmp_path / "d")
    assert sidebyside.main(["--data", str(tmp_path / "d"), "--world-sizes", "1", "--native-set", "fused_loss=true",
                            "--dry-run", "--out", str(tmp_path / "sbs")]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[")]
    assert "--set fused_loss=true" in lines[1] and lines[1].startswith("[native")
    assert "fused_loss" not in lines[0]
    merged = sidebyside.merge([dict(steps=1, val_tokens=1, attention="flex", runs={}),
                               dict(steps=1, val_tokens=1, attention="flex", native_set=["fused_loss=true"], runs={})])
    assert "native with fused_loss=true" in sidebyside.table(merged)


def test_a_variant_is_a_third_program_alternating_with_the_others(tmp_path, capsys):
    small_shards(tmp_path / "d")
    assert sidebyside.main(["--data", str(tmp_path / "d"), "--world-sizes", "2", "--repeat", "2", "--variant",
                            "unfused:fused_loss=false,seed=3", "--dry-run", "--out", str(tmp_path / "sbs")]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[")]
    assert [line.split("]")[0] for line in lines] == [
        f"[{who} ws2 run {i}" for i in (1, 2) for who in ("record", "native", "native-unfused")]
    assert "--set fused_loss=false --set seed=3" in lines[2] and "fused_loss" not in lines[1] + lines[0]
    # --variants-last: the pairs a loss comparison needs come first, the variant's runs after them
    assert sidebyside.main(["--data", str(tmp_path / "d"), "--world-sizes", "2", "--repeat", "2", "--variant",
                            "unfused:fused_loss=false", "--variants-last", "--seed", "5", "--dry-run",
                            "--out", str(tmp_path / "sbs")]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[")]
    assert [line.split("]")[0] for line in lines] == [
        "[record ws2 run 1", "[native ws2 run 1", "[record ws2 run 2", "[native ws2 run 2",
        "[native-unfused ws2 run 1", "[native-unfused ws2 run 2"]
    assert "SBS_SEED=6" in lines[2] and "--set seed=6" in lines[3] and "--set seed=6" in lines[5]
    with pytest.raises(SystemExit) as bad:
        sidebyside.main(["--data", str(tmp_path / "d"), "--variant", "Unfused fused_loss", "--out", str(tmp_path)])
    assert bad.value.code == 2 and "NAME:KEY=VALUE" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        sidebyside.main(["--data", str(tmp_path / "d"), "--only", "native-nope", "--out", str(tmp_path)])
    # the table: every native program against the record, and each one's Welch test
    run = lambda ms, loss: dict(phases={"all": dict(median_ms=ms)}, val_losses=[[40, loss]])  # noqa: E731
    summary = dict(steps=40, val_tokens=1, attention="flex", variants={"native-unfused": ["fused_loss=false"]},
                   runs={"2": {"record": [run(340, 3.80), run(342, 3.82)], "native": [run(306, 3.81), run(308, 3.79)],
                               "native-unfused": [run(345, 3.80), run(345, 3.83)]}})
    text = sidebyside.table(summary)
    assert "| 2 | native | all | 341.0 | 307.0 | 0.900 |" in text
    assert "| 2 | native-unfused | all | 341.0 | 345.0 | 1.012 |" in text
    assert text.count("Welch t =") == 2 and "native-unfused: fused_loss=false" in text


def test_only_a_list_runs_those_programs_alternating_in_its_order(tmp_path, capsys):
    """benchmarks/lever_ab.sh: native against native with one lever off, no record run."""
    small_shards(tmp_path / "d")
    assert sidebyside.main(["--data", str(tmp_path / "d"), "--world-sizes", "1", "--repeat", "2", "--seed", "7",
                            "--variant", "off:fused_loss=false", "--only", "native-off,native", "--dry-run",
                            "--out", str(tmp_path / "sbs")]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[")]
    assert [line.split("]")[0] for line in lines] == [
        f"[{who} ws1 run {i}" for i in (1, 2) for who in ("native-off", "native")]
    assert all("fused_loss=false" in line for line in lines[::2])
    assert not any("fused_loss" in line for line in lines[1::2])
    assert "--set seed=8" in lines[2] and "--set seed=8" in lines[3]
    for bad in ("native,native", "native,record-x"):
        with pytest.raises(SystemExit):
            sidebyside.main(["--data", str(tmp_path / "d"), "--only", bad, "--dry-run", "--out", str(tmp_path)])

# ---- benchmarks/device_diff.py's CPU mode (its GPU results are in train/BENCHMARKS.md) ---------------------------

def test_device_diff_judges_each_rank_against_its_own_bound():
    """Each rank has its own batch and so its own bound. On 2026-11-30 the script set the largest value of any
    rank against rank 0's bound, and failed a gradient that was within rank 1's own bound."""
    from benchmarks.device_diff import judge

    both_within = torch.tensor([[0.065, 0.087], [0.092, 0.120]], dtype=torch.float64)  # the 2026-11-30 case
    assert judge(both_within) == (True, 1)  # rank 1 nearest its bound (0.77 of it; rank 0: 0.75)
    rank1_over = torch.tensor([[0.080, 0.087], [0.070, 0.060]], dtype=torch.float64)  # under rank 0's bound
    assert judge(rank1_over) == (False, 1)
    nan = torch.tensor([[float("nan"), 0.1], [0.01, 0.1]], dtype=torch.float64)
    assert judge(nan) == (False, 0)


@pytest.mark.slow
def test_device_diff_cpu_smoke_at_two_ranks_with_the_fused_loss(tmp_path):
    """The GPU differential script itself, on CPU with gloo at 2 ranks (small model), for train/ with
    fused_loss: every check passes and the report says so."""
    import subprocess
    import sys


    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           "benchmarks/device_diff.py", "--cpu-smoke", "--set", "fused_loss=true",
                           "--out", str(tmp_path / "diff")], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "diff" / "device_diff.json").read_text())
    assert report["world_size"] == 2 and report["overrides"] == ["fused_loss=true"] and report["failed"] == 0
    assert len(report["checks"]) == 100 and "100 ok, 0 failed" in done.stdout


def test_seed_gives_run_i_of_both_programs_seed_base_plus_i(tmp_path, capsys, monkeypatch):
    """--seed: run i of both programs starts from seed BASE+i-1 (the record through one inserted line reading
    SBS_SEED, train/ through --set seed), so a set of runs is repeatable and each program samples the same
    initialisations."""
    small_shards(tmp_path / "d")
    out = tmp_path / "sbs"
    assert sidebyside.main(["--data", str(tmp_path / "d"), "--world-sizes", "1", "--repeat", "2", "--seed", "10",
                            "--dry-run", "--out", str(out)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[")]
    assert "SBS_SEED=10 " in lines[0] and "--set seed=10" in lines[1]
    assert "SBS_SEED=11 " in lines[2] and "--set seed=11" in lines[3]
    text = (out / "record" / "train_gpt.py").read_text()
    assert text.count(SEED_LINE + SEED_ANCHOR) == 1  # one text for every seed: the compile caches carry over
    seeded = {}
    for value in ("7", "7", "8"):  # the inserted line, as the program runs it
        monkeypatch.setenv("SBS_SEED", value)
        exec(SEED_LINE, {"os": os, "torch": torch})
        seeded.setdefault(value, []).append(torch.rand(3))
    assert torch.equal(*seeded["7"]) and not torch.equal(seeded["7"][0], seeded["8"][0])


def test_adam_time_runs_both_updates_from_one_start():
    """benchmarks/adam_time.py on the CPU (tiny preset, torch.compile off: Inductor on two cores takes minutes):
    it times both paths over the model's Adam tensors and compares where they end."""
    import subprocess
    import sys


    done = subprocess.run([sys.executable, "benchmarks/adam_time.py", "--device", "cpu", "--preset", "tiny",
                           "--steps", "2", "--warmup", "1"], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, TORCHDYNAMO_DISABLE="1"))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["eager_ms"] > 0 and result["compiled_ms"] > 0
    assert result["max_rel_diff"] == 0.0  # without Inductor both paths are the same arithmetic
    assert [shape for shape, _ in result["tensors"]] == [[36], *[[50304, 64]] * 5]  # scalars, head, 4 embeddings


def test_sigterm_stops_the_running_program_with_sidebyside(tmp_path):
    """device_session.sh stops a priming run with SIGTERM; the program runs in its own session, so sidebyside
    must stop it itself, or it would keep the GPU through the next timed run."""
    import signal
    import subprocess
    import sys
    import time

    pid_file = tmp_path / "child.pid"
    child = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    code = ("import signal, sys; from pathlib import Path; from benchmarks import sidebyside as s; "
            "signal.signal(signal.SIGTERM, s._interrupt); "
            f"s.run([sys.executable, '-c', {child!r}], {{}}, Path('.'), Path({str(tmp_path / 'out.txt')!r}), [], 100)")
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=sidebyside.REPO,
                              env=dict(os.environ, PYTHONPATH=str(sidebyside.REPO)))
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    child_pid = int(pid_file.read_text())
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(timeout=30) != 0  # interrupted, not a normal end
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.kill(child_pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(child_pid, signal.SIGKILL)
        pytest.fail("the program outlived sidebyside")


def test_shared_gpu_runs_keep_their_losses_but_not_their_step_times(tmp_path, capsys):
    """Runs that shared the GPU (device_session.sh phase one, wave 1) count in the loss comparison and the run
    table, never in the speed medians; --site goes first on both programs' PYTHONPATH."""
    flops = {"3": 2.8e14, "7": 2.85e14, "11": 2.9e14}
    alone = sidebyside.run_result(synthetic_log(80, {3: 640.0, 7: 666.0, 11: 684.0}), 80, flops, 760.0, 1)
    shared = dict(sidebyside.run_result(synthetic_log(80, {3: 1280.0, 7: 1332.0, 11: 1368.0}), 80, flops, 760.0, 1),
                  shared_gpu=True)
    summary = dict(steps=80, val_tokens=1, attention="flex", tflops=760.0,
                   runs={"1": {"record": [alone, shared], "native": [alone, shared]}})
    text = sidebyside.table(summary)
    assert "| 1 | native | 7 | 666.0 | 666.0 | 1.000 |" in text  # the shared runs' 1332 ms left out
    assert text.count("(shared GPU)") == 2
    small_shards(tmp_path / "d")
    site = tmp_path / "site"
    assert sidebyside.main(["--data", str(tmp_path / "d"), "--world-sizes", "1", "--site", str(site),
                            "--shared-gpu", "--dry-run", "--out", str(tmp_path / "sbs")]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[")]
    assert len(lines) == 2 and all(f"PYTHONPATH={site}{os.pathsep}" in line for line in lines)


def test_the_record_log_is_the_one_the_run_printed_when_two_runs_share_the_folder(tmp_path):
    """Two record runs at once in one program folder (phase one, wave 1): each takes the log it printed."""
    logs = tmp_path / "logs"
    logs.mkdir()
    mine, other = logs / "0a0a0a0a-1111.txt", logs / "ffff0000-2222.txt"  # the other sorts last
    mine.write_text("mine")
    other.write_text("other")
    stdout = tmp_path / "stdout.txt"
    stdout.write_text(f"logs/{mine.name}\nstep:0/80 val_loss:10.8258 train_time:0ms step_avg:0.11ms\n")
    assert sidebyside.record_log(tmp_path, stdout, set()) == mine
    stdout.write_text("")  # nothing printed: only an unambiguous new file is taken
    assert sidebyside.record_log(tmp_path, stdout, {mine}) == other
    assert sidebyside.record_log(tmp_path, stdout, set()) is None


# ---- nothing before the first launch imports torch -------------------------------------------------------------

FIRST_LAUNCH = '''import json, sys, threading
from pathlib import Path
import benchmarks.sidebyside as sbs

counted = threading.Event()
def flops_by_phase(train_files):  # the real count imports torch: it waits here until the first launch has happened
    counted.wait(60)
    return {"3": 1.0, "7": 1.0, "11": 1.0}
def gated_pair(record, native, *args, **kwargs):
    print(json.dumps({"torch_imported": "torch" in sys.modules}), flush=True)
    counted.set()
    raise SystemExit(0)
sbs.flops_by_phase, sbs.gated_pair = flops_by_phase, gated_pair
sbs.main(sys.argv[1:])
'''


def test_the_first_pair_launches_before_anything_imports_torch(tmp_path):
    """2026-12-06: each gated pair spent about 8 s in sidebyside before native's launch (torch's import for the
    record program's module, the shards' token count and the FLOPs), on the lease's critical path. The patch, the
    count and the commands need no torch now, and the FLOPs are counted beside the runs."""
    small_shards(tmp_path / "d")
    (tmp_path / "matmul.json").write_text(json.dumps({"tflops": 700.0, "gpu": "stand-in"}))
    args = ["--data", str(tmp_path / "d"), "--world-sizes", "1", "--steps", "80", "--seed", "1", "--gate-native",
            "20", "--matmul-file", str(tmp_path / "matmul.json"), "--out", str(tmp_path / "sbs")]
    done = subprocess.run([sys.executable, "-c", FIRST_LAUNCH, *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)), timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"torch_imported": False}


def test_a_file_that_is_not_a_shard_is_named(tmp_path, capsys):
    small_shards(tmp_path / "d")
    (tmp_path / "d" / "fineweb_train_000002.bin").write_bytes(b"not a shard")
    with pytest.raises(SystemExit, match="fineweb_train_000002.bin is not a token shard"):
        sidebyside.main(["--data", str(tmp_path / "d"), "--world-sizes", "1", "--dry-run",
                         "--out", str(tmp_path / "sbs")])
    with pytest.raises(SystemExit, match="no shards match"):
        sidebyside.main(["--train-files", str(tmp_path / "none_*.bin"), "--val-files", str(tmp_path / "v*.bin"),
                         "--world-sizes", "1", "--dry-run", "--out", str(tmp_path / "sbs")])
