"""Smoke runs: the record's program (or the native trainer) with only its step count cut, judged as smoke.

    repro reproduce --smoke 40 --runs 2 ...        -> verdict smoke-passed | smoke-failed, never reproduced

A smoke run proves that this node, this environment and this data run the record's program end to end and
that the model learns; it proves nothing about the record's loss or time. Its run.yaml declares the cut
(`program_patch`: the smoke patch's sha256, its changes and the patched program's sha256). The judge
recomputes all of it from the log:
  1. the declared patch is exactly the smoke patch its own parameters produce (pipeline/records/patch.py);
  2. the program at the top of the log is byte for byte the patched program the run declared;
  3. with the cut fields restored to the values the record pins (`program.smoke_fields`), the program has
     the record's pinned code fingerprint: nothing but the declared lines differs from the record's code.
A run passes when it is valid and its validation loss fell from the first validation to the last.
"""

from __future__ import annotations

import re

from pipeline.findings import Finding, of_severity
from pipeline.hashing import sha256_bytes
from pipeline.records.identity import ProgramIdentity, program_fingerprint
from pipeline.records.model import Record
from pipeline.records.patch import native_smoke_patch, smoke_patch
from pipeline.verdict.outcomes import VerdictOutcome


def smoke_patch_of(meta) -> dict | None:
    """A run's declared smoke cut, or None for a full run."""
    patch = getattr(meta, "program_patch", None) if meta is not None else None
    return patch if isinstance(patch, dict) and patch.get("name") == "smoke" else None


def _declared(patch: dict) -> dict[str, str]:
    return {str(c.get("field")): str(c.get("line")) for c in patch.get("changes") or [] if isinstance(c, dict)}


def _int_in(text: str | None) -> int | None:
    found = re.search(r"=\s*([0-9_]+)", text or "")
    return int(found.group(1).replace("_", "")) if found else None


def expected_patch(trainer: str, patch: dict):
    """The smoke patch that the declared parameters produce (None when they cannot be read)."""
    declared = _declared(patch)
    if trainer == "native":  # version 1 declared `--steps N`, 2 `... --set extension_steps=0`, 3 the kept extension
        line = declared.get("steps") or ""
        version = 1 if line.startswith("--steps ") else 2 if line.endswith("extension_steps=0") else 3
        steps, val = _int_in(line.replace("--steps ", "steps=")), _int_in(declared.get("val_tokens"))
        return native_smoke_patch(steps, val, version) if steps else None
    steps, val = _int_in(declared.get("num_iterations")), _int_in(declared.get("val_tokens"))
    return smoke_patch(steps, val) if steps else None


def _restore(text: str, fields: dict[str, str]) -> str | None:
    """The program with each smoke field's line set back to the record's pinned expression."""
    for field, expression in fields.items():
        line = re.compile(rf"^(?P<lhs>[ \t]+{field}(\s*:\s*int)?\s*)=[^\n]*$", re.MULTILINE)
        if len(line.findall(text)) != 1:
            return None
        text = line.sub(lambda m, e=expression: f"{m['lhs']}= {e}", text)
    return text


def check_program(record: Record, source: str, program: bytes | None, patch: dict,
                  trainer: str) -> tuple[ProgramIdentity, list[Finding]]:
    """The smoke run's program identity and any problem with its declared cut."""
    def problem(issue: str, **data) -> Finding:
        return Finding("smoke.program", "problem", {"run": source, "issue": issue, **data})

    if trainer != "native" and patch.get("version") == 2:  # a cut found in the program's syntax tree
        return _check_cut(record, program, patch, problem)
    expected = expected_patch(trainer, patch)
    if expected is None or expected.sha256 != patch.get("sha256"):
        return (ProgramIdentity("different", None, None, "undeclared smoke patch"),
                [problem("the declared patch is not the smoke patch of its own parameters",
                         declared=str(patch.get("sha256")))])
    if trainer == "native":
        return ProgramIdentity("native", None, None, f"the native trainer + smoke cut {expected.sha256[:12]}"), []
    refused = _not_the_declared_program(program, patch, problem)
    if refused:
        return refused
    digest = sha256_bytes(program)
    text = program.decode("utf-8", "replace")
    missing = [c.field for c in expected.changes if text.count(c.replacement + "\n") != 1]
    restored = _restore(text, record.program.smoke_fields) if record.program.smoke_fields else None
    if missing or restored is None:
        return (ProgramIdentity("different", digest, None, "declared lines not found"),
                [problem("the declared lines are not in the program, or the record pins no smoke fields",
                         fields=missing)])
    try:
        fp = program_fingerprint(restored.encode("utf-8"))
    except (SyntaxError, ValueError, RecursionError):
        fp = None
    if fp != record.program.fingerprint:
        return (ProgramIdentity("different", digest, fp, "code differs beyond the smoke cut"),
                [problem("with the cut fields restored, the code is not the record's", fingerprint=fp,
                         pinned=record.program.fingerprint)])
    return ProgramIdentity("smoke", digest, fp, f"record program + smoke patch {expected.sha256[:12]}"), []


def _not_the_declared_program(program: bytes | None, patch: dict, problem) -> tuple | None:
    """(identity, findings) when the log carries no program or not the patched one the run declared; else None."""
    if program is None:
        return ProgramIdentity("absent", None, None, "no program text"), [problem("the log carries no program")]
    digest = sha256_bytes(program)
    if digest != patch.get("patched_sha256"):
        return (ProgramIdentity("different", digest, None, "not the declared patched program"),
                [problem("the log's program is not the patched program the run declared", sha256=digest)])
    return None


def _check_cut(record: Record, program: bytes | None, patch: dict, problem) -> tuple[ProgramIdentity, list[Finding]]:
    """A v2 cut: the log's program is the declared patched program; with every `was` put back it has the record's
    fingerprint; and the cut that program gives for the declared parameters is the declared one, to the byte."""
    from pipeline.errors import ReproError
    from pipeline.records.smoke_cut import restore, smoke_cut

    refused = _not_the_declared_program(program, patch, problem)
    if refused:
        return refused
    digest = sha256_bytes(program)
    params = patch.get("parameters") if isinstance(patch.get("parameters"), dict) else {}
    try:
        original = restore(program, list(patch.get("changes") or []))
        fp = program_fingerprint(original)
        # a run declared before the cut kept extension steps names none: its cut kept 0
        expected = smoke_cut(original, int(params.get("steps")), params.get("val_tokens"),
                             extension=int(params.get("extension", 0)))
    except (ReproError, SyntaxError, ValueError, TypeError, RecursionError) as exc:
        return (ProgramIdentity("different", digest, None, "declared cut does not fit the program"),
                [problem(f"the declared cut cannot be undone or recomputed: {exc}")])
    if fp != record.program.fingerprint and fp not in {log.fingerprint for log in record.logs if log.fingerprint}:
        return (ProgramIdentity("different", digest, fp, "code differs beyond the smoke cut"),
                [problem("with the cut fields restored, the code is not the record's", fingerprint=fp,
                         pinned=record.program.fingerprint)])
    if expected.sha256 != patch.get("sha256") or expected.apply(original) != program:
        return (ProgramIdentity("different", digest, fp, "undeclared smoke patch"),
                [problem("the declared patch is not the smoke cut of its own parameters",
                         declared=str(patch.get("sha256")))])
    return ProgramIdentity("smoke", digest, fp, f"record program + smoke cut {expected.sha256[:12]}"), []


def learning(source: str, first: float | None, last: float | None, steps: int | None) -> Finding:
    """Whether the validation loss fell over the smoke run (a note, or a failure when it did not)."""
    fell = first is not None and last is not None and last < first
    return Finding("smoke.learning", "note" if fell else "failure",
                   {"run": source, "first_val_loss": first, "final_val_loss": last, "steps": steps})


def outcome(findings: list[Finding]) -> VerdictOutcome:
    failed = of_severity(findings, "problem", "failure")
    return VerdictOutcome.SMOKE_FAILED if failed else VerdictOutcome.SMOKE_PASSED
