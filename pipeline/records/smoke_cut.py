"""The smoke cut for any record's program, found in its syntax tree: `repro reproduce --smoke STEPS`.

    cut = smoke_cut(program, steps=40, val_tokens=524_288)   # refuses, naming what is missing, before any cost
    cut.apply(program)                                        # the patched program (every file kept), checked
    cut.sha256, cut.listing, cut.left                         # the declared patch, and what it left as written
    restore(patched, cut.listing)                             # the record's code again: must have its fingerprint

The programs name their fields differently across the speedrun's history, so each role has the names records
use, looked up among the class-level assignments of train_gpt.py (the Hyperparameters dataclass):
  steps        num_iterations (2024-2025) | num_scheduled_iterations (2025-10 on)   required
  extension    iteration_extension (2025-09) | num_extension_iterations (2025-10 on) cut to 2 (SMOKE_EXTENSION)
  phases       warmup_iters, warmdown_iters, cooldown_iters (2024: step counts)     scaled to the cut steps
  validation   val_tokens                                                          required when validation is cut
  val batch    val_batch_size                                                      set to the tokens when larger
  data         train_files | input_bin, val_files | input_val_bin                  an absolute path only (the author's
                                                                                   machine) becomes data/fineweb10B/
The eras are told apart by the tree, not by date: from 2025-10 the total is a field DERIVED from the two it
adds (`num_iterations: int = num_scheduled_iterations + num_extension_iterations`). A derived field is left as
written, so it follows the fields it is built from; `left` names each such field and why. Schedules built from
fractions of the steps (cooldown_frac, 2025-11's batch-size stages, 2026's TrainingSchedule) follow the cut
steps by themselves and are left too.

Each change replaces one value expression at the syntax tree's own position in the program's bytes as read:
offsets count lines the way Python's tokenizer does (CR, LF and CRLF all end a line), so a lone CR in a
comment cannot shift them. The patched program is parsed again and must differ from the record's in the
declared values and nothing else, or the cut is refused (CheckFailed): a cut never corrupts a program. Each
change declares the expression it replaced (`was`), so the judge can put every `was` back and require the
record's pinned fingerprint.
"""

from __future__ import annotations

import ast
import json
import posixpath
from dataclasses import dataclass

from pipeline.errors import CheckFailed, InputError
from pipeline.hashing import sha256_bytes
from pipeline.records.identity import canonical_text, parse_program
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
PHASES = ("warmup_iters", "warmdown_iters", "cooldown_iters")  # 2024: parts of the schedule counted in steps
RECORD_DATA = "data/fineweb10B"
MAX_FACTOR_BITS = 256  # a batch size past this is no batch size: its product is not worked out


@dataclass(frozen=True, kw_only=True)
class Field:
    name: str
    line: int  # 1-based
    start: int  # byte offsets of the value expression in train_gpt.py's bytes as read
    end: int
    was: str  # the expression's source text
    value: int | None  # the expression's integer value, when it is a product of integer constants
    uses: frozenset[str]  # the names the expression reads (a derived field reads other fields)
    owner: int  # which class body holds it (derived fields are looked for in the steps field's class)


@dataclass(frozen=True)
class Change:
    field: str
    was: str
    now: str
    why: str


def _int_value(node: ast.expr) -> int | None:
    """A product of integer constants (4 * 64 * 1024 * 8), worked out without running code and without recursion
    (a hostile expression of thousands of factors), up to MAX_FACTOR_BITS."""
    product, todo = 1, [node]
    while todo:
        item = todo.pop()
        if isinstance(item, ast.BinOp) and isinstance(item.op, ast.Mult):
            todo += [item.left, item.right]
        elif isinstance(item, ast.Constant) and type(item.value) is int:
            product *= item.value
            if product.bit_length() > MAX_FACTOR_BITS:
                return None
        else:
            return None
    return product


def _line_starts(main: bytes) -> list[int]:
    """Byte offset of each line's start, lines ended as Python's tokenizer ends them (CRLF, CR or LF)."""
    starts, at = [0], 0
    for line in main.splitlines(keepends=True):  # bytes.splitlines splits at exactly \r\n, \r and \n
        at += len(line)
        starts.append(at)
    return starts


def _parse(main: bytes, what: str) -> ast.Module:
    try:
        main.decode("utf-8")
        return parse_program(main)
    except UnicodeDecodeError:
        raise CheckFailed(f"{what} is not UTF-8 text", "use the record's unmodified program") from None
    except (SyntaxError, ValueError) as exc:
        raise CheckFailed(f"{what} cannot be parsed: {exc}", "use the record's unmodified program") from None
    except (RecursionError, MemoryError):
        raise CheckFailed(f"{what} nests too deeply for Python's parser",
                          "use the record's unmodified program") from None


def _statements(tree: ast.Module):
    """(class index, target name, statement) of every `name[: type] = value` directly in a class body."""
    for owner, cls in enumerate(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for stmt in cls.body:
            target = stmt.target if isinstance(stmt, ast.AnnAssign) else \
                stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
            if isinstance(target, ast.Name) and stmt.value is not None:
                yield owner, target.id, stmt


def _assignments(tree: ast.Module):
    """(class index, target name, value node) of every class-level assignment."""
    for owner, name, stmt in _statements(tree):
        yield owner, name, stmt.value


def class_fields(main: bytes, what: str = "train_gpt.py") -> dict[str, list[Field]]:
    """Every `name[: type] = value` directly in a class body of the program, by name (a list: duplicates show)."""
    tree = _parse(main, what)
    starts = _line_starts(main)
    found: dict[str, list[Field]] = {}
    for owner, name, v in _assignments(tree):
        if v.end_lineno is None or v.end_lineno >= len(starts):
            raise CheckFailed(f"{what}: the positions Python gives {name} lie outside the program's lines",
                              "use the record's unmodified program")
        start, end = starts[v.lineno - 1] + v.col_offset, starts[v.end_lineno - 1] + v.end_col_offset
        uses = frozenset(n.id for n in ast.walk(v) if isinstance(n, ast.Name))
        found.setdefault(name,
                         []).append(Field(name=name, line=v.lineno, start=start, end=end,
                                          was=main[start:end].decode("utf-8", "replace"),
                                                value=_int_value(v), uses=uses, owner=owner))
    return found


def _one(fields: dict[str, list[Field]], role: str) -> Field | None:
    hits = [f for name in ROLES[role] for f in fields.get(name, [])]
    if role == "steps" and len(hits) > 1:  # from 2025-10: the total is derived from the fields the cut sets
        scheduled = [f for f in hits if f.name == "num_scheduled_iterations"]
        derived = [f for f in hits if f.name == "num_iterations" and scheduled and "num_scheduled_iterations" in f.uses
                   and f.owner == scheduled[0].owner]
        hits = [f for f in hits if f not in derived]
    if len(hits) > 1:
        raise CheckFailed(f"train_gpt.py assigns its {role} field more than once ({', '.join(f.name for f in hits)})",
                          "this program cannot be cut for a smoke run; run it in full")
    return hits[0] if hits else None


def _data_change(field: Field | None) -> Change | None:
    try:
        path = ast.literal_eval(field.was) if field else None
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        return None  # an expression (os.path.join(DATA_PATH, ...)): the working folder's data/fineweb10B serves it
    if not isinstance(path, str) or not path.startswith("/"):
        return None
    return Change(field.name, field.was, repr(f"{RECORD_DATA}/{posixpath.basename(path)}"),
                  "the record reads shards from an absolute path on its author's machine")


def _phase_changes(fields: dict[str, list[Field]], steps_field: Field, steps: int) -> list[Change]:
    """2024's warm-up and warm-down, counted in steps: scaled to the cut, so the schedule keeps its shape."""
    total = steps_field.value
    out = []
    for name in PHASES:
        hits = fields.get(name, [])
        if len(hits) != 1 or hits[0].value is None or not total or hits[0].owner != steps_field.owner:
            continue
        now = 0 if hits[0].value == 0 else max(1, min(steps, round(hits[0].value * steps / total)))
        if str(now) != hits[0].was:
            why = (f"a part of the schedule counted in steps ({hits[0].value} of {total}): scaled to {now} of "
                   f"{steps}, the schedule keeps its shape")
            out.append(Change(name, hits[0].was, str(now), why))
    return out


SMOKE_EXTENSION = 2  # steps of the extension a smoke run keeps (2026-12-02: 0 stopped two 2026 programs' warm-up)


def _changes(fields: dict[str, list[Field]], steps: int, val_tokens: int | None, keep: int) -> list[Change]:
    found = {role: _one(fields, role) for role in ROLES}
    missing = [f"the step count ({' or '.join(ROLES['steps'])})"] if found["steps"] is None else []
    if val_tokens is not None and found["val_tokens"] is None:
        missing.append("the validation token count (val_tokens)")
    if missing:
        raise CheckFailed(f"train_gpt.py has no class-level field for {' and '.join(missing)}",
                          "this program cannot be cut for a smoke run; run it in full (without --smoke)")
    changes = [Change(found["steps"].name, found["steps"].was, str(steps),
                      "fewer steps: the program scales its schedule (cool-down, windows, batch) to them")]
    extension = found["extension"]
    if extension is not None and (extension.value is None or extension.value > keep):
        changes.append(Change(extension.name, extension.was, str(keep),
                              f"kept to {keep} steps, not removed: the program's warm-up samples the steps just "
                              "after each stage's start, the extension's too (2026: `s + offset` for offsets up to "
                              "+1), and indexes past its schedule without them" if keep else
                              "the extension's steps at the final window belong to the full schedule only"))
    changes += _phase_changes(fields, found["steps"], steps)
    if val_tokens is not None:
        changes.append(Change("val_tokens", found["val_tokens"].was, str(val_tokens),
                              "the data's validation shard holds fewer tokens than the record's"))
        batch = found["val_batch"]
        if batch is not None and batch.value is not None and batch.value > val_tokens:
            changes.append(Change(batch.name, batch.was, str(val_tokens),
                                  "the program asserts val_tokens % val_batch_size == 0: one validation batch"))
    return changes + [c for c in (_data_change(found["train_data"]), _data_change(found["val_data"])) if c]


def _left(fields: dict[str, list[Field]], changes: list[Change]) -> list[dict]:
    """Class fields built from the cut fields (the 2025-10 total): left as written, they follow them."""
    cut = {c.field for c in changes}
    out = []
    for name, hits in fields.items():
        if name in cut or len(hits) != 1 or not hits[0].uses & cut:
            continue
        out.append({"field": name, "expression": hits[0].was,
                    "why": f"derived from {', '.join(sorted(hits[0].uses & cut))}, which the cut sets: left as "
                           "written, it follows them"})
    return out


VALIDATION_FIELDS = ("val_tokens", "val_batch_size")


def _model_reads(tree: ast.Module, name: str) -> list[ast.Attribute]:
    """Reads of `<obj>.name` that build or run the program's own classes (the model): an argument of a call to a
    class the program defines (`GPT(max_seq_len=args.val_batch_size // ...)`), or code inside such a class."""
    classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    names = {c.name for c in classes}
    places = [a for c in ast.walk(tree) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
              and c.func.id in names for a in (*c.args, *(k.value for k in c.keywords))]
    places += [s for c in classes for s in c.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return [n for place in places for n in ast.walk(place) if isinstance(n, ast.Attribute) and n.attr == name
            and isinstance(n.ctx, ast.Load)]


def _stage_lists(main: bytes) -> list[tuple[str, int]]:
    """Schedules given in stages rather than steps, with their stage counts: a class field named like
    `ws_schedule`/`train_bs_schedule` holding a tuple (2025-09 on), and a module-level list of stages with a
    `duration=` fraction each (2026's TRAINING_STAGES; its last stage, without a duration, is the extension)."""
    tree = parse_program(main)
    out = [(name, len(v.elts)) for _, name, v in _assignments(tree)
           if "schedule" in name and isinstance(v, (ast.Tuple, ast.List))]
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and isinstance(stmt.value, (ast.List, ast.Tuple)):
            timed = [e for e in stmt.value.elts if isinstance(e, ast.Call) and any(k.arg == "duration"
                                                                                 for k in e.keywords)]
            if timed:
                out.append((stmt.targets[0].id, len(timed)))
    return out


def _stages_left(main: bytes, steps: int) -> list[dict]:
    """Each stage schedule, left as written: the program spreads its stages over the (cut) scheduled steps. A cut
    shorter than the stages would leave a stage without a step: refused, the cut would not be the record's
    schedule in small."""
    out = []
    for name, count in _stage_lists(main):
        if steps < count:
            raise CheckFailed(f"--smoke {steps} is fewer steps than the {count} stages of {name}: a stage would "
                              "get no step", f"give --smoke {count} or more")
        out.append({"field": name, "expression": f"{count} stages",
                    "why": "stages, not step counts: left as written, the program spreads them over the cut steps"})
    return out


def _shape(tree: ast.Module, names: set[str]) -> str:
    """The program's canonical text with the named class fields' values blanked: what a cut must not change."""
    for _, name, stmt in list(_statements(tree)):
        if name in names:
            stmt.value = ast.Constant(value="<cut>")
    return canonical_text(tree)


def _rewrite(program: bytes, values: dict[str, str]) -> bytes:
    """The program with each named class field's value expression replaced (train_gpt.py only), at the positions
    the syntax tree gives in the bytes as read; then parsed again and checked: the named values are the new
    expressions and nothing else differs. Anything else is refused."""
    files = split_program(program)
    main = files[0].text
    fields = class_fields(main)
    spans = []
    for name, expression in values.items():
        hits = fields.get(name, [])
        if len(hits) != 1:
            raise CheckFailed(f"train_gpt.py assigns {name} {len(hits)} times (one assignment expected)",
                              "the patch does not fit this program")
        spans.append((hits[0].start, hits[0].end, expression.encode("utf-8")))
    patched = main
    for start, end, new in sorted(spans, reverse=True):
        patched = patched[:start] + new + patched[end:]
    _check_rewrite(main, patched, values)
    return join_program((ProgramFile(files[0].name, patched), *files[1:]))


def _check_rewrite(main: bytes, patched: bytes, values: dict[str, str]) -> None:
    refused = "the smoke cut of train_gpt.py"
    tree = _parse(patched, f"{refused} (parsed again)")
    now: dict[str, list[str]] = {}
    for _, name, value in _assignments(tree):
        if name in values:
            now.setdefault(name, []).append(canonical_text(value))
    for name, expression in values.items():
        try:
            wanted = canonical_text(ast.parse(expression, mode="eval").body)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            raise CheckFailed(f"{refused}: {name}'s new value {expression[:80]!r} is not an expression",
                              "declare each change as a Python expression") from None
        if now.get(name) != [wanted]:
            raise CheckFailed(f"{refused} did not set {name} to {expression[:80]} (the positions do not fit the "
                              "program as read)", "this program cannot be cut for a smoke run; run it in full")
    names = set(values)
    if _shape(_parse(main, "train_gpt.py"), names) != _shape(tree, names):
        raise CheckFailed(f"{refused} changed more than the declared fields ({', '.join(sorted(names))})",
                          "this program cannot be cut for a smoke run; run it in full")


@dataclass(frozen=True, kw_only=True)
class SmokeCut:
    steps: int
    val_tokens: int | None
    extension: int  # the most extension steps kept (runs declared before 2026-12-02 kept 0 and say no number)
    changes: tuple[Change, ...]
    left: tuple[dict, ...] = ()  # fields built from the cut ones, left as written: {field, expression, why}

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
                "parameters": {"steps": self.steps, "val_tokens": self.val_tokens, "extension": self.extension},
                "patched_sha256": sha256_bytes(patched)}


def smoke_cut(program: bytes, steps: int, val_tokens: int | None = None, extension: int = SMOKE_EXTENSION) -> SmokeCut:
    """The smoke cut of this program, keeping at most `extension` extension steps (the judge passes a declared
    run's own number); CheckFailed naming what is missing when its fields cannot be found."""
    if steps < 2:
        raise InputError(f"--smoke {steps}: a smoke run needs at least 2 steps", "give --smoke 20 or more")
    if val_tokens is not None and (val_tokens < 1 or val_tokens % VAL_ALIGN):
        raise InputError(f"validation tokens {val_tokens} is not a positive multiple of {VAL_ALIGN}",
                         f"give a multiple of {VAL_ALIGN} (e.g. 524288)")
    fields = class_fields(split_program(program)[0].text)
    changes = _changes(fields, steps, val_tokens, extension)
    main = split_program(program)[0].text
    cut = SmokeCut(steps=steps, val_tokens=val_tokens, extension=extension, changes=tuple(changes),
                   left=tuple(_left(fields, changes) + _stages_left(main, steps)))
    cut.apply(program)  # parsed again and checked now, before anything is paid for
    return cut


def restore(patched: bytes, listing: list[dict]) -> bytes:
    """The patched program with every declared field set back to the expression it replaced."""
    return _rewrite(patched, {str(c.get("field")): str(c.get("was")) for c in listing})


def planned_smoke_cut(program: bytes, steps: int, val_tokens: int | None = None) -> SmokeCut:
    """The smoke cut a new run may use: smoke_cut, refused when it would cut a validation field that also sizes the
    model (2025-11's rotary table is built from val_batch_size: cut, the table shrank below a training sequence).
    The judge recomputes a declared cut with smoke_cut alone, so runs made before this rule still verify."""
    cut = smoke_cut(program, steps, val_tokens)
    main = split_program(program)[0].text
    fields = class_fields(main)
    tree = parse_program(main)
    for change in cut.changes:
        reads = _model_reads(tree, change.field) if change.field in VALIDATION_FIELDS else []
        if reads:
            value = fields[change.field][0].value
            need = f"{value:,} tokens ({change.field} = {change.was})" if value else f"{change.field} = {change.was}"
            raise CheckFailed(
                f"this program sizes its model from {change.field} (line {reads[0].lineno}): the smoke cut would "
                f"set it to {change.now} and change the model; validation needs at least {need} of validation data",
                "give a validation shard of that size, or run without --smoke-val-tokens on the record's data")
    return cut
