"""Judge HostFacts against a record's node: a pure function, one Check per question.

    checks = run_checks(facts, load_record("2025-09-23_MuonCustomSizing"), runtime="host")
    outcome(checks, strict=False)  # "pass", "warn" or "fail"

Statuses: `fail` = a run here would be broken or its numbers untrustworthy (no GPU, MIG, uncorrected
ECC errors, hardware slowdown, no room for the data, no usable runtime); `warn` = a run works but its
time is not comparable to the record's (another GPU model, fewer GPUs, PCIe, other software), or
something that matters could not be read; `skip` = the question does not apply here or the source
does not show it; `pass` = as on the record's node. Every check says what it means for the time.
"""

from __future__ import annotations

from pipeline.preflight.checks_gpu import GPU_CHECKS, check_gpus_visible
from pipeline.preflight.checks_node import NODE_CHECKS
from pipeline.preflight.facts import Check, HostFacts
from pipeline.records.model import Record

STATUSES = ("pass", "warn", "fail", "skip")


# What a run log's header cannot answer: judged only on a live node or saved outputs.
NODE_ONLY = ("cpu", "disk_data", "disk_runs", "disk_image", "shm", "docker")


def run_checks(facts: HostFacts, record: Record, runtime: str, from_log: bool = False) -> tuple[Check, ...]:
    checks = [check_gpus_visible(facts, record)]
    for check in GPU_CHECKS:
        # Without a GPU each GPU question has no answer; gpus_visible already failed and says why.
        checks.append(check(facts, record) if facts.gpus else
                      Check(check.__name__.removeprefix("check_"), "skip", "no GPU", "see gpus_visible"))
    for check in NODE_CHECKS:
        name = check.__name__.removeprefix("check_")
        checks.append(Check(name, "skip", "a run log's header does not show it", "unknown") if from_log and
                      name in NODE_ONLY else check(facts, record, runtime))
    return tuple(checks)


def outcome(checks: tuple[Check, ...], strict: bool) -> str:
    """'fail' if any check failed (or, with strict, warned); 'warn' if any warned; else 'pass'."""
    statuses = {c.status for c in checks}
    if "fail" in statuses or (strict and "warn" in statuses):
        return "fail"
    return "warn" if "warn" in statuses else "pass"
