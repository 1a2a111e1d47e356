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
import warnings
from dataclasses import dataclass

from pipeline.hashing import sha256_bytes

FINGERPRINT_PREFIX = "ast1-"


def _is_bare_string(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _fields(node: ast.AST) -> list[tuple[str, object]]:
    """The fields that count, in order: no contexts or type comments, no empty ones, no bare-string statements."""
    out = []
    for name in node._fields:
        if name in ("ctx", "type_comment", "kind"):
            continue
        value = getattr(node, name, None)
        if isinstance(value, list) and node.__class__ is not ast.Constant:
            value = [v for v in value if not (isinstance(v, ast.stmt) and _is_bare_string(v))] \
                if name in ("body", "orelse", "finalbody") else value
        if value is None or (isinstance(value, list) and not value):
            continue
        out.append((name, value))
    return out


class _Text(str):
    """A token already in canonical form (as opposed to a constant string value still to be written)."""


def _canonical(tree: ast.AST, out: list[str]) -> None:
    """Append the canonical text of `tree` to `out`: `Name(field=value,...)`, lists as `[a,b,]`, constants as
    `type:repr`. Iterative (an explicit stack of pending tokens and values), so a program nested thousands of
    levels deep is walked without Python's recursion limit; the text is the one the recursive walk wrote."""
    stack: list[object] = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, _Text):
            out.append(item)
        elif isinstance(item, ast.AST):
            todo: list[object] = [_Text(type(item).__name__ + "(")]
            for name, value in _fields(item):
                todo += [_Text(name + "="), value, _Text(",")]
            todo.append(_Text(")"))
            stack.extend(reversed(todo))
        elif isinstance(item, list):
            todo = [_Text("[")]
            for element in item:
                todo += [element, _Text(",")]
            todo.append(_Text("]"))
            stack.extend(reversed(todo))
        else:  # constants: type matters (1 vs 1.0 vs True)
            out.append(f"{type(item).__name__}:{item!r}")


def canonical_text(tree: ast.AST) -> str:
    """The canonical text the fingerprint hashes (positions, docstrings and comments left out), for any node.
    Written by a recursive walk (a tenth of the iterative one's time, which is most of a cold import); a tree
    too deep for Python's recursion limit is written again by the iterative walk, which writes the same text."""
    parts: list[str] = []
    try:
        _write(tree, parts)
    except RecursionError:
        parts = []
        _canonical(tree, parts)
    return "".join(parts)


_SKIPPED = frozenset(("ctx", "type_comment", "kind"))
_BODIES = frozenset(("body", "orelse", "finalbody"))
_NAMES: dict[type, tuple[str, ...]] = {}  # a node class's fields that count, in order (_fields' first test)


def _write(item: object, out: list[str]) -> None:
    """_canonical's text of `item`, recursively: the same tokens in the same order (see _fields)."""
    if isinstance(item, ast.AST):
        cls = type(item)
        names = _NAMES.get(cls)
        if names is None:
            names = _NAMES[cls] = tuple(n for n in cls._fields if n not in _SKIPPED)
        out.append(cls.__name__ + "(")
        for name in names:
            value = getattr(item, name, None)
            if value is None:
                continue
            if isinstance(value, list):
                if name in _BODIES and cls is not ast.Constant:
                    value = [v for v in value if not (isinstance(v, ast.stmt) and _is_bare_string(v))]
                if not value:
                    continue
            out.append(name + "=")
            _write(value, out)
            out.append(",")
        out.append(")")
    elif isinstance(item, list):
        out.append("[")
        for element in item:
            _write(element, out)
            out.append(",")
        out.append("]")
    else:  # constants: type matters (1 vs 1.0 vs True)
        out.append(f"{type(item).__name__}:{item!r}")


_walked: list = [None, []]  # the last tree walk() listed, and its nodes


def walk(tree: ast.AST) -> list[ast.AST]:
    """list(ast.walk(tree)): the same nodes in the same (breadth-first) order, listed a few times faster and kept
    for the last tree asked for (the data need walks one program's tree four times)."""
    if _walked[0] is tree:
        return _walked[1]
    nodes, at = [tree], 0
    while at < len(nodes):
        node, at = nodes[at], at + 1
        for name in node._fields:  # ast.iter_child_nodes: each field in order, a list's nodes in order
            value = getattr(node, name, None)
            if isinstance(value, ast.AST):
                nodes.append(value)
            elif isinstance(value, list):
                nodes.extend(v for v in value if isinstance(v, ast.AST))
    _walked[:] = [tree, nodes]
    return nodes


def _parse(source: str | bytes) -> ast.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return ast.parse(source)


def parse_program(source: str | bytes) -> ast.Module:
    """A program's syntax tree. A record's own odd string escapes (a backslash-s in a regex) are its business, not a
    warning of this tool's; errors still raise. A program written for Python 3.12 whose f-strings reuse their own
    quote inside a field (PEP 701) is read through pipeline/records/fstrings.py: the same tree at the same
    positions, which this 3.11 parser could not build from the text as written."""
    try:
        return _parse(source)
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
            return _parse(fixed)
        except SyntaxError:
            raise exc from None


SHARED_TREES = 8  # a record's logs mostly carry one program; its data need reads the same main file just after
_shared: dict[tuple[type, bytes], ast.Module] = {}  # oldest first


def shared_tree(source: str | bytes) -> ast.Module:
    """parse_program(source), parsed once while it is among the last few sources asked for: one tree object shared
    by the readers that never change a tree (the fingerprint, the log reader's program test, the data need), so
    an import parses each program once rather than once per reader. Errors are raised, never remembered."""
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
    try:
        tree = shared_tree(source)
    except (RecursionError, MemoryError):
        raise SyntaxError("the program nests too deeply for Python's parser (thousands of nested terms)") from None
    return FINGERPRINT_PREFIX + hashlib.sha256(canonical_text(tree).encode()).hexdigest()


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
