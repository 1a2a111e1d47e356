"""How many validation tokens a record's program reads at once, from its syntax tree: checked against the data.

    window = validation_window(program, val_tokens=262_144)   # (tokens, how it was worked out) or None
    window[0] > tokens in the validation shards given          # the run would stop in its val loader: refused
    validation_total(program, val_tokens=None)                 # (10_485_760, how) or None: all it reads, in order

Only what the Hyperparameters fields state plainly is used:
  val_seq_len     (2025): the val loader reads grad_accum_steps x world_size sequences of val_seq_len at once;
                  counted only where the program writes `grad_accum_steps = K // world_size` (K x val_seq_len for
                  every world size that divides K)
  val_batch_size  (2025-10 on): the val loader reads val_batch_size tokens at once (as a smoke cut leaves it:
                  cut to val_tokens when larger)
Anything else (no such field, a value that is not a product of integers): None, nothing is claimed.

The whole validation (val_tokens, or the smoke cut's) must fit in the shards given too, unless the loader wraps
around its files: the 2024 loader steps `(self.current_shard + 1) % len(self.files)` and never runs out, while
from 2025 on `file_iter = iter(files)` stops at the last shard (StopIteration, after the training was paid for).
"""

from __future__ import annotations

import ast

from pipeline.records.identity import parse_program
from pipeline.records.program_files import split_program
from pipeline.records.smoke_cut import class_fields


def _accumulation(tree: ast.Module) -> tuple[int, int] | None:
    """(K, line) of a module-level `grad_accum_steps = K // world_size`."""
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and stmt.targets[0].id == "grad_accum_steps" and isinstance(stmt.value, ast.BinOp) \
                and isinstance(stmt.value.op, ast.FloorDiv) and isinstance(stmt.value.left, ast.Constant) \
                and type(stmt.value.left.value) is int and isinstance(stmt.value.right, ast.Name) \
                and stmt.value.right.id == "world_size":
            return stmt.value.left.value, stmt.lineno
    return None


def _loader_wraps(tree: ast.Module) -> bool:
    """A loader that starts its files again: `... % len(...)` (2024) or a call of `cycle` (itertools)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.right, ast.Call) \
                and isinstance(node.right.func, ast.Name) and node.right.func.id == "len":
            return True
        if isinstance(node, ast.Call) and "cycle" in (getattr(node.func, "id", None), getattr(node.func, "attr", None)):
            return True
    return False


def validation_total(program: bytes, val_tokens: int | None = None) -> tuple[int, str] | None:
    """(the tokens one validation reads in all, how that was worked out), or None when the loader wraps around its
    files (it never runs out) or the program states no plain val_tokens. `val_tokens`: a smoke cut's count."""
    main = split_program(program)[0].text
    if _loader_wraps(parse_program(main)):
        return None
    if val_tokens is not None:
        return val_tokens, f"val_tokens {val_tokens:,} (the smoke cut's)"
    field = class_fields(main).get("val_tokens", [])
    if len(field) != 1 or not field[0].value:
        return None
    return field[0].value, f"val_tokens = {field[0].value:,} (line {field[0].line}), read once through its files"


def validation_window(program: bytes, val_tokens: int | None = None) -> tuple[int, str] | None:
    """(tokens the program's validation reads at once, how that number was worked out), or None."""
    main = split_program(program)[0].text
    fields = class_fields(main)
    seq = fields.get("val_seq_len", [])
    batch = fields.get("val_batch_size", [])
    if len(seq) == 1 and seq[0].value:
        accumulation = _accumulation(parse_program(main))
        if accumulation is None:
            return None
        k, line = accumulation
        return k * seq[0].value, (f"val_seq_len {seq[0].value:,} (line {seq[0].line}) x {k} (grad_accum_steps x "
                                  f"world_size, from `grad_accum_steps = {k} // world_size`, line {line})")
    if len(batch) == 1 and batch[0].value:
        value = batch[0].value
        if val_tokens is not None and value > val_tokens:
            return val_tokens, f"val_batch_size {value:,} (line {batch[0].line}), cut to val_tokens {val_tokens:,}"
        return value, f"val_batch_size = {batch[0].was} = {value:,} (line {batch[0].line})"
    return None
