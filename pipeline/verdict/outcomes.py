"""The verdict's outcome: one enum for every module that decides, checks, orders or shows one.

    VerdictOutcome.REPRODUCED == "reproduced"     # a str: written to manifests and JSON as its value
    passed(outcome)                               # exit 0 wherever a verdict decides the exit code

The values are the strings bundles, state files and pages have always held; a bundle's manifest is read back
through `VerdictOutcome(text)`, which refuses any other string.
"""

from __future__ import annotations

from enum import StrEnum


class VerdictOutcome(StrEnum):
    # a full reproduction, best to worst (pipeline/verdict/history.py ranks by this order)
    REPRODUCED = "reproduced"
    WITH_DEVIATIONS = "reproduced-with-deviations"
    NOT_REPRODUCED = "not-reproduced"
    INVALID = "invalid"
    # a smoke run (pipeline/verdict/smoke.py): the record's program with its step count cut
    SMOKE_PASSED = "smoke-passed"
    SMOKE_FAILED = "smoke-failed"

    def __repr__(self) -> str:  # messages quote the outcome as the string it is on disk: 'reproduced'
        return repr(self.value)


FULL = (VerdictOutcome.REPRODUCED, VerdictOutcome.WITH_DEVIATIONS, VerdictOutcome.NOT_REPRODUCED,
        VerdictOutcome.INVALID)
PASSING = frozenset({VerdictOutcome.REPRODUCED, VerdictOutcome.WITH_DEVIATIONS, VerdictOutcome.SMOKE_PASSED})


def passed(outcome: str | None) -> bool:
    return outcome in PASSING
