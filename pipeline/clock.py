"""Timestamps as the tool writes them everywhere (run.yaml, bundles, campaigns, image labels): UTC, to the second,
ISO 8601."""

from __future__ import annotations

from datetime import datetime, timezone

STAMP = "%Y-%m-%dT%H:%M:%SZ"


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime(STAMP)


def utc_at(epoch: int) -> str:
    """The stamp of `epoch` seconds since 1970 (a commit's time, a run's end): a date fixed by the inputs."""
    return datetime.fromtimestamp(epoch, timezone.utc).strftime(STAMP)


def folder_stamp(now: datetime | None = None) -> str:
    """The same instant for a folder's name (a run id, a campaign): no colons, sorts by time."""
    return (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
