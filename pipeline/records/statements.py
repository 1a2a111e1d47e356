"""A program read as its top-level statements, each distinct one parsed once per process.

    body = statement_body(source)     # the tree's top-level statements (positions within each piece), or None
    text = canonical_body(source)     # identity's canonical text of the module's body, or None

The speedrun's ~170 distinct programs are one file edited record after record: three quarters of their text is
top-level statements (a class, a function, the training loop) that an earlier program already had, byte for
byte. Python's parser building a tree of each whole program was most of a cold import; here a program is cut
into pieces at lines that start a top-level statement, and each distinct piece is parsed once and kept (its
statements and their canonical text, pipeline/records/identity.py), so a program whose pieces were all seen costs
a dictionary look-up per piece.

Why the pieces' statements are the program's: a cut is placed only before a line that starts at column 0 with a
name or `@` (never `else`, `elif`, `except`, `finally`). If each piece parses on its own, no piece ends inside a
string, a bracket or a backslash continuation (its tokens would end unterminated: a SyntaxError), so every cut
is where the whole program's tokenizer starts a logical line at indentation 0, and each piece is a run of whole
statements; a cut inside a statement (between a decorator and its `def`, inside a string) leaves a piece that
does not parse, which is joined with the next one and parsed again. So when every piece parses, the program's
statements are the pieces' statements in order (the same nodes, positions aside). Anything else falls back to
parsing the whole text (which raises the whole program's own error): a piece that still does not parse after
_MAX_MERGED joins, a source whose encoding a cookie or BOM names (only the first piece
would carry it), a `barry_as_FLUFL` future (it changes how later lines tokenize).
"""

from __future__ import annotations

import ast
import re
import warnings

from pipeline.records.canonical import canonical_text, is_bare_string

# a line that may start a top-level statement (see above; a wrong guess costs a fallback, never a wrong tree)
_CUT = re.compile(r"^(?=[A-Za-z_@])(?!(?:else|elif|except|finally)\b)", re.M)
_CUT_BYTES = re.compile(_CUT.pattern.encode(), re.M)
_COOKIE = re.compile(rb"\A(?:[^\n]*\n)?[ \t\f]*#[^\n]*coding[:=]")  # PEP 263, on either of the first two lines
_MAX_MERGED = 16  # pieces one statement may span before the whole text is parsed instead
_MAX_PIECES = 1 << 16  # distinct pieces kept (the whole history has ~3,400): a hostile stream does not grow forever

_pieces: dict[tuple[type, str | bytes], tuple[list[ast.stmt], str] | None] = {}  # None: does not parse alone


def quiet_parse(source: str | bytes) -> ast.Module:
    """ast.parse without the warnings a record's own odd string escapes raise (a backslash-s in a regex): they are
    the program's business, not this tool's. Errors still raise. A piece here, a whole program in identity.py."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return ast.parse(source)


def _parse_piece(piece: str | bytes) -> tuple[list[ast.stmt], str]:
    """(statements, canonical text of those that count, each followed by a comma): raises like ast.parse."""
    body = quiet_parse(piece).body
    return body, "".join(canonical_text(s) + "," for s in body if not is_bare_string(s))


def _read(source: str | bytes) -> list[tuple[list[ast.stmt], str]] | None:
    """Each piece's (statements, canonical text), in order; None when the source must be parsed whole."""
    if isinstance(source, bytes):
        if source.startswith(b"\xef\xbb\xbf") or _COOKIE.match(source) or b"barry_as_FLUFL" in source:
            return None
        found = [m.start() for m in _CUT_BYTES.finditer(source)]
        at = b"@"[0]
    else:
        if "barry_as_FLUFL" in source:
            return None
        found, at = [m.start() for m in _CUT.finditer(source)], "@"
    cuts = [c for i, c in enumerate(found) if not i or source[found[i - 1]] != at]  # a decorator keeps its def
    bounds = ([0] if not cuts or cuts[0] else []) + cuts + [len(source)]
    out, start, end = [], 0, 1
    while start < len(bounds) - 1:
        key = (type(source), source[bounds[start]:bounds[end]])
        entry = _pieces.get(key, ())
        if entry == ():
            try:
                entry = _parse_piece(key[1])
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                entry = None  # remembered too: the next program with this piece joins it without parsing it
            if len(_pieces) >= _MAX_PIECES:
                _pieces.clear()
            _pieces[key] = entry
        if entry is None:
            if end == len(bounds) - 1 or end - start >= _MAX_MERGED:
                return None  # the last piece, or a statement longer than any real one: not read by pieces
            end += 1  # a cut inside a statement (inside a string, before `else:`): the next piece joins
            continue
        out.append(entry)
        start, end = end, end + 1
    return out


def statement_body(source: str | bytes) -> list[ast.stmt] | None:
    """The program's top-level statements as ast.parse(source).body has them (their positions count from their
    own piece), shared with every other program holding the same piece; None: parse the whole text instead."""
    pieces = _read(source)
    return None if pieces is None else [s for body, _ in pieces for s in body]


def canonical_body(source: str | bytes) -> str | None:
    """identity.canonical_text(ast.parse(source)), from the pieces; None: parse the whole text instead."""
    pieces = _read(source)
    if pieces is None:
        return None
    body = "".join(text for _, text in pieces)
    return f"Module(body=[{body}],)" if body else "Module()"
