import json
import shutil

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.errors import InputError, ManifestError
from pipeline.records.model import load_record, load_record_file
from tests.paths import REPO_ROOT

RECORD = "2025-09-23_MuonCustomSizing"


def test_record_manifest_carries_the_spec_facts():
    r = load_record(RECORD)
    assert r.upstream.commit == "7d7952d2fb63307d54541e37dddd22d1a924b34a"
    assert r.upstream.renamed_by_commit == "8ead7fd776fc3dbb4d14c91d1ee4e19340f0d401"
    assert [log.val_loss for log in r.logs] == list(r.published.losses) == [3.2792, 3.2792, 3.2801, 3.2799]
    assert [log.train_time_ms / 1000 for log in r.logs] == list(r.published.times_s)
    assert r.published.mean_time_s == pytest.approx(sum(r.published.times_s) / 4)
    assert len(r.accepted_program_sha256) == 4
    assert (r.rules.target_val_loss, r.rules.p_value_max) == (3.28, 0.01)
    assert (r.hardware.gpu_count, r.hardware.gpu_model, r.hardware.driver) == (8, "NVIDIA H100 80GB HBM3", "570.148.08")
    assert (r.software.torch, r.software.triton, r.software.python) == ("2.9.0.dev20250726+cu126", "3.4.0", "3.10.12")
    assert r.software.flash_attention.commit == "92207199ac70fa2a20c43f319862c7a8a8d452dd"
    assert (r.environment, r.dataset.name, r.dataset.train_shards) == ("record-2025-09", "fineweb10B-gpt2", 9)
    parent = load_record(r.parent)
    assert {3.2786, 3.2798} <= set(parent.published.losses) and len(parent.published.times_s) == 10


@pytest.fixture
def manifest_copy(tmp_path):
    src = REPO_ROOT / "manifests" / "records" / f"{RECORD}.yaml"
    dst = tmp_path / f"{RECORD}.yaml"
    shutil.copy(src, dst)
    return dst


@pytest.mark.parametrize("old, new, field, words", [
    ("target_val_loss: 3.28", "target_val_loss: low", "rules.target_val_loss", "must be a number"),
    ("  gpu_count: 8\n", "", "hardware.gpu_count", "is missing"),
    ("  p_value_max: 0.01", "  p_value_max: 1.5", "rules.p_value_max", "outside (0, 1)"),
    ("\n  program_bytes: 59613\n", "\n  program_bytes: 59613\n  colour: red\n", "logs[0].colour",
     "not a known field"),
    ("\n  sha256: 58cedec0", "\n  sha256: 58cedec", "logs[0].sha256", "not a sha256"),
    ("loss_evidence: parent", "loss_evidence: vibes", "rules.loss_evidence", "use one of"),
    ("schema_version: 1", "schema_version: 7", "schema_version", "this tool reads version 1"),
])
def test_a_bad_field_names_file_field_and_fix(manifest_copy, old, new, field, words):
    text = manifest_copy.read_text()
    assert old in text
    manifest_copy.write_text(text.replace(old, new, 1))
    with pytest.raises(ManifestError) as err:
        load_record_file(manifest_copy)
    message = str(err.value)
    assert str(manifest_copy) in message and f"field '{field}'" in message and words in message
    assert "fix:" in message


def test_malformed_yaml_names_the_line(manifest_copy):
    manifest_copy.write_text(manifest_copy.read_text().replace("  gpu_count: 8", "  gpu_count: [8", 1))
    with pytest.raises(ManifestError, match=r"line \d+") as err:
        load_record_file(manifest_copy)
    assert str(manifest_copy) in str(err.value)


def test_unknown_record():
    with pytest.raises(InputError, match="(?s)unknown record 'nope'.*fix: use one of: .*2025-09-23_MuonCustomSizing"):
        load_record("nope")


@pytest.mark.parametrize("name", ["2025-09-23", "MuonCustom", "2025-09-23_MuonCustomSizng"])
def test_an_unknown_record_close_to_a_known_one_names_it(name):
    """A date alone, a title alone, a typo: the fix named all 22 records; it names the ones meant."""
    with pytest.raises(InputError, match=f"(?s)unknown record '{name}'.*fix: did you mean 2025-09-23_MuonCustomSizing"):
        load_record(name)


def test_cli_list_and_show_json():
    runner = CliRunner()
    rows = json.loads(runner.invoke(cli, ["records", "list", "--json"]).output)
    assert {r["name"] for r in rows} >= {RECORD, "2025-09-21_DropAttn", "demo-cpu-synth"}
    shown = json.loads(runner.invoke(cli, ["records", "show", RECORD, "--json"]).output)
    assert shown["published"]["mean_time_s"] == 149.6905 and shown["parent"] == "2025-09-21_DropAttn"
    human = runner.invoke(cli, ["records", "show", RECORD]).output
    assert "8 x NVIDIA H100 80GB HBM3" in human


def test_record_pins_the_code_fingerprint():
    pinned = load_record(RECORD).program.fingerprint
    assert pinned.startswith("ast1-") and len(pinned) == len("ast1-") + 64


def test_a_parent_manifest_that_is_a_folder_is_named_not_skipped(tmp_path):
    """A folder in place of the parent's manifest was skipped without a word (and with it the comparison with the
    parent), while a parent with a syntax error was refused."""
    from pipeline.records.model import load_parent

    registry = tmp_path / "records"
    registry.mkdir()
    shutil.copy(REPO_ROOT / "manifests" / "records" / "2025-09-23_MuonCustomSizing.yaml", registry)
    record = load_record("2025-09-23_MuonCustomSizing", registry)
    assert record.parent and load_parent(record) is None  # absent: a sample of the history, as before
    (registry / f"{record.parent}.yaml").mkdir()
    with pytest.raises(InputError, match="the parent record's manifest is a folder, not a file"):
        load_parent(record)
