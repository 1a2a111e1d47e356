from pathlib import Path

import pytest

from pipeline.records.logparse import parse_log, parse_text
from tests.logfactory import PROGRAM, make_log

RECORD_LOGS = Path(__file__).parent / "fixtures" / "record-logs" / "2025-09-23_MuonCustomSizing"


def test_record_fixture_logs_parse_completely():
    logs = sorted(RECORD_LOGS.glob("*.txt"))
    assert len(logs) == 4
    for path in logs:
        log = parse_log(path)
        assert log.problems == ()
        assert log.program is None  # the fixtures start at the first '=' line
        assert (log.python, log.torch, log.torch_cuda, log.triton) == (
            "3.10.12", "2.9.0.dev20250726+cu126", "12.6", "3.4.0")
        assert log.hardware.driver == "570.148.08" and log.hardware.cuda == "12.8"
        assert [g.name for g in log.hardware.gpus] == ["NVIDIA H100 80GB HBM3"] * 8
        assert log.completed and log.scheduled_steps == 1680 and log.last_step == 1680
        assert len(log.steps) == 1680 and [v.step for v in log.vals][:3] == [0, 125, 250]
        assert log.peak_allocated_mib == 30760 and log.peak_reserved_mib > 45000
    losses = sorted(parse_log(p).final_val_loss for p in logs)
    assert losses == [3.2792, 3.2792, 3.2799, 3.2801]


def test_full_log_with_program_keeps_exact_program_bytes():
    log = parse_text(make_log(PROGRAM).encode())
    assert log.program == PROGRAM.encode()
    assert log.completed and log.final_val_loss == 3.2795 and log.train_time_ms == round(1680 * 89.1)


def test_truncated_log_reports_last_step_and_never_raises():
    log = parse_text(make_log(cut_after_step=431).encode())
    assert not log.completed and log.final_val_loss is None
    assert log.last_step == 431
    assert any("truncated: the last step reached is 431 of 1680" in p for p in log.problems)
    assert any("unreadable step line" in p for p in log.problems)


def test_log_cut_inside_the_header():
    text = make_log()
    log = parse_text(text[: text.index("Running Triton")].encode())
    assert log.torch == "2.9.0.dev20250726+cu126" and log.triton is None
    assert any("never reached its first step" in p for p in log.problems)


def test_empty_and_garbage_logs():
    assert parse_text(b"").problems[0] == "the log is empty"
    garbage = parse_text(b"\x00\xff not a log at all\n")
    assert not garbage.completed and garbage.problems


def test_a_hostile_nvidia_smi_table_in_a_header_is_parsed_in_linear_time():
    """Unbounded `\\d+` before a literal made a 60,000-digit cell take 112 s; every repetition is bounded now."""
    import time

    text = make_log(None)
    row = next(line for line in text.splitlines() if line.startswith("| N/A   31C"))
    hostile = text.replace(row, "| " + "1" * 30000 + " | " + "2" * 30000 + " |  0%  Default |", 1)
    hostile = hostile.replace("|   0  NVIDIA", "|   0  " + " " * 60000 + "NVIDIA", 1)
    started = time.perf_counter()
    log = parse_text(hostile.encode())
    assert time.perf_counter() - started < 10
    assert log.completed and log.problems == ()
    gpu = log.hardware.gpus[0]  # what the cells hold is read; what they do not hold is None
    assert gpu.name == "NVIDIA H100 80GB HBM3" and gpu.memory_total_mib is None and gpu.power_draw_w is None
    broken = text.replace("|   0  ", "|   " + "9" * 30000 + "  ", 1)  # no GPU index: the table is unreadable
    log = parse_text(broken.encode())
    assert [i.code for i in log.issues] == ["smi_table"] and len(log.problems[0]) < 300


def test_a_2024_program_without_final_newline_ends_at_the_separator_glued_to_its_last_line():
    # what a 2024 program run from its pinned bytes (cut from a log, so no final newline) writes:
    # "="*100 "\n" code "="*100 "\n" header "="*100 "\n" output
    sep = b"=" * 100
    program = b"import os\nprint('hello')\ndist.destroy_process_group()"
    header = b"Running pytorch 2.11.0+cu130 compiled for CUDA 13.0\nnvidia-smi:\n| GPU |\n"
    body = b"step:0/2 val_loss:10.0 train_time:0ms step_avg:nanms\nstep:2/2 val_loss:5.0 train_time:9ms step_avg:4ms\n"
    parsed = parse_text(sep + b"\n" + program + sep + b"\n" + header + sep + b"\n" + body)
    assert parsed.program == program
    assert parsed.layout == "late-2024"
    assert [v.val_loss for v in parsed.vals] == [10.0, 5.0]


# ---- the whole-buffer scan (parse_text) reads every log as the line-by-line reading (parse_stream) does ----

def _both(raw: bytes):
    """(the scan's reading, the line reading, whether the scan read it); the reading without the steps (the
    importer's) must be the scan's once its steps are read where it says they start."""
    import dataclasses
    import io

    from pipeline.records.logparse import _Parser, _Scan, parse_stream, parse_text_unread, step_columns, steps_of

    scanned = _Scan(_Parser("<log>"), raw).run()
    fast = repr(parse_text(raw))
    log, unread = parse_text_unread(raw)
    if unread is not None:
        at, count = unread
        assert log.steps == () and len(step_columns(raw, at)[0]) == count
        log = dataclasses.replace(log, steps=steps_of(step_columns(raw, at)))
    assert repr(log) == fast
    return fast, repr(parse_stream(io.BytesIO(raw))), scanned


def _shapes() -> dict[str, bytes]:
    """Logs in each layout and with each oddity the scan handles or must decline."""
    sep = b"=" * 100
    log = make_log(PROGRAM).encode()
    body = log[log.index(b"\nstep:") + 1:]
    header = make_log(None).encode()
    header = header[:header.index(b"\nstep:") + 1]
    program = PROGRAM.encode()
    return {
        "current": log, "no program": make_log(None).encode(), "crlf": log.replace(b"\n", b"\r\n"),
        "no final newline": log.rstrip(b"\n"), "trailing spaces": log.replace(b"ms\n", b"ms  \t\n"),
        "cut": make_log(PROGRAM, cut_after_step=431).encode(), "empty": b"", "blank": b"\n \n",
        "no separator": body, "late-2024": sep + b"\n" + program + sep + b"\n" + header[101:] + body,
        "late-2024 unterminated": sep + b"\n" + program.rstrip(b"\n") + sep + b"\n" + header[101:] + body,
        "lead header": sep + b"\n" + header[101:] + body, "lead never closed": sep + b"\n" + program,
        "upper-case STEP": log.replace(b"step:5/", b"STEP:5/"), "unreadable": log.replace(b"step:7/1680 ", b"step:7"),
        "train_loss": log.replace(b"step:9/1680 train_time", b"step:9/1680 train_loss:4.5 train_time"),
        "nan": log.replace(b"val_loss:3.2795", b"val_loss:nan"), "twice": log + body[-200:],
        "mid-line step": log.replace(b"step:11/1680", b"x step:11/1680"),
        "peak in header": header + b"peak memory allocated: 1 MiB reserved: 2 MiB\n" + body,
        "two peaks": log + b"peak memory allocated: 9 MiB reserved: 9 MiB \n",
        "schedules": log.replace(b"/1680 train_time:1", b"/99 train_time:1"),
        "many schedules": header + b"".join(b"step:%d/%d train_time:1ms step_avg:1ms\n" % (i, i) for i in range(20)),
        "llm.c": b"s:0 trl:10.9\ns:0 tel:10.8\ns:10 tel:3.9\n",
        "long line": log.replace(b"step:12/1680", b"step:12/1680" + b" " * 70_000),
        "separator in a line": log.replace(b"step:13/1680", b"x" + sep + b"\nstep:13/1680"),
        # what the importer's reading by shapes (_Scan._shapes) must leave to the line matches
        "a schedule's text in another line": log.replace(b"step:14/1680", b"loaded 3/1680 files\nstep:14/1680"),
        "validation text in another line": log.replace(b"step:15/1680", b"final val_loss: 3.2 here\nstep:15/1680"),
        "validation in capitals": log.replace(b"val_loss:3.2795", b"VAL_LOSS:3.2795"),
        "schedule with a leading zero": log.replace(b"/1680 train_time:1", b"/01680 train_time:1"),
        "unreadable late": log.replace(b"step:1600/1680 train_time:", b"step:1600/1680 train_time:x"),
    }


def test_the_scan_reads_every_shape_as_the_line_reading_does():
    scanned = []
    for name, raw in _shapes().items():
        fast, slow, used = _both(raw)
        assert fast == slow, name
        if used:
            scanned.append(name)
    assert {"current", "trailing spaces", "late-2024", "late-2024 unterminated", "train_loss", "nan", "twice",
            "two peaks"} <= set(scanned)


def test_the_importers_reading_matches_no_step_line_of_a_usual_log(monkeypatch):
    """parse_text_unread reads a usual log's step lines by their shapes (a dozen matches, not ~2,000), and says what
    parse_text (the line matches' reading) says once its steps are read."""
    import dataclasses

    from pipeline.records.logparse import _Scan, parse_text_unread, step_columns, steps_of

    raw = make_log(PROGRAM).encode()
    logs = (raw, raw[:raw.index(b"\nstep:432/") + 1])  # whole, and cut after a line (truncated)
    expected = [repr(parse_text(log_bytes)) for log_bytes in logs]
    assert "truncated: the last step reached is 431 of 1680" in parse_text(logs[1]).problems[-1]
    monkeypatch.setattr(_Scan, "_points", lambda *a: pytest.fail("every step line was matched"))
    for log_bytes, whole in zip(logs, expected):
        log, (at, count) = parse_text_unread(log_bytes)
        assert log.vals and count == len(step_columns(log_bytes, at)[0]) > 100
        assert repr(dataclasses.replace(log, steps=steps_of(step_columns(log_bytes, at)))) == whole


def test_the_scan_reads_every_fixture_log_as_the_line_reading_does():
    logs = [p for p in sorted((Path(__file__).parent / "fixtures").rglob("*")) if p.suffix in (".txt", ".log")]
    assert len(logs) > 20
    used = 0
    for path in logs:
        fast, slow, scanned = _both(path.read_bytes())
        assert fast == slow, path
        used += scanned
    assert used > len(logs) // 2
