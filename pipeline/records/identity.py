"""Program identity: the sha256 of the exact bytes, and a fingerprint of what the code does.

The fingerprint hashes a canonical walk of the program's syntax tree with docstrings (and other
bare string statements, which do nothing) removed; comments never reach the tree. So the record's
four programs, which differ only in comments and docstrings, share one fingerprint, while any change
to code changes it. The walk is our own rather than `ast.dump`, whose text changed between Python
versions (3.13 omits empty fields): omitting empty fields ourselves keeps one program's fingerprint
equal on every Python that can parse it.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass

from pipeline.hashing import sha256_bytes
from pipeline.records.canonical import canonical_text
from pipeline.records.statements import canonical_body, quiet_parse, statement_body

FINGERPRINT_PREFIX = "ast1-"


_walked: list = [None, []]  # the last tree walk() listed, and its nodes
_levels: dict[int, tuple[ast.AST, list[list[ast.AST]]]] = {}  # by id: a statement (kept: no id reused) and its levels
MAX_LEVELS = 1 << 17  # statements whose levels are kept (the whole history's programs have ~15,000 distinct ones)


def walk(tree: ast.AST) -> list[ast.AST]:
    """list(ast.walk(tree)): the same nodes in the same (breadth-first) order, listed a few times faster and kept
    for the last tree asked for (the data need walks one program's tree four times). A module's nodes at each depth
    are its statements' nodes at that depth, statement after statement; each statement's are listed once per
    process, so programs sharing statements (shared_tree's, from pieces) are walked only where they differ."""
    if _walked[0] is tree:
        return _walked[1]
    if isinstance(tree, ast.Module) and not tree.type_ignores:
        per_statement = [_levels_of(stmt) for stmt in tree.body]
        nodes = [tree]
        for depth in range(max(map(len, per_statement), default=0)):
            for levels in per_statement:
                if depth < len(levels):
                    nodes.extend(levels[depth])
    else:
        nodes = [n for level in _levels_of(tree) for n in level]
    _walked[:] = [tree, nodes]
    return nodes


def _levels_of(node: ast.AST) -> list[list[ast.AST]]:
    """The nodes under `node` (itself first) by depth, each depth in ast.walk's order; kept per statement."""
    kept = _levels.get(id(node))
    if kept is not None and kept[0] is node:
        return kept[1]
    levels, level = [], [node]
    while level:
        levels.append(level)
        below: list[ast.AST] = []
        for parent in level:
            for name in parent._fields:  # ast.iter_child_nodes: each field in order, a list's nodes in order
                value = getattr(parent, name, None)
                if isinstance(value, ast.AST):
                    below.append(value)
                elif isinstance(value, list):
                    below.extend(v for v in value if isinstance(v, ast.AST))
        level = below
    if isinstance(node, ast.stmt):
        if len(_levels) >= MAX_LEVELS:
            _levels.clear()
        _levels[id(node)] = (node, levels)
    return levels


def parse_program(source: str | bytes) -> ast.Module:
    """A program's syntax tree. A record's own odd string escapes (a backslash-s in a regex) are its business, not a
    warning of this tool's; errors still raise. A program written for Python 3.12 whose f-strings reuse their own
    quote inside a field (PEP 701) is read through pipeline/records/fstrings.py: the same tree at the same
    positions, which this 3.11 parser could not build from the text as written."""
    try:
        return quiet_parse(source)
    except SyntaxError as exc:
        from pipeline.records.fstrings import backport

        try:
            text = source.decode("utf-8") if isinstance(source, bytes) else source
        except UnicodeDecodeError:
            raise exc from None
        fixed = backport(text)
        if fixed is None:
            raise
        try:
            return quiet_parse(fixed)
        except SyntaxError:
            raise exc from None


SHARED_TREES = 8  # programs the pieces do not read (a 3.12 f-string, a coding cookie): the last few kept
_shared: dict[tuple[type, bytes], ast.Module] = {}  # oldest first


def shared_tree(source: str | bytes) -> ast.Module:
    """parse_program(source) for the readers that never change a tree nor read a position (the fingerprint, the
    log reader's program test, the data need): built from the program's top-level statements, each distinct one
    parsed once per process (pipeline/records/statements.py: the same nodes, positions counted within each
    statement's piece), so an import parses only what earlier programs did not already have. A program the pieces
    do not read is parsed whole, once while it is among the last few asked for. Errors are raised, never kept."""
    body = statement_body(source)
    if body is not None:
        return ast.Module(body=body, type_ignores=[])
    raw = source if isinstance(source, bytes) else source.encode("utf-8", "surrogatepass")
    key = (type(source), hashlib.sha256(raw).digest())
    tree = _shared.pop(key, None)
    if tree is None:
        tree = parse_program(source)
    _shared[key] = tree
    while len(_shared) > SHARED_TREES:
        del _shared[next(iter(_shared))]
    return tree


def fingerprint(source: str | bytes) -> str:
    """Fingerprint of the program's code; raises SyntaxError when it is not Python, or when it nests too deeply
    for Python's own parser (a hostile program of thousands of nested terms: RecursionError inside ast.parse)."""
    text = canonical_body(source)  # from the statements' pieces, each walked once per process
    if text is None:
        try:
            text = canonical_text(shared_tree(source))
        except (RecursionError, MemoryError):
            raise SyntaxError("the program nests too deeply for Python's parser (thousands of nested terms)") \
                from None
    return FINGERPRINT_PREFIX + hashlib.sha256(text.encode()).hexdigest()


def program_fingerprint(program: bytes) -> str:
    """The fingerprint of a log's program: of its one file, or for a set of files (pipeline/records/program_files.py)
    each file's fingerprint combined in order, the main file named "main". Raises SyntaxError/ValueError."""
    from pipeline.errors import CheckFailed
    from pipeline.records.program_files import split_program

    try:
        files = split_program(program)
    except CheckFailed as exc:
        raise ValueError(exc.what) from None
    if len(files) == 1:
        return fingerprint(program)
    prints = [f"{'main' if i == 0 else f.name}={fingerprint(f.text)}" for i, f in enumerate(files)]
    return FINGERPRINT_PREFIX + sha256_bytes("\n".join(prints).encode())


@dataclass(frozen=True)
class ProgramIdentity:
    """How a run's program relates to the record's pinned programs."""

    status: str  # identical | same-code | different | unpinned | absent | unparsable
    sha256: str | None
    fingerprint: str | None
    detail: str


def identify(program: bytes | None, accepted_sha256: frozenset[str], pinned_fingerprint: str) -> ProgramIdentity:
    if program is None:
        return ProgramIdentity("absent", None, None, "the log carries no program text (only the run output)")
    from pipeline.records.log_cache import program_fingerprint as remembered  # one walk per distinct program

    digest = sha256_bytes(program)
    try:
        fp = remembered(program, program_fingerprint)
    except (SyntaxError, ValueError) as exc:
        return ProgramIdentity("unparsable", digest, None, f"the program text is not valid Python ({exc})")
    if digest in accepted_sha256:
        return ProgramIdentity("identical", digest, fp, "byte-identical to a program of the record's logs")
    if not pinned_fingerprint:
        return ProgramIdentity("unpinned", digest, fp, "not byte-identical to the record's programs, and the "
                               "record pins no code fingerprint to compare with")
    if fp == pinned_fingerprint:
        return ProgramIdentity("same-code", digest, fp, "the record's code; only comments or docstrings differ")
    return ProgramIdentity("different", digest, fp, "its code differs from the record's program "
                           f"(fingerprint {fp[:17]}… vs pinned {pinned_fingerprint[:17]}…)")
