"""The smoke cut never corrupts a program (issue 38): it edits the syntax tree's own positions in the bytes as
read, whatever the line endings, parses the patched program again and refuses unless exactly the declared
fields changed. Deep or odd programs get a clear refusal (CheckFailed), never a traceback."""

from __future__ import annotations

import pytest

from pipeline.errors import CheckFailed
from pipeline.records.identity import parse_program
from pipeline.records.smoke_cut import class_fields, restore, smoke_cut

FIELDS = (b"    num_iterations: int = 1640 # steps\r\n    iteration_extension = 40 # more\n"
          b"    val_tokens: int = 10485760\n")


def _values(program: bytes) -> dict[str, str]:
    return {name: hits[0].was for name, hits in class_fields(program).items()}


def test_a_lone_cr_in_a_comment_does_not_shift_the_cut():
    program = b"# a note\r# written on an old Mac\nclass Hyperparameters:\n" + FIELDS
    cut = smoke_cut(program, 40, 524288)
    assert [(c["field"], c["was"], c["now"]) for c in cut.listing] == [
        ("num_iterations", "1640", "40"), ("iteration_extension", "40", "2"), ("val_tokens", "10485760", "524288")]
    patched = cut.apply(program)
    assert patched == (b"# a note\r# written on an old Mac\nclass Hyperparameters:\n"
                       b"    num_iterations: int = 40 # steps\r\n    iteration_extension = 2 # more\n"
                       b"    val_tokens: int = 524288\n")
    assert _values(patched) == {"num_iterations": "40", "iteration_extension": "2", "val_tokens": "524288"}
    assert restore(patched, cut.listing) == program  # every other byte, the CRs too, as it was


def test_cr_only_line_endings_are_cut_in_place():
    program = b"import os\rclass Hyperparameters:\r    num_iterations: int = 1640\r    iteration_extension = 40\r"
    patched = smoke_cut(program, 20).apply(program)
    assert patched == b"import os\rclass Hyperparameters:\r    num_iterations: int = 20\r    iteration_extension = 2\r"
    parse_program(patched)


def test_a_400_factor_validation_batch_is_worked_out_without_recursion():
    batch = b"1 * " * 400 + b"1048576"
    program = b"class Hyperparameters:\n    num_iterations = 1640\n    val_tokens = 10485760\n" \
              b"    val_batch_size: int = " + batch + b"\n"
    cut = smoke_cut(program, 40, 524288)
    assert {c["field"]: c["now"] for c in cut.listing}["val_batch_size"] == "524288"
    assert _values(cut.apply(program))["val_batch_size"] == "524288"


@pytest.mark.parametrize("program, says", [
    (b"class Hyperparameters:\n    num_iterations = " + b"(" * 300 + b"1" + b")" * 300 + b"\n", "cannot be parsed"),
    (b"class Hyperparameters:\n    num_iterations = 1640\n    x = " + b"-" * 200_000 + b"1\n", "nests too deeply"),
    (b"# -*- coding: latin-1 -*-\nclass Hyperparameters:\n    s = '\xe9'; num_iterations = 1640\n", "not UTF-8"),
    # Python's offsets on a first line behind a byte-order mark do not fit the bytes: refused, not corrupted
    (b"\xef\xbb\xbfclass Hyperparameters: num_iterations = 1640\n", "positions do not fit"),
])
def test_deep_or_odd_programs_are_refused_clearly(program, says):
    with pytest.raises(CheckFailed, match=says):
        smoke_cut(program, 40)


def test_a_forged_listing_that_would_write_more_than_a_value_is_refused():
    program = b"class Hyperparameters:\n    num_iterations = 1640\n    val_loss_every = 125\n"
    with pytest.raises(CheckFailed, match="is not an expression"):
        restore(program, [{"field": "num_iterations", "was": "1640\n    val_loss_every = 5"}])
