from pipeline.records.identity import fingerprint, identify, sha256_bytes
from tests.logfactory import PROGRAM


def test_comments_and_docstrings_do_not_change_the_fingerprint():
    recommented = PROGRAM.replace("# learning rate", "# the step size, tuned in 2025").replace(
        '"""Run the steps."""', '"""Loop over the steps,\n    accumulating."""\n    # comment inside')
    assert recommented != PROGRAM
    assert fingerprint(recommented) == fingerprint(PROGRAM)


def test_a_removed_docstring_is_the_same_program():
    assert fingerprint(PROGRAM.replace('    """Run the steps."""\n', "")) == fingerprint(PROGRAM)


def test_any_code_change_changes_the_fingerprint():
    base = fingerprint(PROGRAM)
    for old, new in [("LR = 0.05", "LR = 0.06"), ("s * LR", "s + LR"), ("range(steps)", "range(steps + 1)"),
                     ("total = 0", "total = 0.0"), ("import os", "import sys")]:
        assert old in PROGRAM
        assert fingerprint(PROGRAM.replace(old, new)) != base, (old, new)


def test_identify_statuses():
    code = PROGRAM.encode()
    pinned = fingerprint(code)
    accepted = frozenset({sha256_bytes(code)})
    assert identify(code, accepted, pinned).status == "identical"
    assert identify(code.replace(b"# learning rate", b"# lr"), accepted, pinned).status == "same-code"
    assert identify(code.replace(b"0.05", b"0.5"), accepted, pinned).status == "different"
    assert identify(code.replace(b"0.05", b"0.5"), accepted, "").status == "unpinned"
    assert identify(b"def broken(:\n", accepted, pinned).status == "unparsable"
    assert identify(None, accepted, pinned).status == "absent"


def _iterative_text(tree) -> str:
    from pipeline.records.canonical import _canonical

    parts: list[str] = []
    _canonical(tree, parts)
    return "".join(parts)


def test_the_recursive_walk_writes_the_iterative_walks_text():
    """canonical_text walks recursively (fast); the iterative walk is the reference and the fallback."""
    from pathlib import Path

    from pipeline.records.identity import canonical_text, parse_program

    programs = sorted((Path(__file__).parent / "fixtures" / "record-program").rglob("*.py"))
    assert programs
    for source in [PROGRAM.encode(), *(p.read_bytes() for p in programs),
                   b"d = {**a, 'k': None}\nglobal g\ndef f(*, a=1, **k):\n    'doc'\n    return f'{a!r:>{k}}', u'x'\n"]:
        tree = parse_program(source)
        assert canonical_text(tree) == _iterative_text(tree)


def test_a_tree_too_deep_for_recursion_is_written_by_the_iterative_walk():
    from pipeline.records.identity import canonical_text, parse_program

    tree = parse_program("x = " + "+".join(["1"] * 2000))  # deeper than the recursion limit
    assert canonical_text(tree) == _iterative_text(tree)
    assert fingerprint("x = " + "+".join(["1"] * 2000)).startswith("ast1-")


def test_walk_lists_ast_walks_nodes_in_its_order():
    import ast
    from pathlib import Path

    from pipeline.records.identity import parse_program, shared_tree, walk

    for path in sorted((Path(__file__).parent / "fixtures" / "record-program").rglob("*.py")):
        tree = parse_program(path.read_bytes())
        assert [id(n) for n in walk(tree)] == [id(n) for n in ast.walk(tree)]
        assert walk(tree) is walk(tree)  # listed once per tree
        shared = shared_tree(path.read_bytes() + b"\nclass Extra:\n    x = [1, (2, f'{y}')]\n")  # statements shared
        assert [id(n) for n in walk(shared)] == [id(n) for n in ast.walk(shared)]
        assert [id(n) for n in walk(shared.body[-1])] == [id(n) for n in ast.walk(shared.body[-1])]
