"""What a command ends with: one exit code, mapped in one place (pipeline.cli.main).

A command either returns an `Outcome` (a check ran: it said yes or no) or raises a ReproError (what failed
and how to fix it; pipeline/errors.py names each error's code). Returning nothing means success. Only
`pipeline.cli.main` turns either into the process's exit status, so the codes below are the whole table
the README documents.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    CHECK_SAID_NO = 1  # a check ran to completion and its answer is no
    USAGE = 2  # click's own: an unknown option, a missing argument, a value out of range
    BAD_INPUT = 3  # a manifest, log, file or option value is wrong
    MISSING = 4  # something the tool needs is not on this machine (Docker daemon, GPU, a source)
    RUN_FAILED = 5  # a training run or an image build failed
    INTERRUPTED = 130  # Ctrl-C or SIGTERM
    OUTPUT_CLOSED = 141  # the reader of the output left (`| head`): 128 + SIGPIPE, as a shell reports it


@dataclass(frozen=True)
class Outcome:
    code: ExitCode = ExitCode.OK

    @classmethod
    def check(cls, answer_is_yes: bool) -> Outcome:
        """A check's answer: 0 for yes, 1 for no."""
        return cls(ExitCode.OK if answer_is_yes else ExitCode.CHECK_SAID_NO)


def exit_code_of(result: object) -> int:
    """A command's return value as its exit code: an Outcome's, the code click returns for an Exit it caught
    (--help, or the group turning an Outcome into one), else success."""
    if isinstance(result, Outcome):
        return result.code
    return result if isinstance(result, int) and not isinstance(result, bool) else ExitCode.OK
