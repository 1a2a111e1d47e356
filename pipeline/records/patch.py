"""Declared patches to the record's program: the smoke cut (`repro reproduce --smoke STEPS`).

    patch = smoke_patch(steps=40, val_tokens=524_288)
    patched = patch.apply(program.text)            # refuses unless every change matches exactly once
    patch.sha256, patch.changes                    # the patch's identity and its list of changes

A smoke run executes the record's exact program with only its step count cut (and, where the data is
small, its validation token count): nothing else changes. Each change is one whole line of the
Hyperparameters block replaced by another, so the patch is a short, readable list that names every
difference. Its sha256 is over that list, so a run's identity reads "record program <sha> + smoke patch
<sha>", and the patched text's own sha256 follows from both.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from pipeline.errors import CheckFailed, InputError
from pipeline.hashing import sha256_bytes

RECORD_VAL_BATCH = 4 * 64 * 1024 * 8  # the record's val_batch_size
VAL_ALIGN = 8 * 128  # every world size (1, 2, 4, 8) and grad-accumulation split keeps whole 128-token blocks


@dataclass(frozen=True)
class LineChange:
    field: str  # the Hyperparameters field it changes
    pattern: str  # regex matching the one line to replace (anchored, whole line)
    replacement: str  # the new line
    why: str


@dataclass(frozen=True)
class ProgramPatch:
    name: str
    changes: tuple[LineChange, ...]

    @property
    def listing(self) -> list[dict]:
        return [{"field": c.field, "line": c.replacement, "why": c.why} for c in self.changes]

    @property
    def sha256(self) -> str:
        return sha256_bytes(json.dumps({"name": self.name, "changes": self.listing}, sort_keys=True).encode())

    def apply(self, program: bytes) -> bytes:
        text = program.decode("utf-8")
        for change in self.changes:
            regex = re.compile(change.pattern, re.MULTILINE)
            hits = regex.findall(text)
            if len(hits) != 1:
                raise CheckFailed(f"the {self.name} patch expects one line setting {change.field} in the program, "
                                  f"found {len(hits)}",
                                  "this program's Hyperparameters differ from the record's; run it without --smoke")
            text = regex.sub(lambda _, new=change.replacement: new, text)
        return text.encode("utf-8")


def _field_line(field: str) -> str:
    """The record's whole line `    <field>[: int] = <expression> # comment` (one field per line)."""
    return rf"^[ \t]+{field}(\s*:\s*int)?\s*=[^\n]*$"


def smoke_patch(steps: int, val_tokens: int | None = None) -> ProgramPatch:
    """Cut the record's schedule to `steps` (no extension); optionally validate on fewer tokens."""
    if steps < 2:
        raise InputError(f"--smoke {steps}: a smoke run needs at least 2 steps", "give --smoke 20 or more")
    changes = [
        LineChange("num_iterations", _field_line("num_iterations"),
                   f"    num_iterations: int = {steps} # repro smoke patch: the record's 1640 cut",
                   "fewer steps: the schedule (LR cool-down, window growth) is scaled to them by the program"),
        LineChange("iteration_extension", _field_line("iteration_extension"),
                   "    iteration_extension = 0 # repro smoke patch: no extension",
                   "the extension's 40 steps at the final window are part of the full schedule only"),
    ]
    if val_tokens is not None:
        if val_tokens < 1:
            raise InputError(f"validation tokens {val_tokens} is not a count", "give a positive number")
        if val_tokens % VAL_ALIGN:
            raise InputError(f"validation tokens {val_tokens} is not a multiple of {VAL_ALIGN}",
                             f"give a multiple of {VAL_ALIGN} (e.g. 524288)")
        changes.append(LineChange(
            "val_tokens", _field_line("val_tokens"),
            f"    val_tokens: int = {val_tokens} # repro smoke patch: fewer validation tokens",
            "the data's validation shard holds fewer tokens than the record's 10,485,760"))
        if val_tokens < RECORD_VAL_BATCH:
            # the program asserts val_tokens % val_batch_size == 0, so the batch cannot exceed the tokens
            changes.append(LineChange(
                "val_batch_size", _field_line("val_batch_size"),
                f"    val_batch_size: int = {val_tokens} # repro smoke patch: one validation batch",
                "the record's validation batch (2,097,152 tokens) is larger than the smoke's validation tokens"))
    return ProgramPatch("smoke", tuple(changes))


NATIVE_SMOKE_VERSION = 3


def native_smoke_patch(steps: int, val_tokens: int | None = None, version: int = NATIVE_SMOKE_VERSION) -> ProgramPatch:
    """The same cut for the native trainer, whose settings are options rather than program lines.

    Version 3 cuts the schedule where the record's smoke cut cuts the program's: STEPS scheduled steps, the
    extension kept to SMOKE_EXTENSION steps (pipeline/records/smoke_cut.py), every warm-up as written, so both
    trainers' smoke runs apply the same schedule step for step (tests/test_train_loop_vs_record.py). Runs made
    before it declare version 2 (no extension) or 1 (the whole schedule scaled to STEPS with `--steps`, its
    warm-ups and extension too); the judge recognises both."""
    from pipeline.records.smoke_cut import SMOKE_EXTENSION

    if steps < 2:
        raise InputError(f"--smoke {steps}: a smoke run needs at least 2 steps", "give --smoke 20 or more")
    extension = SMOKE_EXTENSION if version >= 3 else 0
    changes = [LineChange("steps", "", f"--steps {steps}", "the record's schedule scaled to the smoke's steps")
               if version == 1 else
               LineChange("steps", "", f"--set scheduled_steps={steps} --set extension_steps={extension}",
                          "the record's schedule cut at the smoke's steps, as the record's own smoke cut does: "
                          + (f"{extension} steps of extension" if extension else "no extension")
                          + ", the warm-ups as written")]
    if val_tokens is not None:
        flags = f"--set val_tokens={val_tokens} --set val_batch_tokens={val_tokens}"
        changes.append(LineChange("val_tokens", "", flags,
                                  "the data's validation shard holds fewer tokens than the record's 10,485,760"))
    return ProgramPatch("smoke", tuple(changes))
