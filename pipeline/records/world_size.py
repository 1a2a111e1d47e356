"""The process count a record's program insists on, read from its syntax tree: a run of another size is refused.

    need = required_world_size(program)   # (8, 471) for `assert world_size == 8` at line 471, or None
    world_size_refusal(program, nproc=1)  # (what, fix) that refuses it, or None

Nineteen programs of 2025 (track 1's RuleTweak to MuonWithAuxAdamExample, most of track 2) open with
`assert world_size == 8 # this code is designed for 8xH100`: launched with fewer processes, they stop at that line
after the environment, the data and the launch were paid for. Only that plain form counts (a name `world_size`
compared for equality with an integer, in either order, anywhere in train_gpt.py): `assert 8 % world_size == 0`
allows 1, 2, 4 and 8 and says nothing here, and a commented-out assert never reaches the tree.
Several processes cannot share one GPU under NCCL, so the fix is a node with that many GPUs, not a flag.
"""

from __future__ import annotations

import ast

from pipeline.errors import ReproError
from pipeline.records.identity import parse_program
from pipeline.records.program_files import split_program


def _asserted(test: ast.expr) -> int | None:
    """N of `world_size == N` or `N == world_size`."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return None
    left, right = test.left, test.comparators[0]
    for name, value in ((left, right), (right, left)):
        if isinstance(name, ast.Name) and name.id == "world_size" and isinstance(value, ast.Constant) \
                and type(value.value) is int:
            return value.value
    return None


def required_world_size(program: bytes) -> tuple[int, int] | None:
    """(N, line) of the first `assert world_size == N` in the program's train_gpt.py, or None (also when it cannot
    be parsed: the program reader and the smoke cut refuse that with their own reasons)."""
    try:
        tree = parse_program(split_program(program)[0].text)
    except (SyntaxError, RecursionError, ReproError):
        return None
    found = [(node.lineno, n) for node in ast.walk(tree)
             if isinstance(node, ast.Assert) and (n := _asserted(node.test)) is not None]
    return (min(found)[1], min(found)[0]) if found else None


def world_size_refusal(program: bytes, nproc: int) -> tuple[str, str] | None:
    """(why `nproc` processes cannot run this program, the fix), or None when they can (or it asserts nothing)."""
    need = required_world_size(program)
    if need is None or need[0] == nproc:
        return None
    return (f"the program asserts world_size == {need[0]} (train_gpt.py line {need[1]}) and would stop there with "
            f"{nproc} process(es)", f"run it with --nproc {need[0]} on a node of {need[0]} GPUs (NCCL runs one "
            "process per GPU)")
