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
