"""The canonical text of a syntax tree, which a program's fingerprint hashes (pipeline/records/identity.py).

    canonical_text(tree)   # `Name(field=value,...)`, lists as `[a,b,]`, constants as `type:repr`

Positions, contexts, type comments, empty fields and bare-string statements (docstrings) are left out, so the
text is one program's on every Python that can parse it. A pure function of the tree: the text of a statement is
the same wherever it stands, which pipeline/records/statements.py relies on.
"""

from __future__ import annotations

import ast


def is_bare_string(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _fields(node: ast.AST) -> list[tuple[str, object]]:
    """The fields that count, in order: no contexts or type comments, no empty ones, no bare-string statements."""
    out = []
    for name in node._fields:
        if name in ("ctx", "type_comment", "kind"):
            continue
        value = getattr(node, name, None)
        if isinstance(value, list) and node.__class__ is not ast.Constant:
            value = [v for v in value if not (isinstance(v, ast.stmt) and is_bare_string(v))] \
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
                    value = [v for v in value if not (isinstance(v, ast.stmt) and is_bare_string(v))]
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
