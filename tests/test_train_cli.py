"""End to end: `python -m train --preset tiny` in a subprocess writes a record-format log and metrics.jsonl;
bad data and bad options end with exit code 3 and one message that names the problem.

    .venv/bin/python -m pytest -q tests/test_train_cli.py
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_train_data import write_corpus
from train.config import preset
from train.data import write_shard

REPO = Path(__file__).resolve().parent.parent
SEP = "=" * 100
VAL = re.compile(r"^step:(\d+)/(\d+) val_loss:(\d+\.\d{4}) train_time:(\d+)ms step_avg:(\d+\.\d{2})ms$")
STEP = re.compile(r"^step:(\d+)/(\d+) train_time:(\d+)ms step_avg:(\d+\.\d{2})ms$")
PEAK = re.compile(r"^peak memory allocated: (\d+) MiB reserved: (\d+) MiB$")


def run_train(*args: str, timeout: int = 300, entry: tuple[str, ...] = ("-m", "train")
              ) -> subprocess.CompletedProcess:
    """The trainer's command line in a fresh Python; entry ("-c", code) runs code that starts it instead."""
    return subprocess.run([sys.executable, *entry, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("e2e")
    train_glob, val_glob = write_corpus(folder / "data")
    done = run_train("--preset", "tiny", "--train-files", train_glob, "--val-files", val_glob,
                     "--log-file", str(folder / "run" / "log.txt"), "--metrics-file", str(folder / "run" / "m.jsonl"),
                     "--profile", str(folder / "run" / "profile"))
    assert done.returncode == 0, done.stderr[-3000:]
    return folder / "run", done


def test_profile_covers_steps_6_to_8_and_warmup_marks_its_first_step(tiny_run):
    run, _ = tiny_run
    summary = json.loads((run / "profile" / "profile.json").read_text())
    assert summary["steps"] == [6, 7, 8] and summary["wall_ms"] > 0
    assert summary["kernels"] == 0 and summary["gpu_busy_ms"] == 0  # CPU: no device kernels to count
    assert "Self CPU" in (run / "profile" / "kernels.txt").read_text()
    ops = (run / "profile" / "ops.txt").read_text()  # grouped by input shapes: the model's (T, D) activations
    assert "Input Shapes" in ops and "aten::mm" in ops and "[[" in ops
    # every operator that took time, not a top 40: the small copies are where a profile's questions are
    rows = [line for line in ops.splitlines() if line.strip().startswith(("aten::", "repro_train::"))]
    assert len(rows) > 100 and sum("aten::copy_" in row for row in rows) > 1
    events = [json.loads(line)["event"] for line in (run / "m.jsonl").read_text().splitlines()]
    assert events.index("warmup_first_step") < events.index("warmup")


def test_profile_families_and_busy_time():
    from train.profile import busy_us, family

    kernels = {  # kinds of names in the H200 profile of 2026-11-30 (docs/device-runs/2026-11-30-h200x2-sbs)
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT": "matmul",
        "nvjet_sm90_qqtst_192x192_128x4_2x1_v_bz_coopB_TNN": "matmul",
        "triton_tem_fused_flex_attention_backward_mul_select_0": "attention",
        "triton_tem_fused__to_copy_add_arange_bitwise_and_eq_0": "attention",  # flex's forward (its mask_mod)
        "triton_red_fused__log_softmax__to_copy_amax_div_mul_2": "fused elementwise",
        "triton_poi_fused__scaled_mm__to_copy_clone_div_lift_3": "fused elementwise",
        "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL": "collectives",
        "Memcpy DtoD (Device -> Device)": "copies",
        "void at::native::vectorized_elementwise_kernel<4>": "other",
    }
    assert {name: family(name) for name in kernels} == kernels
    # [0, 10) and [5, 12) overlap on two streams; [20, 21) alone: 12 + 1
    assert busy_us([(5, 12), (0, 10), (20, 21), (6, 7)]) == 13
    # a compiled graph's span (torch 2.11 lists it beside the kernels it covers) and a runtime stall are not kernels
    from train.profile import is_kernel
    assert not is_kernel("## Call CompiledFxGraph fuejrs5cvsl6oehnys5z56jylracrygqb4uaeqem7wn4v7j6kvu6 ##")
    assert not is_kernel("Command Buffer Full") and is_kernel("Memcpy DtoD (Device -> Device)")


def test_kernel_table_lists_every_kernel_per_step_by_full_name():
    from types import SimpleNamespace

    from train.profile import kernel_table

    def kernel(name, us):
        return SimpleNamespace(name=name, time_range=SimpleNamespace(elapsed_us=lambda: us))

    long_name = "triton_poi_fused_add_mul_rms_norm_select_sigmoid_view_" + "x" * 40  # past the table's 55 characters
    events = [kernel("Memcpy DtoD (Device -> Device)", 20.0)] * 6 + [kernel(long_name, 300.0)] * 2
    lines = kernel_table(events, steps=2).splitlines()
    assert lines[0].startswith("# 2 steps")
    first, second = lines[1].split(), lines[2].split()
    assert first[:4] == ["1.0", "0.300", "300.0", "fused"] and first[-1] == long_name
    assert second[:4] == ["3.0", "0.060", "20.0", "copies"] and lines[2].endswith("Memcpy DtoD (Device -> Device)")


def test_copy_neighbours_name_the_kernels_around_each_copy_on_its_stream():
    from types import SimpleNamespace

    from train.profile import copy_neighbours

    def kernel(name, start, us, stream=7):
        return SimpleNamespace(name=name, device_resource_id=stream,
                               time_range=SimpleNamespace(start=start, elapsed_us=lambda: us))

    copy = "Memcpy DtoD (Device -> Device)"
    events = [kernel("flex_bwd", 0, 5), kernel(copy, 10, 20), kernel(copy, 30, 40), kernel("qk_bwd", 80, 5),
              kernel("other_stream", 20, 5, stream=9), kernel("flex_bwd", 100, 5), kernel(copy, 110, 30),
              kernel("qk_bwd", 150, 5)]
    lines = copy_neighbours(events, steps=1).splitlines()
    assert lines[0].startswith("# 1 steps") and len(lines) == 2
    assert lines[1].split() == ["3.0", "30.0", "flex_bwd", "->", "qk_bwd"]


def test_copy_launchers_name_the_host_call_and_the_operators_around_it():
    from train.profile import copy_launchers

    def span(cat, name, ts, dur, tid=1, **args):
        return dict(cat=cat, name=name, ts=ts, dur=dur, pid=0, tid=tid, args=args)

    trace = [span("user_annotation", "## Call CompiledFxGraph f1 ##", 0, 100),
             span("cpu_op", "aten::mm", 10, 5), span("cuda_runtime", "cudaLaunchKernel", 11, 1, correlation=1),
             span("cpu_op", "repro::op", 20, 30), span("cpu_op", "aten::copy_", 22, 4),
             span("cuda_runtime", "cudaMemcpyAsync", 23, 1, correlation=2),
             span("cuda_driver", "cuMemcpyDtoDAsync_v2", 40, 1, correlation=3),  # after copy_ ended: only op
             span("cuda_runtime", "cudaMemcpyAsync", 60, 1, correlation=4),  # after op: only the mark
             span("cuda_runtime", "cudaMemcpyAsync", 500, 1, tid=2, correlation=5),  # another thread: nothing
             span("kernel", "gemm", 30, 9, tid=7, correlation=1),
             span("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 40, 30, tid=7, correlation=2, bytes=75_000_000),
             span("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 80, 10, tid=7, correlation=3, bytes=1_000_000),
             span("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 95, 20, tid=7, correlation=4, bytes=2_000_000),
             span("gpu_memcpy", "Memcpy HtoD (Host -> Device)", 99, 20, tid=7, correlation=6),
             span("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 600, 20, tid=7, correlation=5, bytes=0)]
    lines = copy_launchers(trace, steps=1).splitlines()
    assert lines[0].startswith("# 1 steps") and len(lines) == 5
    rows = {line.split("<-")[1].strip(): line.split("<-")[0].split() for line in lines[1:]}
    mark = "## Call CompiledFxGraph f1 ##"
    assert rows == {f"{mark} > repro::op > aten::copy_": ["1.0", "30.0", "75.00", "cudaMemcpyAsync"],
                    f"{mark} > repro::op": ["1.0", "10.0", "1.00", "cuMemcpyDtoDAsync_v2"],
                    mark: ["1.0", "20.0", "2.00", "cudaMemcpyAsync"],
                    "-": ["1.0", "20.0", "0.00", "cudaMemcpyAsync"]}


def test_log_has_the_record_layout(tiny_run):
    run, done = tiny_run
    text = (run / "log.txt").read_text()
    program, sep, rest = text.partition("\n" + SEP + "\n")
    assert sep, "no separator line after the program"
    train_dir = REPO / "train"
    for path in sorted(train_dir.glob("*.py")):
        assert f"# ---- train/{path.name} ----\n" + path.read_text() in program + "\n"
    env, sep2, steps = rest.partition(SEP + "\n")
    assert sep2
    lines = env.splitlines()
    assert lines[0].startswith("Running Python ") and re.match(r"Running PyTorch \S+ compiled for CUDA \S+", lines[1])
    assert lines[2].startswith("Running Triton version ") and "nvidia-smi" in env

    total = preset("tiny").total_steps
    vals, step_lines, peaks = [], [], []
    for line in steps.splitlines():
        if m := VAL.match(line):
            vals.append((int(m[1]), int(m[2]), float(m[3]), int(m[4]), float(m[5])))
        elif m := STEP.match(line):
            step_lines.append((int(m[1]), int(m[2]), int(m[3]), float(m[4])))
        elif m := PEAK.match(line):
            peaks.append(line)
        else:
            pytest.fail(f"unexpected line after the header: {line!r}")
    assert [s for s, *_ in step_lines] == list(range(1, total + 1)) and {n for _, n, *_ in step_lines} == {total}
    assert [s for s, *_ in vals] == [0, 5, 10]
    assert vals[-1][2] < vals[0][2] - 1.0  # the loss falls on generated, learnable documents
    assert vals[0][2] == pytest.approx(10.8258, abs=1e-4)  # zero head: ln(50304)
    for s, _, ms, avg in step_lines:
        assert avg == pytest.approx(ms / s, abs=0.6)
    assert len(peaks) == 1 and steps.rstrip().endswith(peaks[0])
    assert "step:10/10 val_loss" in done.stdout  # rank 0 also prints to the console


def test_the_projects_log_parser_reads_it(tiny_run):
    logparse = pytest.importorskip("pipeline.records.logparse")
    run, _ = tiny_run
    parsed = logparse.parse_log(run / "log.txt")
    assert parsed.completed and parsed.scheduled_steps == 10 and len(parsed.steps) == 10
    assert parsed.final_val_loss == parsed.vals[-1].val_loss and parsed.torch
    assert parsed.program is not None and b"# ---- train/model.py ----" in parsed.program


def test_metrics_jsonl(tiny_run):
    run, _ = tiny_run
    events = [json.loads(line) for line in (run / "m.jsonl").read_text().splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[:2] == ["config", "muon_plan"] and kinds[-1] == "end"
    cfg = preset("tiny")
    assert events[0]["config"]["num_layers"] == 6 and events[0]["grad_accum"] == 4
    assert events[1]["plan"]["sizes"] == [1, 4, 7, 7]
    steps = [e for e in events if e["event"] == "step"]
    assert [e["step"] for e in steps] == list(range(1, 11))
    assert steps[0]["lr_mult"] == 1.0 and steps[0]["muon_momentum"] == 0.85
    vals = [e for e in events if e["event"] == "val"]
    assert vals[-1]["ws_long"] == cfg.ws_final_long and vals[-1]["ws_short"] == cfg.ws_final // 2
    assert vals[0]["ws_long"] == 3 and vals[0]["attn_scale"] == 0.1
    assert events[-1]["final_val_loss"] == vals[-1]["val_loss"]


def test_bad_shard_exits_3_with_a_message(tmp_path):
    train_glob, val_glob = write_corpus(tmp_path / "data", train_tokens=20_000, val_tokens=5_000)
    bad = tmp_path / "data" / "fineweb_train_000001.bin"
    bad.write_bytes(bad.read_bytes()[:-10])
    done = run_train("--preset", "tiny", "--train-files", train_glob, "--val-files", val_glob)
    assert done.returncode == 3
    assert f"error: {bad}: the header claims" in done.stderr and "Traceback" not in done.stderr


def test_missing_files_and_bad_options_exit_3(tmp_path):
    done = run_train("--preset", "tiny", "--train-files", str(tmp_path / "none_*.bin"), "--val-files", "x")
    assert done.returncode == 3 and "no train files match" in done.stderr
    done = run_train("--preset", "tiny", "--set", "num_layer=8")
    assert done.returncode == 3 and "--set num_layer: unknown key" in done.stderr
    done = run_train("--preset", "huge")
    assert done.returncode == 3 and "unknown preset 'huge'" in done.stderr


def test_too_little_training_data_fails_before_training(tmp_path):
    train_glob, val_glob = write_corpus(tmp_path / "data", train_tokens=3_000, val_tokens=5_000)
    write_shard(tmp_path / "data" / "fineweb_train_000002.bin", [50256, 1, 2])
    done = run_train("--preset", "tiny", "--train-files", train_glob, "--val-files", val_glob)
    assert done.returncode == 3 and "--set data_cycle=true" in done.stderr and "Traceback" not in done.stderr


def test_an_unseeded_run_logs_the_seed_it_drew_and_that_seed_repeats_it(tiny_run, tmp_path):
    """Unseeded, every run draws its own initialisation (as the record's CPU-drawn weights do) and logs the seed;
    --set seed=N with the logged seed starts from the same weights and ends at the same losses."""
    run, done = tiny_run
    config = json.loads((run / "m.jsonl").read_text().splitlines()[0])
    seed = config["init_seed"]
    assert config["config"]["seed"] is None and isinstance(seed, int)
    assert f"init seed {seed} (drawn; --set seed=N repeats it)" in done.stdout  # the console; the log keeps
    # the record's format
    train_glob, val_glob = write_corpus(tmp_path / "data")
    again = run_train("--preset", "tiny", "--train-files", train_glob, "--val-files", val_glob, "--set",
                      f"seed={seed}", "--log-file", str(tmp_path / "log.txt"))
    assert again.returncode == 0, again.stderr[-3000:]
    vals = lambda text: [m[3] for m in map(VAL.match, text.splitlines()) if m]  # noqa: E731
    assert vals((tmp_path / "log.txt").read_text()) == vals((run / "log.txt").read_text())
    assert f"init seed {seed}\n" in again.stdout


# the trainer with GPT.refresh_step_weights doing nothing: every micro-step casts the matrices, as the record does
CAST_PER_MICRO_STEP = ("import runpy, train.model; train.model.GPT.refresh_step_weights = lambda self: None; "
                       "runpy.run_module('train', run_name='__main__')")


def test_bf16_weights_cast_once_per_step_train_to_the_same_losses(tmp_path):
    """Lever 14 through the whole loop (warm-up, its undoing, timed steps, validation): a bf16 tiny run with the
    matrices cast once per step ends at the validation losses of the same run casting in every micro-step, to
    the last bit of metrics.jsonl's floats. A loop that misses a refresh after the weights change fails here."""
    train_glob, val_glob = write_corpus(tmp_path / "data")
    losses = []
    for once in (False, True):
        metrics = tmp_path / f"m-{once}.jsonl"
        args = ("--preset", "tiny", "--train-files", train_glob, "--val-files", val_glob, "--set", "seed=5",
                "--set", "bf16=true", "--metrics-file", str(metrics))
        done = run_train(*args) if once else run_train(*args, entry=("-c", CAST_PER_MICRO_STEP))
        assert done.returncode == 0, done.stderr[-3000:]
        events = [json.loads(line) for line in metrics.read_text().splitlines()]
        losses.append([e["val_loss"] for e in events if e.get("event") == "val"])
    assert len(losses[0]) >= 2 and losses[0] == losses[1]
