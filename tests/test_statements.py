"""A program read by its top-level statements (pipeline/records/statements.py) gives the whole parse's tree and
fingerprint, or declines; never another tree."""

import ast
from pathlib import Path

import pytest

from pipeline.records import statements
from pipeline.records.canonical import canonical_text
from pipeline.records.identity import fingerprint, parse_program, shared_tree

FIXTURES = Path(__file__).parent / "fixtures"

TRICKY = [
    b"@dataclass\nclass H:\n    a: int = 1\n\n@torch.compile\n@other(\n    x=1)\ndef f():\n    pass\n",
    b'x = """\nfoo = 1\ndef g(): pass\n"""\ny = 2\n',  # code at column 0 inside a string
    b"KERNEL = '''\nimport os\n'''\n'''doc'''\nz = 1\n",
    b"if a:\n    b = 1\nelse:\n    b = 2\ntry:\n    pass\nexcept E:\n    pass\nfinally:\n    pass\n",
    b"for i in x:\n    pass\nelse:\n    pass\nwhile y:\n    break\n",
    b"v = (1,\n2)\nw = 3 \\\n+ 4\nu = [\nq for q in r]\n",
    b"# comment\n\n\n'''module doc'''\nimport os\n",
    b"",
    b"def f():\n\tif x:\n\t\treturn 1\ng = f\n",
]
BROKEN = [
    b"a = 1\nb = 2\n/workspace/log/6d5b12b0.txt",  # the last piece alone does not parse: the whole does not either
    b"a = 1\ndef f(:\n    pass\nc = 3\n",
    b"x = '''\nunterminated\ny = 1\n",
    b"@decorator\n",
]


def _same(source) -> None:
    whole = ast.dump(parse_program(source), include_attributes=False)
    assert ast.dump(shared_tree(source), include_attributes=False) == whole
    body = statements.statement_body(source)
    if body is not None:
        assert ast.dump(ast.Module(body=body, type_ignores=[]), include_attributes=False) == whole
    text = statements.canonical_body(source)
    assert text is None or text == canonical_text(parse_program(source))


@pytest.mark.parametrize("source", TRICKY)
def test_pieces_give_the_whole_programs_tree_and_text(source):
    _same(source)
    _same(source.decode())
    assert statements.statement_body(source) is not None  # read by pieces, not by the fallback


def test_every_program_at_hand_reads_the_same_by_pieces():
    programs = sorted((FIXTURES / "record-program").rglob("*.py"))
    assert programs
    for path in programs:
        _same(path.read_bytes())
        assert statements.statement_body(path.read_bytes()) is not None


@pytest.mark.parametrize("source", BROKEN)
def test_a_program_that_does_not_parse_is_refused_as_the_whole_parse_refuses_it(source):
    with pytest.raises(SyntaxError):
        parse_program(source)
    assert statements.statement_body(source) is None
    with pytest.raises(SyntaxError):
        shared_tree(source)
    with pytest.raises(SyntaxError):
        fingerprint(source)


def test_an_encoding_cookie_or_bom_is_parsed_whole():
    latin = "# -*- coding: latin-1 -*-\nx = 1\ny = 'é'\n".encode("latin-1")
    assert statements.statement_body(latin) is None
    assert ast.dump(shared_tree(latin), include_attributes=False) == ast.dump(parse_program(latin),
                                                                              include_attributes=False)
    assert statements.statement_body(b"\xef\xbb\xbfx = 1\ny = 2\n") is None


def test_a_piece_seen_before_is_not_parsed_again():
    shared = b"def shared_piece_for_the_test(a):\n    return a * 2\n"
    statements.statement_body(b"x = 1\n" + shared)
    before = statements._pieces[(bytes, shared)]
    body = statements.statement_body(b"y = 2\n" + shared)
    assert body[-1] is before[0][0]  # the very node, not a parse of it
    assert fingerprint(b"x = 1\n" + shared) != fingerprint(b"y = 2\n" + shared)
