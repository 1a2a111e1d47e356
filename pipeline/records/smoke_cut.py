"""The smoke cut for any record's program, found in its syntax tree: `repro reproduce --smoke STEPS`.

    cut = smoke_cut(program, steps=40, val_tokens=524_288)   # refuses, naming what is missing, before any cost
    cut.apply(program)                                        # the patched program (every file kept)
    cut.sha256, cut.listing                                   # the declared patch: its identity and its changes
    restore(patched, cut.listing)                             # the record's code again: must have its fingerprint

The programs name their fields differently across the speedrun's history, so each role has the names records
use, looked up among the class-level assignments of train_gpt.py (the Hyperparameters dataclass):
  steps        num_iterations (2024-2025) | num_scheduled_iterations (2026)       required
  extension    iteration_extension (2025) | num_extension_iterations (2026)       cut to 0 where present
  validation   val_tokens                                                          required when validation is cut
  val batch    val_batch_size                                                      set to the tokens when larger
  data         train_files | input_bin, val_files | input_val_bin                  an absolute path only (the author's
                                                                                   machine) becomes data/fineweb10B/
Each change replaces one single-line value expression and declares the expression it replaced (`was`), so the
judge can put every `was` back and require the record's pinned fingerprint: nothing else differs.
"""

from __future__ import annotations

import ast
import json
import posixpath
from dataclasses import dataclass

from pipeline.errors import CheckFailed, InputError
from pipeline.hashing import sha256_bytes
from pipeline.records.identity import parse_program
from pipeline.records.program_files import ProgramFile, join_program, split_program

VERSION = 2  # v1: the line patch of pipeline/records/patch.py (2025-09-23's four lines)
VAL_ALIGN = 8 * 128  # every world size (1, 2, 4, 8) and grad-accumulation split keeps whole 128-token blocks
ROLES = {
    "steps": ("num_iterations", "num_scheduled_iterations"),
    "extension": ("iteration_extension", "num_extension_iterations"),
    "val_tokens": ("val_tokens",),
    "val_batch": ("val_batch_size",),
    "train_data": ("train_files", "input_bin"),
    "val_data": ("val_files", "input_val_bin"),
}
RECORD_DATA = "data/fineweb10B"


@dataclass(frozen=True)
class Field:
    name: str
    line: int  # 1-based
    start: int  # byte offsets of the value expression on its line
    end: int
    was: str  # the expression's source text


@dataclass(frozen=True)
class Change:
    field: str
    was: str
    now: str
    why: str


def class_fields(main: bytes) -> dict[str, list[Field]]:
    """Every `name[: type] = value` directly in a class body of the program, by name (a list: duplicates show)."""
    try:
        tree = parse_program(main)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise CheckFailed(f"train_gpt.py cannot be parsed: {exc}", "use the record's unmodified program") from None
    lines = main.split(b"\n")
    found: dict[str, list[Field]] = {}
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for stmt in cls.body:
            target = stmt.target if isinstance(stmt, ast.AnnAssign) else \
                stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
            if not isinstance(target, ast.Name) or stmt.value is None:
                continue
            v = stmt.value
            single = v.lineno == v.end_lineno
            text = lines[v.lineno - 1][v.col_offset:v.end_col_offset].decode("utf-8") if single else ""
            found.setdefault(target.id, []).append(Field(target.id, v.lineno, v.col_offset,
                                                         v.end_col_offset if single else -1, text))
    return found


def _one(fields: dict[str, list[Field]], role: str) -> Field | None:
    hits = [f for name in ROLES[role] for f in fields.get(name, [])]
    if len(hits) > 1:
        raise CheckFailed(f"train_gpt.py assigns its {role} field more than once ({', '.join(f.name for f in hits)})",
                          "this program cannot be cut for a smoke run; run it in full")
    if hits and hits[0].end < 0:
        raise CheckFailed(f"train_gpt.py's {hits[0].name} spans several lines", "run this program in full")
    return hits[0] if hits else None


def _data_change(field: Field | None) -> Change | None:
    try:
        path = ast.literal_eval(field.was) if field else None
    except (ValueError, SyntaxError):
        return None  # an expression (os.path.join(DATA_PATH, ...)): the working folder's data/fineweb10B serves it
    if not isinstance(path, str) or not path.startswith("/"):
        return None
    return Change(field.name, field.was, repr(f"{RECORD_DATA}/{posixpath.basename(path)}"),
                  "the record reads shards from an absolute path on its author's machine")


def _changes(fields: dict[str, list[Field]], steps: int, val_tokens: int | None) -> list[Change]:
    found = {role: _one(fields, role) for role in ROLES}
    missing = [f"the step count ({' or '.join(ROLES['steps'])})"] if found["steps"] is None else []
    if val_tokens is not None and found["val_tokens"] is None:
        missing.append("the validation token count (val_tokens)")
    if missing:
        raise CheckFailed(f"train_gpt.py has no class-level field for {' and '.join(missing)}",
                          "this program cannot be cut for a smoke run; run it in full (without --smoke)")
    changes = [Change(found["steps"].name, found["steps"].was, str(steps),
                      "fewer steps: the program scales its schedule (cool-down, windows, batch) to them")]
    if found["extension"] is not None:
        changes.append(Change(found["extension"].name, found["extension"].was, "0",
                              "the extension's steps at the final window belong to the full schedule only"))
    if val_tokens is not None:
        changes.append(Change("val_tokens", found["val_tokens"].was, str(val_tokens),
                              "the data's validation shard holds fewer tokens than the record's"))
        batch = found["val_batch"]
        if batch is not None and _value(batch.was) not in (None,) and _value(batch.was) > val_tokens:
            changes.append(Change(batch.name, batch.was, str(val_tokens),
                                  "the program asserts val_tokens % val_batch_size == 0: one validation batch"))
    return changes + [c for c in (_data_change(found["train_data"]), _data_change(found["val_data"])) if c]


def _value(expression: str) -> int | None:
    """An integer expression of constants (4 * 64 * 1024 * 8), evaluated without running code."""
    node = ast.parse(expression, mode="eval").body
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        left, right = _value(ast.unparse(node.left)), _value(ast.unparse(node.right))
        return left * right if left is not None and right is not None else None
    return None


def _rewrite(program: bytes, values: dict[str, str]) -> bytes:
    """The program with each named class field's value expression replaced (train_gpt.py only)."""
    files = split_program(program)
    main = files[0].text
    fields = class_fields(main)
    lines = main.split(b"\n")
    for name, expression in values.items():
        hits = fields.get(name, [])
        if len(hits) != 1 or hits[0].end < 0:
            raise CheckFailed(f"train_gpt.py assigns {name} {len(hits)} times (one single-line assignment expected)",
                              "the patch does not fit this program")
        f = hits[0]
        line = lines[f.line - 1]
        lines[f.line - 1] = line[:f.start] + expression.encode() + line[f.end:]
    return join_program((ProgramFile(files[0].name, b"\n".join(lines)), *files[1:]))


@dataclass(frozen=True)
class SmokeCut:
    steps: int
    val_tokens: int | None
    changes: tuple[Change, ...]

    @property
    def listing(self) -> list[dict]:
        return [{"file": "train_gpt.py", "field": c.field, "was": c.was, "now": c.now, "why": c.why}
                for c in self.changes]

    @property
    def sha256(self) -> str:
        return sha256_bytes(json.dumps({"name": "smoke", "version": VERSION, "changes": self.listing},
                                       sort_keys=True).encode())

    def apply(self, program: bytes) -> bytes:
        return _rewrite(program, {c.field: c.now for c in self.changes})

    def declared(self, patched: bytes) -> dict:
        """What run.yaml's program_patch says (the judge recomputes every part of it)."""
        return {"name": "smoke", "version": VERSION, "sha256": self.sha256, "changes": self.listing,
                "parameters": {"steps": self.steps, "val_tokens": self.val_tokens},
                "patched_sha256": sha256_bytes(patched)}


def smoke_cut(program: bytes, steps: int, val_tokens: int | None = None) -> SmokeCut:
    """The smoke cut of this program; CheckFailed naming what is missing when its fields cannot be found."""
    if steps < 2:
        raise InputError(f"--smoke {steps}: a smoke run needs at least 2 steps", "give --smoke 20 or more")
    if val_tokens is not None and (val_tokens < 1 or val_tokens % VAL_ALIGN):
        raise InputError(f"validation tokens {val_tokens} is not a positive multiple of {VAL_ALIGN}",
                         f"give a multiple of {VAL_ALIGN} (e.g. 524288)")
    return SmokeCut(steps, val_tokens, tuple(_changes(class_fields(split_program(program)[0].text), steps, val_tokens)))


def restore(patched: bytes, listing: list[dict]) -> bytes:
    """The patched program with every declared field set back to the expression it replaced."""
    return _rewrite(patched, {str(c.get("field")): str(c.get("was")) for c in listing})
