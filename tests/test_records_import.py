"""`repro records import`: the upstream table and logs into manifests; idempotent; hand-written fields kept.

Runs on tests/fixtures/upstream-sample (the upstream README at f411b3d and trimmed logs of four records)
and on clones built here for the edge cases. Never reads ../shared.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.errors import InputError
from pipeline.records.importer import import_records
from pipeline.records.logfacts import read_log_facts
from pipeline.records.model import load_record, load_record_file

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "tests" / "fixtures" / "upstream-sample"
COMMIT = "f411b3d346aa52d3504324ca93c230fd84c6c07f"
IMPORTED = ["2024-06-06_AdamW", "2024-10-10_Muon", "2025-09-23_MuonCustomSizing", "2026-01-18_UnifiedOptimizers"]
SAMPLE_RECORDS = ["2024-06-06_AdamW", "2024-10-10_Muon", "2024-11-06_ShortcutsTweaks", "2024-11-19_FlexAttention",
                  "2024-12-04_ValueEmbed", "2025-01-13_Fp8LmHead", "2025-01-18", "2025-01-18-row1",
                  "2025-07-13_UpgradeTorch190", "2025-09-03_FA3", "2025-09-21_DropAttn", "2025-09-23_MuonCustomSizing",
                  "2025-09-27_BF16CE", "2026-01-10_FusedLinearReLUSquare", "2026-01-18_UnifiedOptimizers",
                  "2026-01-30_MimeticValueOutput", "2026-02-10_ShortWindow", "2026-05-27-MuddGatedAndDC",
                  "2026-06-11_RecursiveFromBest", "2026-07-13_PrefixTokenPrediction", "2026-07-17_FP8DownProjection"]


def registry(tmp_path: Path, with_hand_written: bool = False) -> Path:
    reg = tmp_path / "registry"
    shutil.copytree(ROOT / "manifests" / "environments", reg / "environments")
    shutil.copytree(ROOT / "manifests" / "datasets", reg / "datasets")
    (reg / "records").mkdir()
    if with_hand_written:
        # the manifest as written by hand, before any import
        shutil.copy(SAMPLE / "hand-written" / "2025-09-23_MuonCustomSizing.yaml", reg / "records")
    return reg


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def do_import(reg: Path, clone: Path = SAMPLE, *extra: str) -> dict:
    code, out = run("--registry", str(reg), "records", "import", str(clone), "--commit", COMMIT, "--json", *extra)
    assert code == 0, out
    return json.loads(out)


def test_sample_writes_one_manifest_per_record_folder(tmp_path):
    reg = registry(tmp_path)
    result = do_import(reg)
    assert sorted(result["written"]) == IMPORTED
    assert sorted(p.stem for p in (reg / "records").glob("*.yaml")) == IMPORTED
    # rows without a link, and rows whose folder is not in the sample, are named, not imported
    assert any("row 3 " in line and "no log link" in line for line in result["skipped_rows"])
    assert any("2025-09-21_DropAttn" in line and "not in this clone" in line for line in result["skipped_rows"])
    # the sibling folder of the linked log's folder holds a baseline: left out, with its reason
    unified = load_record("2026-01-18_UnifiedOptimizers", reg / "records")
    assert [log.file for log in unified.logs] == sorted(
        f"unified-optimizer/{p.name}"
        for p in (SAMPLE / "records/track_1_short/2026-01-18_UnifiedOptimizers/unified-optimizer").iterdir())
    assert [(x["file"], x["reason"]) for x in unified.imported.left_out] == [
        ("baseline/30446aee-70bb-4d79-9ad4-3407acd477ae.txt", "baseline")]


def test_manifest_pins_logs_programs_and_headers(tmp_path):
    reg = registry(tmp_path)
    do_import(reg)
    r = load_record("2025-09-23_MuonCustomSizing", reg / "records")
    folder = SAMPLE / "records/track_1_short/2025-09-23_MuonCustomSizing"
    for log in r.logs:
        facts = read_log_facts(folder / log.file)
        assert (log.sha256, log.program_sha256, log.fingerprint) == (facts.sha256, facts.program_sha256,
                                                                     facts.fingerprint)
        assert log.fingerprint.startswith("ast1-") and log.val_loss == facts.val_loss
    assert r.upstream.commit == COMMIT and r.upstream.folder == "records/track_1_short/2025-09-23_MuonCustomSizing"
    assert r.hardware.gpu_count == 8 and r.hardware.gpu_model == "NVIDIA H100 80GB HBM3"
    assert r.software.torch == "2.9.0.dev20250726+cu126" and r.software.python == "3.10.12"
    assert r.imported.claimed_time_s == pytest.approx(149.7) and r.imported.row == "36"
    assert r.imported.environment_family == "torch-2.9-nightly"
    assert r.environment == "record-2025-09"  # the exact nightly's environment
    assert r.published.losses == (3.2792, 3.2792, 3.2801, 3.2799)
    # the previous row (DropAttn) is not in the sample: named all the same (the table says it), judged once held
    assert r.parent == "2025-09-21_DropAttn"


def test_old_logs_parse_what_they_have(tmp_path):
    reg = registry(tmp_path)
    do_import(reg)
    adamw = load_record("2024-06-06_AdamW", reg / "records")
    (log,) = adamw.logs
    assert log.val_loss == pytest.approx(3.275959) and log.train_time_ms is None
    assert {"program", "pytorch version", "train time", "nvidia-smi table"} <= set(log.missing)
    assert adamw.imported.mean_time_source == "claimed" and adamw.published.mean_time_s == 1884.0
    assert adamw.rules.compare_hardware == () and adamw.environment  # no GPU pinned to compare; still an env
    muon = load_record("2024-10-10_Muon", reg / "records")
    (log,) = muon.logs
    assert log.fingerprint.startswith("ast1-") and log.program_sha256  # SEP program SEP header layout
    assert muon.software.torch == "2.4.1+cu121" and "python version" in log.missing
    assert muon.parent == ""  # its previous row is not in the sample either


def test_second_import_changes_nothing(tmp_path):
    reg = registry(tmp_path)
    do_import(reg)
    before = {p.name: p.read_bytes() for p in (reg / "records").glob("*.yaml")}
    again = do_import(reg)
    assert again["written"] == [] and sorted(again["unchanged"]) == IMPORTED
    assert {p.name: p.read_bytes() for p in (reg / "records").glob("*.yaml")} == before


def test_hand_written_fields_and_comments_are_kept(tmp_path):
    reg = registry(tmp_path, with_hand_written=True)
    original = (reg / "records" / "2025-09-23_MuonCustomSizing.yaml").read_text()
    result = do_import(reg)
    # the trimmed fixture programs are not the record's: their fingerprint is regenerated with the logs, and so is
    # the shard count derived from them (dataset.derived); the author's dataset.train_shards stays
    assert set(result["changes"]["2025-09-23_MuonCustomSizing"]) == {"logs", "imported", "program.fingerprint",
                                                                      "dataset.derived"}
    text = (reg / "records" / "2025-09-23_MuonCustomSizing.yaml").read_text()
    rules_block = original[original.index("rules:"):]
    assert rules_block in text  # the author's rules, comments and layout, byte for byte
    r = load_record_file(reg / "records" / "2025-09-23_MuonCustomSizing.yaml")
    assert r.upstream.commit == "7d7952d2fb63307d54541e37dddd22d1a924b34a"  # the author's pin stays
    assert r.rules.loss_evidence == "parent" and r.published.ml_validation == "parent"
    assert r.dataset.train_shards == 9 == r.dataset.shards_to_fetch and r.dataset.derived is not None
    assert {log.fingerprint for log in r.logs} == {r.program.fingerprint}
    # an author edits a generated manifest: the next import keeps the edit and reports nothing changed
    path = reg / "records" / "2024-10-10_Muon.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["rules"]["loss_evidence"] = "parent"
    doc["parent"] = "2024-06-06_AdamW"  # the previous row (#3) links no log: the import derives no parent
    doc["notes"] = "checked by hand"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    # an edit the manifest does not mark is derived again (a stale parent from an earlier import, say) ...
    again = do_import(reg)
    assert again["changes"]["2024-10-10_Muon"] == ["parent", "rules.loss_evidence"]
    assert "2024-10-10_Muon" not in again["kept_edits"]
    refreshed = load_record_file(path)
    assert refreshed.rules.loss_evidence == "single-run" and refreshed.parent == ""
    assert refreshed.notes == "checked by hand"  # nothing derives notes: kept
    # ... and one marked `edited:` is kept, and the summary lists it
    doc = yaml.safe_load(path.read_text())
    doc["rules"]["loss_evidence"] = "parent"
    doc["edited"] = ["rules"]
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    again = do_import(reg)
    assert "2024-10-10_Muon" in again["unchanged"] and again["kept_edits"]["2024-10-10_Muon"] == ["rules"]
    assert load_record_file(path).rules.loss_evidence == "parent"
    code, out = run("--registry", str(reg), "records", "import", str(SAMPLE), "--commit", COMMIT)
    assert "kept edit: 2024-10-10_Muon: rules" in out


def _edge_clone(tmp_path: Path) -> Path:
    clone = tmp_path / "clone"
    track = clone / "records" / "track_1_short"
    ok = SAMPLE / "records/track_1_short/2025-09-23_MuonCustomSizing"
    logs = sorted(ok.glob("*.txt"))
    # a row whose linked log is missing, but a log lies beside it
    (track / "2025-01-01_MissingLog").mkdir(parents=True)
    shutil.copy(logs[0], track / "2025-01-01_MissingLog" / "present.txt")
    # a log without a program (starts at the header), and a binary file that is no log at all
    (track / "2025-01-02_NoProgram").mkdir()
    raw = logs[1].read_bytes()
    (track / "2025-01-02_NoProgram" / "tail.txt").write_bytes(raw[raw.index(b"=" * 100):])
    (track / "2025-01-02_NoProgram" / "garbage.txt").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "secret.txt").write_text("not a log of this clone")
    (track / "2025-01-02_NoProgram" / "link.txt").symlink_to(tmp_path / "secret.txt")
    # a folder with several subfolders: the linked one is used, the others are skipped
    for sub in ("this_pr", "baseline", "ablation"):
        (track / "2025-01-03_Subfolders" / sub).mkdir(parents=True)
        shutil.copy(logs[2], track / "2025-01-03_Subfolders" / sub / f"{sub}.txt")
    t = "records/track_1_short"
    rows = [
        f"1 | 3.0 minutes | [Missing log](https://x) | 01/01/25 | [log]({t}/2025-01-01_MissingLog/gone.txt) | @a",
        f"2 | 2.9 minutes | No program | 01/02/25 | [log]({t}/2025-01-02_NoProgram/tail.txt) | @b",
        "3 | 2.8 minutes | No link at all | 01/03/25 | none | @c",
        f"4 | 2.7 minutes | Subfolders | 01/03/25 | [log]({t}/2025-01-03_Subfolders/this_pr/this_pr.txt),[PR](x) | @d",
        "6 | 2.5 minutes | Escapes | 01/05/25 | [log](records/track_1_short/../../../etc/passwd) | @f",
        f"7 | 2.4 minutes | Escapes too | 01/06/25 | [log]({t}/2025-01-03_Subfolders/../../x.txt) | @g",
        f"5 | 2.6 minutes | Not in this clone | 01/04/25 | [log]({t}/2025-01-04_Absent/a.txt) | @e",
    ]
    (clone / "README.md").write_text("# x\n\n| # | Record time | Description | Date | Log | Contributors |\n"
                                     "| - | - | - | - | - | - |\n" + "\n".join(rows) + "\n\n## Rules\n")
    return clone


def test_edge_cases_warn_and_never_crash(tmp_path):
    reg = registry(tmp_path)
    result = do_import(reg, _edge_clone(tmp_path))
    assert sorted(result["written"]) == ["2025-01-01_MissingLog", "2025-01-02_NoProgram", "2025-01-03_Subfolders"]
    warnings = "\n".join(result["warnings"])
    assert "the table links gone.txt, which is not in the folder: the logs beside it are taken" in warnings
    skipped = "\n".join(result["skipped_rows"])
    assert "row 3 " in skipped and "no log link" in skipped and "2025-01-04_Absent" in skipped
    assert "row 6 " in skipped and "row 7 " in skipped  # links that climb out of their record folder
    no_program = load_record("2025-01-02_NoProgram", reg / "records")
    out = {x["file"]: x["reason"] for x in no_program.imported.left_out}
    assert out == {"garbage.txt": "incomplete", "link.txt": "symlink"}  # the link is never followed
    subfolders = load_record("2025-01-03_Subfolders", reg / "records")
    assert {x["file"]: x["reason"] for x in subfolders.imported.left_out} == {
        "baseline/baseline.txt": "baseline", "ablation/ablation.txt": "other-experiment"}
    tail = next(log for log in no_program.logs if log.file == "tail.txt")
    assert tail.program_sha256 == "" and "program" in tail.missing and tail.val_loss is not None
    # parents follow the table: row 2's parent is row 1, row 4's previous row has no link
    assert no_program.parent == "2025-01-01_MissingLog"
    assert load_record("2025-01-03_Subfolders", reg / "records").parent == ""


def test_commit_comes_from_git_or_must_be_given(tmp_path):
    reg = registry(tmp_path)
    with pytest.raises(InputError, match="not the root of a git clone") as caught:
        import_records(SAMPLE, reg / "records")  # a folder inside this checkout's repository: not upstream's
    assert caught.value.exit_code == 3 and "--commit" in caught.value.fix
    clone = tmp_path / "git-clone"
    shutil.copytree(SAMPLE, clone)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "sample"]):
        subprocess.run(["git", "-C", str(clone), *cmd], check=True, env=env)
    head = subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    code, out = run("--registry", str(reg), "records", "import", str(clone), "--json")
    assert code == 0, out
    assert json.loads(out)["commit"] == head
    assert load_record("2024-10-10_Muon", reg / "records").upstream.commit == head


@pytest.mark.parametrize("name", SAMPLE_RECORDS)
def test_committed_manifests_cover_the_sample(name):
    """The 21 manifests imported from the full sample (both tracks): each loads, pins its logs, names an environment."""
    r = load_record(name, ROOT / "manifests" / "records")
    assert r.imported is not None and r.imported.commit == COMMIT
    assert r.logs and all(len(log.sha256) == 64 for log in r.logs)
    assert r.environment, f"{name} names no environment"
    code, out = run("--registry", str(ROOT / "manifests"), "records", "show", name)
    assert code == 0 and f"environment {r.environment}" in out and "    will use " in out
    assert "will use nothing" not in out


def test_sample_fixture_logs_match_the_committed_manifests():
    """Trimmed fixture logs keep their final lines: their losses and times are the committed manifests'."""
    for name in IMPORTED:
        r = load_record(name, ROOT / "manifests" / "records")
        folder = SAMPLE / r.upstream.folder if name != "2025-09-23_MuonCustomSizing" else \
            SAMPLE / "records/track_1_short/2025-09-23_MuonCustomSizing"
        pinned = {log.file: (log.val_loss, log.train_time_ms) for log in r.logs}
        for path in sorted(folder.glob("*.*")):
            facts = read_log_facts(path)
            assert pinned[path.name] == (facts.val_loss, facts.train_time_ms), path.name


def test_list_and_plot_show_the_history(tmp_path):
    code, out = run("--registry", str(ROOT / "manifests"), "records", "list", "--json")
    assert code == 0
    rows = {row["name"]: row for row in json.loads(out)}
    assert set(SAMPLE_RECORDS) <= set(rows)
    muon = rows["2025-09-23_MuonCustomSizing"]
    assert muon["claimed_time_s"] == pytest.approx(149.7) and muon["mean_time_s"] == pytest.approx(149.69, abs=0.01)
    # its nightly left PyTorch's index long ago and no wheelhouse is given: the stable stand-in, declared
    assert muon["environment"] == "record-2025-09" and muon["environment_match"] == "stable-stand-in"
    assert muon["environment_will_use"] != "record-2025-09" and not muon["environment_pinned"]
    assert muon["data_pinned"]
    assert rows["2024-10-10_Muon"]["environment_match"] == "exact"  # pypi-torch-2.4 pins its 2.4.1+cu121
    # with a wheelhouse holding the nightly named by the lock, the record's own environment is used
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    (wheelhouse / "torch-2.9.0.dev20250726+cu126-cp310-cp310-manylinux_2_28_x86_64.whl").write_bytes(b"wheel")
    code, out = run("--registry", str(ROOT / "manifests"), "records", "list", "--json", "--wheelhouse",
                    str(wheelhouse))
    muon = {row["name"]: row for row in json.loads(out)}["2025-09-23_MuonCustomSizing"]
    assert muon["environment_will_use"] == "record-2025-09" and muon["environment_match"] == "exact"
    assert rows["demo-cpu-synth"]["environment_will_use"] == "host"
    assert rows["2024-10-10_Muon"]["data_pinned"] is True  # its shard count is derived from its program
    code, out = run("--registry", str(ROOT / "manifests"), "records", "plot", "--out", str(tmp_path / "report"))
    assert code == 0, out
    png = (tmp_path / "report" / "records_time.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000


def test_a_multi_file_program_has_one_fingerprint():
    """2026 logs append the program's other files under dividers: each file is fingerprinted, then combined."""
    from pipeline.records.identity import program_fingerprint

    line = b"-" * 40
    divider = b"\n\n" + line + b"\n# triton_kernels.py\n" + line + b"\n\n"  # as the 2026 programs write it
    main, kernels = b"import os\nx = 1  # main\n", b"def k(a):\n    return a + 1\n"
    fp = program_fingerprint(main + divider + kernels)
    assert fp.startswith("ast1-")
    assert program_fingerprint(main.replace(b"# main", b"# other comment") + divider + kernels) == fp
    assert program_fingerprint(main + divider + kernels.replace(b"a + 1", b"a + 2")) != fp
    with pytest.raises(SyntaxError):
        program_fingerprint(main + divider + b"def broken(:\n")


def test_environment_choice_rules():
    """Exact while the build can be had; else the nearest stable, declared; no version: the date's release."""
    from datetime import date

    from pipeline.records.environment_choice import EnvironmentPin, environment_by_rule

    envs = [EnvironmentPin(name="nightly-0726", torch="2.9.0.dev20250726+cu126", record="", locked=True,
                           torch_file="torch-n.whl", torch_sha256="ab" * 32),
            EnvironmentPin(name="stable-2.8", torch="2.8.0+cu126", record="", locked=True),
            EnvironmentPin(name="stable-2.10", torch="2.10.0+cu128", record="", locked=True),
            EnvironmentPin(name="stable-2.4", torch="2.4.1+cu121", record="", locked=False)]
    fresh = environment_by_rule("2.9.0.dev20250726+cu126", "r", "2025-07-26", envs, today=date(2025, 8, 1))
    assert (fresh.environment, fresh.kind, fresh.deviation) == ("nightly-0726", "exact", None)
    gone = environment_by_rule("2.9.0.dev20250726+cu126", "r", "2025-07-26", envs, today=date(2026, 1, 1))
    assert gone.kind == "stable-stand-in" and gone.environment == "stable-2.10"  # a 2.9 nightly became 2.9: tie, newer
    assert "left PyTorch's index" in gone.reason and gone.deviation.data["torch"] == "2.10.0+cu128"
    assert environment_by_rule("2.4.1+cu121", "r", "2024-10-10", envs, today=date(2030, 1, 1)).kind == "exact"
    near = environment_by_rule("2.5.1+cu124", "r", "2024-11-01", envs)
    assert near.environment == "stable-2.4" and near.family == "torch-2.5-stable"
    unknown = environment_by_rule("", "r", "2024-06-06", envs)
    assert unknown.environment == "stable-2.4" and "2.3, the stable release current on 2024-06-06" in unknown.reason
    assert environment_by_rule("", "r", "2020-01-01", envs).kind == "none"
    assert environment_by_rule("2.9.0+cu126", "r", "2025-10-20", []).kind == "none"


def test_renamed_folders_are_found_by_the_linked_file_and_cells_keep_their_places(tmp_path):
    """Upstream renamed track 2's `2025-08-28_NewValemb/` to `2025-08-28_Medium_NewValemb/` after its table
    linked it: the folder holding the linked file's name is the record's."""
    clone = tmp_path / "clone"
    track = clone / "records" / "track_1_short"
    log = sorted((SAMPLE / "records/track_1_short/2025-09-23_MuonCustomSizing").glob("*.txt"))[0]
    (track / "2025-01-03_Renamed_Later").mkdir(parents=True)
    shutil.copy(log, track / "2025-01-03_Renamed_Later" / log.name)
    (track / "2025-01-04_NextRecord").mkdir(parents=True)  # carries its parent's log: not a rename of row 1's
    shutil.copy(log, track / "2025-01-04_NextRecord" / log.name)
    rows = [f"1 | 3.0 minutes | Renamed | 01/03/25 | [log](records/track_1_short/2025-01-03_Renamed/{log.name}) | @a",
            "2 | 2.9 minutes | No link | 01/04/25 | none | @b"]
    (clone / "README.md").write_text("# x\n\n| # | Record time | Description | Date | Log | Contributors |\n"
                                     "| - | - | - | - | - | - |\n" + "\n".join(rows) + "\n")
    result = do_import(registry(tmp_path), clone)
    assert result["written"] == ["2025-01-03_Renamed_Later"]
    assert result["skipped_rows"] == ["row 2 (dated 2025-01-04, claimed 2.9 minutes, 'No link'): no log link in "
                                      "the table"]


PARENT_LOG = sorted((SAMPLE / "records/track_1_short/2025-09-23_MuonCustomSizing").glob("*.txt"))[0]
CHILD_LOGS = sorted((SAMPLE / "records/track_1_short/2026-01-18_UnifiedOptimizers").glob("unified-optimizer/*.txt"))


def parent_and_child(tmp_path: Path, linked: str) -> tuple[Path, Path]:
    """An upstream clone of two rows: 2025-01-01_Parent (one run of the parent's program, run.txt) and
    2025-01-02_Child, an empty folder whose table link is `linked`. Returns (clone, the child's folder)."""
    clone = tmp_path / "clone"
    parent = clone / "records" / "track_1_short" / "2025-01-01_Parent"
    parent.mkdir(parents=True)
    shutil.copy(PARENT_LOG, parent / "run.txt")
    child = parent.parent / "2025-01-02_Child"
    child.mkdir()
    t = "records/track_1_short"
    rows = [f"1 | 3.0 minutes | Parent | 01/01/25 | [log]({t}/2025-01-01_Parent/run.txt) | @a",
            f"2 | 2.9 minutes | Child | 01/02/25 | [log]({t}/2025-01-02_Child/{linked}) | @b"]
    (clone / "README.md").write_text("# x\n\n| # | Record time | Description | Date | Log | Contributors |\n"
                                     "| - | - | - | - | - | - |\n" + "\n".join(rows) + "\n")
    return clone, child


def test_runs_of_the_previous_record_s_program_are_left_out_when_the_readme_reports_them(tmp_path):
    clone, child = parent_and_child(tmp_path, linked="mine.txt")
    shutil.copy(CHILD_LOGS[0], child / "mine.txt")
    shutil.copy(PARENT_LOG, child / "0a1b2c.txt")  # the previous record re-timed beside the new one
    (child / "README.md").write_text("My runs.\n\nPrevious record (timed on same machine):\n\ntimes = [1.0]\n")
    reg = registry(tmp_path)
    result = do_import(reg, clone)
    assert result["written"] == ["2025-01-01_Parent", "2025-01-02_Child"], result
    r = load_record("2025-01-02_Child", reg / "records")
    assert [log.file for log in r.logs] == ["mine.txt"]
    assert [(x["file"], x["reason"]) for x in r.imported.left_out] == [("0a1b2c.txt", "previous-record")]


def test_runs_of_the_previous_record_s_program_are_named_so_without_a_readme(tmp_path):
    """2025-09-05_SkipMLPBlocks has no README; its `comparison_*.txt` run the previous record's program (its step
    count too) beside its own: runs of the earlier code, not "another version or an ablation". A log that runs
    the parent's program where the linked log runs another is the earlier code, whatever the README says."""
    clone, child = parent_and_child(tmp_path, linked="mine.txt")
    shutil.copy(CHILD_LOGS[0], child / "mine.txt")
    shutil.copy(PARENT_LOG, child / "comparison_0a1b2c.txt")
    reg = registry(tmp_path)
    do_import(reg, clone)
    r = load_record("2025-01-02_Child", reg / "records")
    assert [log.file for log in r.logs] == ["mine.txt"]
    assert [(x["file"], x["reason"]) for x in r.imported.left_out] == [("comparison_0a1b2c.txt", "previous-record")]
    # the linked log's own program is never the earlier code, even when the parent ran it (a re-timing)
    shutil.copy(PARENT_LOG, child / "mine.txt")
    (child / "comparison_0a1b2c.txt").unlink()
    reg2 = registry(tmp_path / "again")
    do_import(reg2, clone)
    assert [log.file for log in load_record("2025-01-02_Child", reg2 / "records").logs] == ["mine.txt"]


def test_a_linked_log_of_the_previous_record_s_program_is_flagged_and_the_others_are_the_runs(tmp_path):
    """Track 1's row 48 links 2025-12-11_NorMuonOptimsAndFixes/82edf6be….txt, one of the four "Baseline" runs of the
    prior record's program its README reports beside its own 10 ("Mine + PreMul-O"): the record's runs are those
    10, judged by their own step count, and the editor is told the table's link is not one of them."""
    clone, child = parent_and_child(tmp_path, linked="82edf6be.txt")
    shutil.copy(PARENT_LOG, child / "82edf6be.txt")  # the link: a baseline run of the prior record's program
    for i, log in enumerate(CHILD_LOGS[:2]):
        shutil.copy(log, child / f"mine-{i}.txt")
    (child / "README.md").write_text("The first row is the prior record, the second is my changes.\n\n"
                                     "Baseline:\n  losses = [3.2796]\n\nMine:\n  losses = [3.2758]\n")
    reg = registry(tmp_path)
    result = do_import(reg, clone)
    r = load_record("2025-01-02_Child", reg / "records")
    assert [log.file for log in r.logs] == ["mine-0.txt", "mine-1.txt"]
    assert [(x["file"], x["reason"]) for x in r.imported.left_out] == [("82edf6be.txt", "previous-record")]
    assert any("the table links 82edf6be.txt, which is not one of the record's runs" in f
               for f in result["flags"]["2025-01-02_Child"]), result["flags"]


def test_the_parent_is_the_record_before_rows_without_a_log_that_change_the_systems(tmp_path):
    """Track 1's row 66 "Torch 2.10" and track 2's row 11 (a torch upgrade) have no log: the next record stands on
    the ML of the record before them. A row without a log that changed the ML leaves the parent empty."""
    clone = tmp_path / "clone"
    track = clone / "records" / "track_1_short"
    log = sorted((SAMPLE / "records/track_1_short/2025-09-23_MuonCustomSizing").glob("*.txt"))[0]
    for folder in ("2026-01-30_VeFused", "2026-01-24_ImprovedLMHead", "2026-02-02_Later"):
        (track / folder).mkdir(parents=True)
        shutil.copy(log, track / folder / f"{folder[-4:]}.txt")
    t = "records/track_1_short"
    rows = [f"65 | 1.613 minutes | Group Value Embeds | 01/30/26 | [log]({t}/2026-01-30_VeFused/Fused.txt) | @a",
            "66 | 1.595 minutes | Torch 2.10 | 01/31/26 | - | -",
            f"67 | 1.540 minutes | Tune kernels | 01/31/26 | [log]({t}/2026-01-24_ImprovedLMHead/Head.txt) | @b",
            "68 | 1.530 minutes | Introduced the Muon optimizer | 02/01/26 | none | @c",
            f"69 | 1.520 minutes | Later | 02/02/26 | [log]({t}/2026-02-02_Later/ater.txt) | @d"]
    (clone / "README.md").write_text("# x\n\n| # | Record time | Description | Date | Log | Contributors |\n"
                                     "| - | - | - | - | - | - |\n" + "\n".join(rows) + "\n")
    reg = registry(tmp_path)
    result = do_import(reg, clone)
    assert load_record("2026-01-24_ImprovedLMHead", reg / "records").parent == "2026-01-30_VeFused"
    assert load_record("2026-02-02_Later", reg / "records").parent == ""
    assert any("#66 ('Torch 2.10')" in w and "its parent is 2026-01-30_VeFused" in w for w in result["warnings"])
    assert any("2026-02-02_Later: the previous row (#68) has no log" in w for w in result["warnings"])
