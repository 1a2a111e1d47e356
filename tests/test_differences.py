"""One comparison of what a record pins with what was found (pipeline.findings.differences), used by the
verdict, a run's probe and an environment manifest."""

from pipeline.findings import Finding, differences
from pipeline.records.model import DEFAULT_RECORD, load_record


def test_a_deviation_per_pinned_field_that_differs_and_none_for_unpinned_ones():
    want = {"torch": "2.9.0", "triton": "3.4.0", "python": "", "cuda": None}
    got = {"torch": "2.8.0", "triton": "3.4.0", "python": "3.12.1"}
    assert differences("software.differs", want, got) == [
        Finding("software.differs", "deviation", {"field": "torch", "got": "2.8.0", "want": "2.9.0"})]
    assert differences("software.differs", {"triton": "3.4.0"}, {}) == [
        Finding("software.differs", "deviation", {"field": "triton", "got": None, "want": "3.4.0"})]


def test_the_environment_and_the_run_say_the_same_fields_differ():
    """The fallback environment and a run on the same software name the same differences from the record."""
    from pipeline.env.manifest import load_environment
    from pipeline.runs.stage import _software_deviations
    from pipeline.workspace import Workspace

    record = load_record(DEFAULT_RECORD)
    env = load_environment(Workspace.resolve(), "pypi-torch-2.8")
    found = {"python": env.expected.get("python"), "torch": env.expected.get("torch"),
             "torch_cuda": env.expected.get("cuda"), "triton": env.expected.get("triton")}
    by_env = {line.split(" ")[0].replace("cuda", "torch_cuda") for line in env.deviations() if " instead of " in line}
    by_run = {line.split(":")[0] for line in _software_deviations(record, found)}
    assert by_env == by_run and by_run
