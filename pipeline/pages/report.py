"""`repro report --html`: one self-contained HTML file for a bundle or for runs on disk.

    html = render_report(report_input, plotly_library())

Sections, top to bottom: the verdict and its reasons with what was proven (hashes, signature); the runs;
validation loss against step and against time beside the record's published runs; step time per window
phase; hardware and software against the record's, deviations highlighted; environment; program identity;
the bundle's members. The chart library is inlined once, so the file opens offline from anywhere.
Nothing in the page depends on when it was written: the same bundle gives the same bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.pages import charts
from pipeline.pages.page import ChartLibrary, badge, data_block, esc, fmt, inline_script, page, table
from pipeline.pages.phases import phase_times
from pipeline.pages.report_input import ReportInput
from pipeline.verdict.render import render

if TYPE_CHECKING:
    from pipeline.bundle.verify import BundleCheck


def _chart(element_id: str, figure: dict) -> str:
    return f'<div class="chart" id="{element_id}" data-figure="{element_id}-data"></div>' \
           + data_block(f"{element_id}-data", figure)


def _header(r: ReportInput) -> str:
    i = r.check
    check = "" if i is None else (f'<span class="badge {"ok" if i.ok else "bad"}">'
                                  f'{"bundle verified" if i.ok else "bundle does NOT verify"}</span>')
    signature = {"valid": "ok", "invalid": "bad", "absent": "none", "unchecked": "warn"}.get(r.signature, "none")
    lines = [f"<h1>{esc(r.record.name)}: reproduction report</h1>",
             f'<p class="note">{esc(r.title)} · {esc(r.record.title)} · target validation loss ≤ '
             f"{esc(r.record.rules.target_val_loss)} (one-sided t-test p &lt; {esc(r.record.rules.p_value_max)}; "
             f"evidence: {esc(r.record.rules.loss_evidence)}; rules v{esc(r.record.rules.version)})</p>",
             f'<h2 id="verdict">Verdict</h2><p>{badge(r.verdict.outcome)} {check} '
             f'<span class="badge {signature}" id="signature">signature: {esc(r.signature)}</span></p>',
             f"<p><b>What was proven:</b> {esc(r.proven)}</p>",
             "<ul>" + "".join(f"<li>{esc(reason)}</li>" for reason in r.verdict.reasons) + "</ul>"]
    if r.attempts:
        lines.append(f'<p id="attempts"><b>{len(r.attempts)} attempt(s) kept aside, outside the verdict:</b> '
                     + "; ".join(f"{esc(a.id)} {esc(a.status)} at step {esc(a.steps)}" for a in r.attempts)
                     + " (listed under Runs)</p>")
    if i is not None and i.problems:
        lines.append("<p><b>Problems the bundle check found:</b></p><ul>"
                     + "".join(f"<li>{esc(str(p))}</li>" for p in i.problems) + "</ul>")
    if i is not None and i.notes:
        lines.append("<ul class=\"note\">" + "".join(f"<li>{esc(n)}</li>" for n in i.notes) + "</ul>")
    return "".join(lines)


def _runs(r: ReportInput) -> str:
    rows, classes = [], []
    for item, run in zip(r.runs, r.verdict.runs):
        step_avg = item.log.steps[-1].step_avg_ms if item.log.steps else None
        steps = f"{run.last_step}/{run.scheduled_steps or '?'}"
        rows.append([esc(item.label), esc(run.status), esc(run.trainer), esc(steps),
                     fmt(run.final_val_loss, ".4f"), fmt(run.train_time_s, ".3f"), fmt(step_avg, ".2f"),
                     fmt(run.peak_allocated_mib, "d"), esc("; ".join(run.problems) or "")])
        classes.append("problem" if run.problems else "")
    for a in r.attempts:  # every attempt is shown: a reader sees what was tried, not only what counted
        exit_code = "" if a.exit_code is None else f" (exit {a.exit_code})"
        why = "; ".join(render(f) for f in a.findings)  # its findings, as sentences
        rows.append([esc(a.id), esc(a.status + exit_code), "", esc(a.steps), "—", "—", "—", "—",
                     esc(f"attempt kept aside, not judged: {why}" if why else "attempt kept aside, not judged")])
        classes.append("attempt")
    loss, time = r.verdict.loss, r.verdict.time
    summary = []
    if loss is not None:
        summary.append(f"mean val loss {fmt(loss.mean, '.4f')}, sd {fmt(loss.sd, '.4f')}, "
                       f"p = {fmt(loss.p_value, '.4g')} over {loss.n} run(s)")
    if time is not None:
        summary.append(f"mean train time {fmt(time.mean_s, '.3f')} s = {time.ratio:.4f} × the record's")
    return ('<h2 id="runs">Runs</h2>' + table(["run", "status", "trainer", "steps", "final val loss", "train time (s)",
                                               "step avg (ms)", "peak MiB", "problems"], rows, classes)
            + (f"<p>{esc('; '.join(summary))}</p>" if summary else ""))


def _phase_table(items: list) -> str:
    """A row per run: each phase's mean ms per step, with the phase's steps (they differ with the schedule)."""
    rows = []
    for item in items:
        phases = phase_times(item.log.steps, item.log.scheduled_steps)
        if phases:
            rows.append([esc(item.label)] + [f"{fmt(p.ms_per_step, '.2f')} <span class=\"note\">(steps "
                                             f"{p.first_step}–{p.last_step})</span>" for p in phases])
    return table(["run", "phase 1 (ms/step)", "phase 2", "phase 3"], rows) if rows else "<p>No step times.</p>"


def _plots(r: ReportInput) -> str:
    ours, published = list(r.runs), list(r.published)
    return ('<h2 id="loss">Validation loss</h2>'
            f'<p class="note">Our runs in colour; the record\'s in grey, from {esc(r.published_source)}. '
            "Hover for a run's values; click a legend entry to hide it, double-click to show it alone.</p>"
            + _chart("chart-loss-step", charts.val_loss(r.record, ours, published, "step"))
            + _chart("chart-loss-time", charts.val_loss(r.record, ours, published, "time"))
            + '<h2 id="phases">Step time per window phase</h2>'
            + _chart("chart-phases", charts.phase_bars(ours, published)) + _phase_table(ours + published))


def _machine(r: ReportInput) -> str:
    """Each compared field: the record's value and each run's, a run's cell marked where it deviates."""
    record, runs = r.record, r.verdict.runs
    fields = [("hardware", k, getattr(record.hardware, k, "")) for k in ("gpu_model", "gpu_count", "driver",
                                                                          "cuda_driver", "cpu_model")]
    fields += [("software", k, getattr(record.software, k, "")) for k in ("python", "torch", "torch_cuda", "triton")]
    compared = set(record.rules.compare_hardware) | set(record.rules.compare_software)
    rows, labels = [], [item.label for item in r.runs]
    for kind, key, want in fields:
        cells = [esc(kind), esc(key), f"<code>{esc(want or '—')}</code>"]
        for run in runs:
            got = (run.hardware if kind == "hardware" else run.software).get(key)
            differs = key in compared and want not in ("", None) and got != want
            cells.append(f'<code class="{"deviation" if differs else ""}">{esc(got)}</code>'
                         + (" ⚠ deviation" if differs else ""))
        rows.append(cells)
    classes = ["deviation" if any("⚠" in c for c in row) else "" for row in rows]
    deviations = r.verdict.deviations
    env_rows = [[esc(k), f"<code>{esc(v)}</code>"] for k, v in r.environment]
    return ('<h2 id="machine">Hardware and software</h2>'
            + table(["", "field", "record", *labels], rows, classes)
            + ("<p><b>Deviations from the record:</b></p><ul>" + "".join(f"<li>{esc(d)}</li>" for d in deviations)
               + "</ul>" if deviations else "<p>No deviation from the record.</p>")
            + '<h2 id="environment">Environment</h2>' + table(["what", "value"], env_rows))


def _program(r: ReportInput) -> str:
    pin = r.record
    accepted = sorted(pin.accepted_program_sha256)
    rows = [[esc(p.run), esc(p.trainer), esc(p.status), *(f"<code>{esc(v)}</code>" for v in (p.source, p.sha256,
                                                                                          p.fingerprint))]
            for p in r.program]
    members = "".join(f"<tr><td><code>{esc(name)}</code></td><td><code>{esc(digest)}</code></td></tr>"
                      for name, digest in r.members)
    return ('<h2 id="program">Program identity</h2>'
            f"<p>The record pins fingerprint <code>{esc(pin.program.fingerprint or 'none')}</code> and accepts "
            f"{len(accepted)} program sha256: " + ", ".join(f"<code>{esc(a)}</code>" for a in accepted) + "</p>"
            + table(["run", "trainer", "identity", "program file", "sha256", "fingerprint"], rows)
            + (f'<h2 id="members">Bundle members</h2><details><summary>{len(r.members)} files, each with its sha256 '
               "from SHA256SUMS</summary><table><tbody>" + members + "</tbody></table></details>" if r.members else ""))


def render_unverified(i: BundleCheck) -> str:
    """A bundle that fails its check: what failed, and no verdict, run, time or chart from inside it. Its title
    is the bundle's file name (its manifest is not trusted)."""
    title, signature = Path(i.path).name, i.signature.status
    body = (f"<h1>{esc(title)}: bundle does NOT verify</h1>"
            '<p><span class="badge bad" id="check">bundle does NOT verify</span> '
            f'<span class="badge {"bad" if signature == "invalid" else "none"}" id="signature">'
            f"signature: {esc(signature)}</span></p>"
            "<p>Nothing inside this bundle is shown: its verdict, runs and times are not evidence until "
            "<code>repro bundle verify</code> passes.</p>"
            "<p><b>Problems the bundle check found:</b></p><ul>"
            + "".join(f"<li>{esc(str(p))}</li>" for p in i.problems) + "</ul>")
    if i.notes:
        body += "<ul class=\"note\">" + "".join(f"<li>{esc(n)}</li>" for n in i.notes) + "</ul>"
    return page(f"{title}: bundle does NOT verify", body, "")


def render_report(r: ReportInput, library: ChartLibrary) -> str:
    body = _header(r) + _runs(r) + _plots(r) + _machine(r) + _program(r)
    body += f'<p class="note">Charts: {esc(library.name)} {esc(library.version)} (embedded, sha256 ' \
            f"<code>{esc(library.sha256)}</code>).</p>"
    return page(f"{r.record.name}: reproduction report", body, inline_script(library))
