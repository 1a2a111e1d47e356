"""One comparison of what a record pins with what was found (pipeline.findings.differences), used by the
verdict, a run's probe and an environment manifest."""

from pipeline.findings import Finding, differences
from pipeline.records.model import load_record
from pipeline.registry import Registry


def test_a_deviation_per_pinned_field_that_differs_and_none_for_unpinned_ones():
    want = {"torch": "2.9.0", "triton": "3.4.0", "python": "", "cuda": None}
    got = {"torch": "2.8.0", "triton": "3.4.0", "python": "3.12.1"}
    assert differences("software.differs", want, got) == [
        Finding("software.differs", "deviation", {"field": "torch", "got": "2.8.0", "want": "2.9.0"})]
    assert differences("software.differs", {"triton": "3.4.0"}, {}) == [
        Finding("software.differs", "deviation", {"field": "triton", "got": None, "want": "3.4.0"})]


def test_the_environment_and_the_run_say_the_same_fields_differ():
    """The fallback environment and a run on the same software find the same deviations from the record, as the
    same findings (code, field, values): one comparison, never two sentences to keep in step."""
    from pipeline.env.manifest import load_environment
    from pipeline.probe import RuntimeProbe
    from pipeline.runs.train_plan import host_environment
    from pipeline.workspace import Workspace

    record = load_record(Registry.DEFAULT_RECORD)
    env = load_environment(Workspace.resolve(), "pypi-torch-2.8")
    probe = RuntimeProbe(where="test", python=env.expected["python"], torch=env.expected["torch"],
                         torch_cuda=env.expected["cuda"], triton=env.expected["triton"])
    by_env = [d for d in env.deviations() if d.code == "software.differs"]
    by_run = list(host_environment(record, probe, None).deviations)
    assert by_env == by_run and {d.data["field"] for d in by_run} == {"torch", "torch_cuda"}


def test_a_stored_sentence_of_an_older_version_is_read_as_a_finding_never_dropped():
    from pipeline.findings import deviations_from_list
    from pipeline.verdict.render import render

    stored = ["torch 2.8.0+cu128 instead of the record's 2.9.0", Finding("venv.no_fa3", "deviation",
                                                                        {"environment": "e"}).to_dict()]
    found = deviations_from_list(stored, "lock: deviations")
    assert [d.code for d in found] == ["deviation.text", "venv.no_fa3"]
    assert render(found[0]) == stored[0] and "FlexAttention stand-in" in render(found[1])
