"""Shared test fixtures: where ../shared is, and whether a Docker engine or CUDA is here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.paths import REPO_ROOT

SHARED = REPO_ROOT.parent / "shared"
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
