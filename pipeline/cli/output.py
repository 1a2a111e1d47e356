"""Printing helpers shared by the click commands."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from pathlib import Path

import click

from pipeline.plain_text import escaped_controls, plain
from pipeline.registry import Registry

# The `repro` group builds one Registry (records, environments, the default record) over one Workspace
# (pipeline/workspace.py); commands take either, never resolving their own.
pass_registry = click.make_pass_decorator(Registry)


def pass_workspace(command):
    @click.pass_context
    def with_workspace(ctx, *args, **kwargs):
        return ctx.invoke(command, ctx.find_object(Registry).workspace, *args, **kwargs)

    return functools.update_wrapper(with_workspace, command)


def _default(obj):
    if dataclasses.is_dataclass(obj):
        return dataclasses.asdict(obj)
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, bytes):
        return None  # raw bytes (a program text) never go into JSON output
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def _finite(obj):
    """`obj` as plain data with every NaN or infinity as None: JSON has no NaN (`--json` printed `NaN`)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = dataclasses.asdict(obj)
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def to_json(obj) -> str:
    """Valid JSON (no NaN), with no raw control or format character (a U+202E is written as \\u202e)."""
    return escaped_controls(json.dumps(_finite(obj), indent=2, sort_keys=False, default=_default,
                                       ensure_ascii=False, allow_nan=False))


def emit_json(obj) -> None:
    click.echo(to_json(obj))


def echo(text: object = "", **kwargs) -> None:
    """click.echo for every human-readable line: a line may quote a file name, a log's header or a bundle's
    member, so escape sequences and control characters are removed before a terminal sees them (a log's OSC
    sequence set the window title). Newlines and tabs stay: a name that must stay on one line is escaped where it
    is read (pipeline/bundle/members.py)."""
    click.echo(plain(str(text), lines=True), **kwargs)


def secho(text: object = "", **styles) -> None:
    """click.secho, its text made safe as `echo`'s; the colours are added after."""
    click.secho(plain(str(text), lines=True), **styles)
