"""The registry the CLI builds once from --registry / --root: every command reads the same records and the
same default record."""

import shutil
import subprocess
import sys

from tests.paths import REPO_ROOT

DEMO_LOGS = sorted((REPO_ROOT / "manifests" / "records" / "demo-cpu-synth").glob("*.txt"))


def repro(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "pipeline", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or REPO_ROOT, timeout=300)


def registry_with_a_renamed_demo(tmp_path):
    """A registry holding one record the shipped registry does not have: demo-elsewhere."""
    folder = tmp_path / "registry"
    shutil.copytree(REPO_ROOT / "manifests", folder)
    text = (folder / "records" / "demo-cpu-synth.yaml").read_text()
    renamed = text.replace("name: demo-cpu-synth", "name: demo-elsewhere")
    (folder / "records" / "demo-elsewhere.yaml").write_text(renamed)
    return folder


def test_report_reads_the_record_from_the_given_registry(tmp_path):
    registry = registry_with_a_renamed_demo(tmp_path)
    common = ("--root", tmp_path, "--registry", registry)
    verified = repro(*common, "verify", "--record", "demo-elsewhere", *DEMO_LOGS)
    assert "record demo-elsewhere" in verified.stdout, verified.stdout + verified.stderr
    reported = repro(*common, "report", "--record", "demo-elsewhere", "--out", tmp_path / "report", *DEMO_LOGS)
    assert reported.returncode == 0, reported.stdout + reported.stderr
    assert (tmp_path / "report" / "report.md").is_file()
    assert "demo-elsewhere" in (tmp_path / "report" / "report.md").read_text()


def test_env_build_without_env_takes_the_default_records_environment(tmp_path):
    """Not the last record name in sort order (demo-cpu-synth, whose environment `host` is no image)."""
    built = repro("--root", tmp_path, "env", "build", "--wheelhouse", tmp_path / "absent")
    said = built.stdout + built.stderr
    assert "unknown environment" not in said and "Traceback" not in said, said
    assert built.returncode == 3 and ("record-2025-09" in said or f"wheelhouse {tmp_path / 'absent'}" in said), said


def test_the_registry_serves_records_environments_and_the_one_default(tmp_path):
    from pipeline.registry import Registry
    from pipeline.workspace import Workspace

    registry = Registry(Workspace.resolve(root=tmp_path, registry=registry_with_a_renamed_demo(tmp_path)))
    assert registry.default_record().name == Registry.DEFAULT_RECORD == registry.record_or_default(None).name
    assert registry.record_or_default("demo-elsewhere").path.parent == registry.records_dir
    assert "demo-elsewhere" in registry.record_names() and registry.record_names()[-1] == "demo-elsewhere"
    assert registry.default_environment().name == "record-2025-09"
    assert registry.environment("pypi-torch-2.8").dockerfile_path.is_file()

