"""Timestamps as the tool writes them everywhere (run.yaml, bundles, campaigns): UTC, to the second, ISO 8601."""

from __future__ import annotations

from datetime import datetime, timezone


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
