"""Sentences for findings: the one place where verdict data becomes English.

    render(Finding("time.ratio", "note", {...}))  ->  "mean train time 149.69 s = 1.0000 × the record's ..."

Every finding code the judge emits has a template here. A code this version does not know (a bundle
written by a newer tool) is still shown, as its code and data, never dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from pipeline.findings import Finding


def _num(value, spec: str, missing: str = "—") -> str:
    return missing if value is None else format(value, spec)


def _got(value) -> str:
    return "not in the log" if value is None else str(value)


def _run(d: dict, text: str) -> str:
    return f"{d['run']}: {text}" if d.get("run") else text


def _loss_head(d: dict) -> str:
    sd = f", sd {d['sd']:.4f}" if d.get("sd") is not None else ""
    return f"mean val loss {_num(d.get('mean'), '.4f')} over {d['n']} run(s){sd}"


def _t_test(d: dict) -> str:
    if d.get("p_value") is None:
        alone = f"one run gives no p-value; at least 2 runs are needed for the t-test against {d['target']}"
    elif d.get("reaches"):
        alone = f"p = {d['p_value']:.4f} < {d['p_max']} against {d['target']}: these runs alone reach it"
    else:
        more = (f"{d['runs_needed']} runs at this mean and sd would" if d.get("runs_needed")
                else "no number of runs at this mean would")
        alone = (f"p = {d['p_value']:.3f} against {d['target']}: these runs alone do not reach "
                 f"p < {d['p_max']}; {more}")
    return alone if d.get("evidence") == "own" and not d.get("reaches") else f"{_loss_head(d)}; {alone}"


def _consistency(d: dict) -> str:
    text = (f"losses vs {d['against']}'s published runs: p = {d['p_value']:.3f} ({d['method']})"
            if d.get("p_value") is not None else f"losses vs {d['against']}: {d['method']}")
    if d.get("consistent"):
        return text
    if d.get("required"):
        return text + ": inconsistent"
    return text + f": inconsistent, reported only (the rules require consistency with {', '.join(d['requires'])})"


def _inherited(d: dict) -> str:
    what = "a re-timing of" if d.get("evidence") == "retiming" else "systems-only; it inherits the ML evidence of"
    via = f" (through {', '.join(d['via'])})" if d.get("via") else ""
    source = "losses its README quotes" if d.get("source") == "quoted" else "published runs"
    agree = "consistent with" if d.get("consistent") else "not consistent with"
    return (f"{what} {d['evidence_of']}{via}: these runs are {agree} its {d['n']} {source} "
            f"({d.get('method')}, p = {_num(d.get('p_value'), '.3g')})")


def _time(d: dict) -> str:
    ci = (f" ({d['confidence']:.0%} interval {d['ci_low']:.4f}–{d['ci_high']:.4f})"
          if d.get("ci_low") is not None else "")
    text = f"mean train time {d['mean_s']:.2f} s = {d['ratio']:.4f} × the record's {d['record_mean_s']:.2f} s{ci}"
    if not d.get("comparable"):
        return text + f"; not comparable: {d.get('why_not') or 'the hardware differs from the record'}"
    if d.get("slower"):  # judged on the interval's upper end, not on the mean ratio: say which bound failed
        upper = d.get("ci_high") if d.get("ci_high") is not None else d["ratio"]
        return text + (f"; slower than the record: up to {upper:.4f} × its time, more than the "
                       f"{1 + d['tolerance']:.4f} × its rules allow")
    return text


LOGS_MEAN = "the logs' mean"


def _timed(d: dict, logs: str) -> str:
    """What the claimed time was compared with: the logs' mean (`logs`), or the re-timing its README declares."""
    return f"the declared re-timing {', '.join(d['retimed'])}'s time" if d.get("retimed") else logs


TEMPLATES: dict[str, Callable[[dict], str]] = {
    # a run that cannot be judged (severity problem)
    "run.no_log": lambda d: _run(d, f"no log at {d['log']}"),
    "run.status": lambda d: _run(d, f"run status is {d['status']}"
                                 + (f" (exit code {d['exit_code']})" if d.get("exit_code") is not None else "")
                                 + (f": {d['failure']}" if d.get("failure") else "")
                                 + (f" ({d['shared_gpu']})" if d.get("shared_gpu") else "")),
    "run.log": lambda d: _run(d, d["detail"]),
    "run.duplicate_val": lambda d: _run(d, d["detail"]),
    "run.non_finite": lambda d: _run(d, f"{d['detail']}: a run with non-finite losses or times is not judged"),
    "run.time_not_positive": lambda d: _run(d, f"final train time {d['train_time_ms']} ms is not above zero"),
    "run.schedule": lambda d: _run(d, f"scheduled {d['scheduled']} steps, the record runs {d['record_steps']}"),
    "program.different": lambda d: _run(d, f"program: its code differs from the record's program (fingerprint "
                                           f"{str(d['fingerprint'])[:17]}… vs pinned {str(d['pinned'])[:17]}…)"),
    "program.unparsable": lambda d: _run(d, f"program: the program text is not valid Python ({d['error']})"),
    # judged, but not under the record's conditions (severity deviation)
    "program.absent": lambda d: "program text absent: code identity unverified "
                                f"({d['runs']} run(s) whose log carries only the run output)",
    "program.unpinned": lambda d: "program: not byte-identical to the record's programs, and the record pins no "
                                  "code fingerprint to compare with",
    "trainer.native": lambda d: "trainer: native (train/), not the record's program",
    "trainer.record": lambda d: "trainer: the record's program, not the native trainer (train/) this record ran",
    "schedule.differs": lambda d: f"schedule: {d['scheduled']} steps (record: {d['record_steps']})",
    "hardware.differs": lambda d: f"hardware {d['field']}: {_got(d.get('got'))} (record: {d['want']})",
    "software.differs": lambda d: f"software {d['field']}: {_got(d.get('got'))} (record: {d['want']})",
    # the record's claims (failure when not met, note otherwise)
    "loss.above_target": lambda d: f"{_loss_head(d)} is above the target {d['target']}",
    "loss.t_test": _t_test,
    "loss.consistency": _consistency,
    "loss.systems_only": lambda d: f"{d['record']} is a systems-only record whose ML was established by "
                                   f"{d.get('parent') or 'its parent'}; consistent losses are what it requires",
    "loss.quoted": lambda d: ("loss evidence quoted from the record's README, not recomputed: "
                              + (f"p = {d['p_value']:.2g}" + (f" over {d['n']} runs" if d.get("n") else "")
                                 if d.get("p_value") is not None else d.get("statement", "")) + f" ({d.get('source')})"
                              + ("" if d.get("p_value") is None or d["p_value"] < d["p_max"]
                                 else f"; not below {d['p_max']}")),
    "loss.parent_unknown": lambda d: (f"systems-only: the parent {d.get('parent') or '(none recorded)'} has fewer "
                                      "than two published losses in this registry, so its evidence could not be "
                                      "checked"),
    "loss.baseline": lambda d: (f"{_loss_head(d)}: {d['record']} is its track's baseline, the run the target "
                                f"{d['target']} was taken from; its loss is the reference, not a claim"),
    "loss.pooled": lambda d: (f"systems-only: these runs together with {d['parent']}'s give p = {d['p_value']:.3g}, "
                              f"not below {d['p_max']}"),
    "loss.parent_differs": lambda d: (f"losses differ from the parent {d['parent']}'s (Welch p = {d['p_value']:.3g}): "
                                      "the change may touch the numerics"),
    "loss.quoted_differs": lambda d: (f"these runs differ from the {d['n']} losses the README quotes "
                                      f"(p = {_num(d.get('p_value'), '.3g')})"),
    "loss.inherited": _inherited,
    "time.ratio": _time,
    "time.unlogged": lambda d: f"time: the {d['runs']} run(s)' logs print no train time (llm.c format)",
    "claim.time": lambda d: f"claimed time {d['claimed_s']:.2f} s; the logs' mean {d['mean_s']:.2f} s "
                            f"({d['ratio']:.3f} x)",
    "claim.time_differs": lambda d: (f"the table claims {d['claimed_s']:.2f} s; {_timed(d, LOGS_MEAN)} is "
                                     f"{d['mean_s']:.2f} s ({d['ratio']:.3f} x, beyond {d['tolerance']:.0%}): the "
                                     "claim comes from a timing these logs do not hold"),
    "claim.time_implausible": lambda d: (f"{_timed(d, LOGS_MEAN + ' time')} {d['mean_s']:.2f} s is {d['ratio']:.2f} x "
                                         f"the claimed {d['claimed_s']:.2f} s: these are not the record's timed runs"),
    "claim.time_unlogged": lambda d: f"the logs print no train time; the table claims {d['claimed_s']:.1f} s",
    # a re-timing its README declares (pipeline/verdict/history.py): the official time, the loss on the other runs
    "claim.retimed": lambda d: (f"claimed time {d['claimed_s']:.2f} s; the re-timing its README declares, "
                                f"{', '.join(d['retimed'])} ({', '.join(d.get('ran') or ()) or 'same versions'}), "
                                f"took {d['mean_s']:.2f} s ({d['ratio']:.3f} x): the record's official time; "
                                f"its loss is judged on the other {d['runs']} run(s)"
                                + (f" ({d['runs_ran']})" if d.get("runs_ran") else "")),
    "check.log_missing": lambda d: d["detail"],
    # smoke runs (pipeline/verdict/smoke.py)
    "smoke.program": lambda d: _run(d, f"smoke cut: {d['issue']}"),
    "smoke.learning": lambda d: _run(d, f"smoke: val loss {_num(d.get('first_val_loss'), '.4f')} -> "
                                        f"{_num(d.get('final_val_loss'), '.4f')} over {d.get('steps')} steps"
                                        + ("" if (d.get('final_val_loss') or 0) < (d.get('first_val_loss') or 0)
                                           else ": the model did not learn")),
    "kernels.hub_standin": lambda d: "kernels hub: the program's get_kernel(...) was answered by repro's local "
                                     "stand-in (pipeline/runs/hub_standin), never the hub",
    "inductor.fp32_floats": lambda d: "inductor: the program's Python float kernel arguments were typed fp32, as "
                                      "the record's torch typed them, not fp64 as this torch does (torch._inductor."
                                      "config._use_fp64_for_unbacked_floats = False, pipeline/runs/float_args.py)",
    "fp8.aligned_scales": lambda d: "FP8 scales: each one-element scale the program handed torch._scaled_mm at an "
                                    "unaligned address went to cuBLAS as its own tensor (the same value), as this "
                                    "node's cuBLAS needs (pipeline/runs/fp8_scales.py)",
    "attention.fa3_standin": lambda d: "attention: FA3 could not be imported; the record's program called repro's "
                                       "FlexAttention stand-in (pipeline/runs/fa3_standin) in its place",
    "environment.unpinned": lambda d: f"environment: the host's own Python, not a build of {d['record_environment']}'s "
                                      "lock (--python-env system)",
    "environment.fallback": lambda d: f"environment {d['environment']} stands in for the record's "
                                      f"{d['record_environment']}: {d['why']}",
    "venv.python_differs": lambda d: f"venv: Python {d['got']} instead of environment {d['environment']}'s {d['want']}",
    "venv.no_fa3": lambda d: "venv: FA3 is not installed (no flash_attn wheel in a wheelhouse, no --build-fa3); the "
                             "record's program runs on the FlexAttention stand-in",
    "deviation.text": lambda d: d["text"],  # as an older version recorded it (pipeline/findings.py RECORDED_TEXT)
    "environment.stand_in": lambda d: (f"PyTorch {d['torch']} ({d['environment']}) stands in for the record's "
                                       f"{d.get('record_torch') or 'unknown version'}: no environment pins the "
                                       "record's build, or it can no longer be had"),
    "environment.lock_resolved_on_node": lambda d: f"lock of {d['environment']} resolved on this node, {d['date']} "
                                                   f"(trust on first use; lock sha256 {d['lock_sha256'][:12]})",
}


def render(finding: Finding) -> str:
    """One sentence for one finding."""
    template = TEMPLATES.get(finding.code)
    if template is None:
        return f"{finding.code} ({finding.severity}): {json.dumps(dict(finding.data), sort_keys=True)}"
    try:
        return template(dict(finding.data))
    except (KeyError, TypeError, ValueError):  # data from a file that lacks what the template needs
        return f"{finding.code} ({finding.severity}): {json.dumps(dict(finding.data), sort_keys=True)}"


def render_reason(finding: Finding) -> str:
    """As listed under a verdict: deviations carry their label."""
    text = render(finding)
    return f"deviation: {text}" if finding.severity == "deviation" else text


def hardware_line(hardware: dict, software: dict) -> str:
    """One run's machine, as `repro verify` prints it: GPUs when there are, else the CPU (never 'None x None')."""
    if hardware.get("gpu_count"):
        machine = (f"{hardware['gpu_count']} x {hardware.get('gpu_model')}, driver {hardware.get('driver')}, "
                   f"CUDA {hardware.get('cuda_driver')}")
    else:
        machine = f"CPU {hardware.get('cpu_model') or '(model not recorded)'}"
    soft = [f"Python {software['python']}" if software.get("python") else None,
            (f"PyTorch {software['torch']}" + (f" (CUDA {software['torch_cuda']})"
                                                if software.get("torch_cuda") not in (None, "None") else ""))
            if software.get("torch") else None,
            f"Triton {software['triton']}" if software.get("triton") not in (None, "None") else None]
    soft_text = ", ".join(s for s in soft if s)
    return f"hardware: {machine}" + (f"; software: {soft_text}" if soft_text else "")
