"""The pinning policy on the real Dockerfile, on its test twin, and on Dockerfiles that break each rule."""

from __future__ import annotations

import subprocess
import sys

import pytest
from dockerfile_parse import DockerfileParser

from pipeline.env.dockerfile_policy import check_dockerfile
from tests.paths import REPO_ROOT

DOCKERFILE = REPO_ROOT / "docker" / "Dockerfile"
TEST_DOCKERFILE = REPO_ROOT / "docker" / "test.Dockerfile"
DIGEST = "sha256:" + "ab" * 32


def test_real_dockerfile_passes_the_policy():
    report = check_dockerfile(DOCKERFILE)
    assert report.ok, report.violations
    assert [b.split("@")[0] for b in report.base_images] == ["nvidia/cuda:12.8.1-devel-ubuntu22.04",
                                                             "nvidia/cuda:12.6.3-runtime-ubuntu22.04"]


def test_real_dockerfile_pins_what_the_record_ran():
    parser = DockerfileParser(path=str(DOCKERFILE))
    args = dict(i["value"].split("=", 1) for i in parser.structure if i["instruction"] == "ARG" and "=" in i["value"])
    assert args["FA3_COMMIT"] == "92207199ac70fa2a20c43f319862c7a8a8d452dd"
    assert args["FA3_CUTLASS_COMMIT"] == "dc4817921edda44a549197ff3a9dcf5df0636e7b"
    assert args["PYTHON_VERSION"] == "3.10.12"
    assert "12.8" in args["BUILDER_IMAGE"]  # FA3's setup downloads its own nvcc for any other toolkit
    stages = [i["value"].split()[-1] for i in parser.structure if i["instruction"] == "FROM"]
    assert stages == ["builder", "python", "install", "runtime"]


def _stages_from(path, first):
    lines = path.read_text().splitlines()
    return [line for line in lines[lines.index(first):] if not line.startswith("COPY --from=builder")]


def test_test_twin_shares_the_install_and_runtime_stages():
    # The tests build test.Dockerfile; that only proves the real one if the stages they share are the same text.
    first = "# ---- install: the lock into /opt/venv; wheels stay in this stage, only /export moves on"
    assert _stages_from(DOCKERFILE, first) == _stages_from(TEST_DOCKERFILE, first)


def test_the_pypi_dockerfile_passes_the_policy_and_shares_the_install_and_runtime_stages():
    # pypi.Dockerfile (the PyPI-locked environments, no FA3 build) installs and runs exactly as the record's does
    pypi = REPO_ROOT / "docker" / "pypi.Dockerfile"
    report = check_dockerfile(pypi)
    assert report.ok, report.violations
    first = "# ---- install: the lock into /opt/venv; wheels stay in this stage, only /export moves on"
    assert _stages_from(DOCKERFILE, first) == _stages_from(pypi, first)
    parser = DockerfileParser(path=str(pypi))
    assert [i["value"].split()[-1] for i in parser.structure if i["instruction"] == "FROM"] == [
        "python", "install", "runtime"]


def test_test_twin_needs_its_base_from_the_build():
    assert not check_dockerfile(TEST_DOCKERFILE).ok  # no default: only a build arg from the lock pins it
    assert check_dockerfile(TEST_DOCKERFILE, {"RUNTIME_IMAGE": DIGEST}).ok


@pytest.mark.parametrize("body, problem", [
    ("FROM debian:bookworm\n", "not pinned by digest"),
    ("FROM debian@sha256:abc\n", "not pinned by digest"),
    (f"FROM debian@{DIGEST}\nRUN pip install numpy==2.2.6\n", "--require-hashes"),
    (f"FROM debian@{DIGEST}\nRUN python3 -m pip download -r r.txt\n", "--require-hashes"),
    (f"FROM debian@{DIGEST}\nRUN pip wheel .\n", "pip wheel"),
    (f"FROM debian@{DIGEST}\nRUN apt-get update && apt-get install -y python3 curl=7.88.1-10\n", "python3"),
    (f"FROM debian@{DIGEST}\nRUN git clone https://example.org/x.git && cd x && git checkout main\n", "git clone"),
    (f"FROM debian@{DIGEST}\nRUN curl -LO https://example.org/tool.tgz && tar xf tool.tgz\n", "curl/wget"),
    (f"FROM debian@{DIGEST}\nADD https://example.org/tool.tgz /tmp/\n", "ADD of a URL"),
    ("ARG BASE\nFROM ${BASE}\n", "has no value"),
])
def test_each_rule_catches_its_violation(tmp_path, body, problem):
    path = tmp_path / "Dockerfile"
    path.write_text(body)
    report = check_dockerfile(path)
    assert not report.ok
    assert any(problem in v.problem for v in report.violations), report.violations
    assert all(v.fix and v.line >= 1 for v in report.violations)


@pytest.mark.parametrize("body", [
    f"FROM debian@{DIGEST} AS a\nFROM a AS b\nFROM scratch\n",
    f"FROM debian@{DIGEST}\nRUN pip install --no-deps --require-hashes -r r.txt\n",
    f"FROM debian@{DIGEST}\nRUN apt-get install -y python3=3.11.2-1+b1 git=1:2.39.5-0+deb12u2\n",
    f"FROM debian@{DIGEST}\nRUN sed -i 's#deb.debian.org#snapshot.debian.org/archive/debian/20250726T000000Z#' "
    "/etc/apt/sources.list && apt-get update && apt-get install -y python3\n",
    f"ARG SNAP=20250726T000000Z\nFROM debian@{DIGEST}\nRUN echo snapshot.ubuntu.com/ubuntu/${{SNAP}} > s\n"
    "RUN apt-get install -y python3\n",
    f"ARG C=92207199ac70fa2a20c43f319862c7a8a8d452dd\nFROM debian@{DIGEST}\n"
    "RUN git clone https://example.org/x.git && git -C x checkout --detach \"$C\"\n",
    f"FROM debian@{DIGEST}\nRUN curl -LO https://example.org/t.tgz && echo 'ab  t.tgz' | sha256sum -c\n",
    f"FROM {DIGEST}\n",
])
def test_pinned_forms_pass(tmp_path, body):
    path = tmp_path / "Dockerfile"
    path.write_text(body)
    report = check_dockerfile(path)
    assert report.ok, report.violations


def test_a_build_arg_overrides_a_pinned_default(tmp_path):
    path = tmp_path / "Dockerfile"
    path.write_text(f"ARG BASE=debian@{DIGEST}\nFROM ${{BASE}}\n")
    assert check_dockerfile(path).ok
    assert not check_dockerfile(path, {"BASE": "debian:latest"}).ok


def test_cli_exit_codes(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM debian:bookworm\nRUN pip install numpy\n")
    run = [sys.executable, "-m", "pipeline", "env", "check-dockerfile"]
    ok = subprocess.run(run, capture_output=True, text=True, cwd=REPO_ROOT)
    assert ok.returncode == 0 and "0 violation(s)" in ok.stdout
    proc = subprocess.run(run + [str(bad)], capture_output=True, text=True, cwd=REPO_ROOT)
    assert proc.returncode == 1
    assert f"{bad}:1: FROM" in proc.stdout and f"{bad}:2: RUN" in proc.stdout and "fix:" in proc.stdout
    missing = subprocess.run(run + [str(tmp_path / "nope")], capture_output=True, text=True, cwd=REPO_ROOT)
    assert missing.returncode == 3 and "no Dockerfile" in missing.stderr
