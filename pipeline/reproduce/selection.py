"""Which runs count: run directories of the configuration asked for that succeeded with a complete log.

    wanted = RunSelection.wanted(req)                 # what this `reproduce` asks for
    RunSelection.of_run(meta) == wanted               # a run of that configuration
    judged_and_attempts(runs, wanted, runs_wanted)    # what the verdict judges, what stays an attempt

One dataclass is both sides of the comparison, so a field cannot be added to one side and not the other.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import InputError
from pipeline.records.logparse import parse_log
from pipeline.runs.rundir import RunMeta, read_status


@dataclass(frozen=True, kw_only=True)
class RunSelection:
    """What makes two runs comparable: trainer, runtime, native preset, overrides and steps, the smoke cut,
    and for the native trainer its code (train/'s digest: an edited trainer is another program). The record
    trainer's program is checked against the record's pins by the verdict itself."""

    trainer: str
    runtime: str
    preset: str | None  # native only
    overrides: tuple[str, ...]
    steps: int | None  # native only
    smoke_cut: tuple | None  # the declared patch's (name, sha256), or (name, its parameters) for a cut found in
    #                          the program's syntax tree (pipeline/records/smoke_cut.py)
    native_program: str | None  # native only: train/'s sha256

    @classmethod
    def of_run(cls, meta: RunMeta | None) -> RunSelection | None:
        if meta is None:
            return None
        native = meta.trainer == "native"
        patch = meta.program_patch
        return cls(trainer=meta.trainer, runtime=meta.runtime, preset=(meta.preset or "record") if native else None,
                   overrides=tuple(meta.overrides),
                   steps=meta.steps if native else None, smoke_cut=_cut_of_patch(patch),
                   native_program=meta.program_sha256 if native else None)

    @classmethod
    def wanted(cls, req) -> RunSelection:
        """The configuration a ReproduceRequest asks for, as its runs will record it."""
        from pipeline.runs.train_plan import effective_native_settings

        native = req.trainer == "native"
        overrides, steps = effective_native_settings(req.overrides, None, req.smoke_steps, req.smoke_val_tokens) \
            if native else (req.overrides, None)
        return cls(trainer=req.trainer, runtime=req.runtime, preset=(req.preset or "record") if native else None,
                   overrides=tuple(overrides),
                   steps=steps if native else None,
                   smoke_cut=_smoke_cut(req.smoke_steps, req.smoke_val_tokens, req.trainer),
                   native_program=_native_program_sha256() if native else None)


@functools.cache
def _native_program_sha256() -> str:
    from pipeline.runs.train_plan import native_program

    return native_program().sha256


def _cut_of_patch(patch: dict | None) -> tuple | None:
    if patch and isinstance(patch.get("parameters"), dict):  # a cut found in the program: its parameters say it
        # a cut declared before the extension was kept (2026-12-02) kept none of it
        return (patch.get("name"), tuple(sorted({"extension": 0, **patch["parameters"]}.items())))
    return (patch.get("name"), patch.get("sha256")) if patch else None


@functools.cache
def _smoke_cut(steps: int | None, val_tokens: int | None, trainer: str) -> tuple | None:
    if steps is None:
        return None
    if trainer == "record":  # the cut depends on the program; runs with the same parameters share it
        from pipeline.records.smoke_cut import SMOKE_EXTENSION

        cut = {"steps": steps, "val_tokens": val_tokens, "extension": SMOKE_EXTENSION}
        return ("smoke", tuple(sorted(cut.items())))
    from pipeline.runs.train_plan import smoke_patch_for

    patch = smoke_patch_for(trainer, steps, val_tokens)
    return (patch.name, patch.sha256)


def run_meta(run: Path) -> RunMeta | None:
    try:
        return RunMeta.load_if_present(run)
    except InputError:
        return None


def complete(run: Path) -> bool:
    """Status succeeded and a log that reached the final validation."""
    return (read_status(run) == "succeeded" and (run / "log.txt").is_file()
            and parse_log(run / "log.txt").completed)


def existing_runs(folder: Path) -> list[Path]:
    return sorted((p for p in folder.iterdir() if p.is_dir() and (p / "status").is_file()),
                  key=lambda p: p.name) if folder.is_dir() else []


def counts(run: Path, wanted: RunSelection) -> bool:
    """A run that counts: complete, and of the configuration asked for."""
    return RunSelection.of_run(run_meta(run)) == wanted and complete(run)


def judged_and_attempts(runs: list[Path], wanted: RunSelection, runs_wanted: int) -> tuple[list[Path], list[Path]]:
    """With enough good runs the verdict is on them and every run that failed is an attempt; otherwise the
    verdict is on every run of this configuration, so that a crash is judged. Succeeded runs of another
    configuration (an earlier --set) are neither. A run someone stopped (Ctrl-C, SIGTERM: `aborted`) is never
    judged: it says nothing of the program, and two good runs then one stopped would have judged all three."""
    good = [r for r in runs if counts(r, wanted)]
    failed = [r for r in runs if not complete(r)]
    if len(good) >= runs_wanted:
        return good, failed
    same = [r for r in runs if RunSelection.of_run(run_meta(r)) == wanted and read_status(r) != "aborted"]
    return same, [r for r in failed if r not in same]
