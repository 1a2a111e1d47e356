"""The demo record's published numbers are the ones its committed logs print (manifests/records/demo-cpu-synth/)."""

from statistics import mean

from pipeline.records.logparse import parse_log
from pipeline.records.model import load_record
from tests.paths import REPO_ROOT

RECORDS = REPO_ROOT / "manifests" / "records"


def test_demo_record_published_numbers_come_from_its_logs():
    record = load_record("demo-cpu-synth", RECORDS)
    logs = sorted((RECORDS / "demo-cpu-synth").glob("*.log.txt"))
    parsed = [parse_log(p) for p in logs]
    assert len(parsed) == len(record.published.losses) == 4
    assert all(p.completed and p.scheduled_steps == record.published.steps for p in parsed)
    assert [round(p.final_val_loss, 4) for p in parsed] == list(record.published.losses)
    assert [p.train_time_ms / 1000 for p in parsed] == list(record.published.times_s)
    assert abs(mean(record.published.times_s) - record.published.mean_time_s) < 1e-3
