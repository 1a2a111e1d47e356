"""Shared test fixtures: where ../shared is, and whether a Docker engine or CUDA is here."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import pytest

from tests.paths import REPO_ROOT

SHARED = REPO_ROOT.parent / "shared"


def _inductor_cache_for_this_code() -> None:
    """Inductor's caches in a folder named after train/'s source, unless the caller chose one. Its FX graph cache
    key does not cover a custom op's schema: on 2026-12-05 a cache left by an older checkout replayed code that
    called relu2_grad with an argument the op no longer had, and the compile tests failed on a correct tree."""
    if "TORCHINDUCTOR_CACHE_DIR" in os.environ:
        return
    digest = hashlib.sha256()
    for path in sorted((REPO_ROOT / "train").glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = f"{tempfile.gettempdir()}/repro-tests-inductor-{digest.hexdigest()[:16]}"


_inductor_cache_for_this_code()
RECORD_LOGS = SHARED / "fixtures" / "record-logs" / "2025-09-23_MuonCustomSizing"


def shared_path(*parts: str) -> Path:
    """A path under ../shared, or skip the test with the reason when it is not there."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent: these tests read the project's shared reference folder beside the repo")
    return path


@pytest.fixture
def record_logs() -> list[Path]:
    return sorted(shared_path("fixtures", "record-logs", "2025-09-23_MuonCustomSizing").glob("*.txt"))


def docker_client_or_skip():
    """A live docker client; in CI (REPRO_REQUIRE_DOCKER=1) a missing engine fails instead of skipping."""
    import docker

    try:
        client = docker.from_env()
        client.ping()
        return client
    except Exception as exc:  # the SDK raises several types for "no daemon"
        if os.environ.get("REPRO_REQUIRE_DOCKER") == "1":
            pytest.fail(f"no Docker engine although REPRO_REQUIRE_DOCKER=1: {exc}")
        pytest.skip(f"no Docker engine here ({exc}); `make docker-engine` starts one")


def cuda_or_skip():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    return torch
