"""One record's page of the site: its verdict on its own logs, its runs, the logs left out and why, its
parent, its environment, and a link to its upstream folder at the pinned commit."""

from __future__ import annotations

from pipeline.pages.page import badge, data_block, esc, fmt, page, table, words
from pipeline.pages.site_inputs import CheckRow, PlanRow, SiteRecord
from pipeline.records.eras import UPSTREAM_WORDS


def environment_cell(s: SiteRecord) -> str:
    if not s.environment:
        return '<span class="badge bad">none</span>'
    kind = "exact" if s.environment_exact else f"deviation: {s.environment_kind}"
    tone = "ok" if s.environment_exact else "warn"
    return f'<code class="nowrap">{esc(s.environment)}</code> <span class="badge {tone}">{words(kind)}</span>'


def plan_cell(plan: PlanRow | None, short: bool = False) -> str:
    """The plan's answer; in the index (`short`) its reason is cut to a line, whole on hover and on the page."""
    if plan is None:
        return '<span class="badge none">not planned</span>'
    reason = plan.reason if not short or len(plan.reason) <= SHORT else plan.reason[:SHORT - 1].rstrip() + "…"
    return f'<span class="badge {"ok" if plan.runnable else "bad"}">{"yes" if plan.runnable else "no"}</span> ' \
           f'<span class="note" title="{esc(plan.reason)}">{words(reason)}</span>'


SHORT = 70


def upstream_link(s: SiteRecord) -> str:
    up = s.record.upstream
    if not (up.commit and up.folder and up.repository.startswith(("https://", "http://"))):
        return f"{esc(up.repository)} {esc(up.folder)} (no pinned commit)"
    url = f"{up.repository.rstrip('/')}/tree/{up.commit}/{up.folder}"
    return f'<a href="{esc(url)}">{esc(up.folder)} at {esc(up.commit[:12])}</a>'


def _verdict(check: CheckRow | None) -> str:
    if check is None:
        return (f"<p>{badge(None)} This record's own logs were not checked (no row from <code>repro records "
                "check</code>).</p>")
    facts = (f"rule {check.rule or '—'}; mean loss {fmt(check.mean_loss, '.4f')}, p = {fmt(check.p, '.4g')}; "
             f"mean time {fmt(check.time_s, '.2f')} s, time ratio {fmt(check.time_ratio, '.4f')}")
    return (f"<p>{badge(check.verdict)} {esc(facts)}</p><ul>"
            + "".join(f"<li>{esc(reason)}</li>" for reason in check.reasons) + "</ul>")


def _runs(s: SiteRecord, check: CheckRow | None) -> str:
    left = {x.file: x.reason for x in check.left_out} if check else {}
    judged = set(check.runs_judged) if check else set()
    rows, classes = [], []
    for log in s.record.logs:
        state = "judged" if log.file in judged else ("left out" if log.file in left else "—")
        if log.role == "retiming":  # the re-timing its README declares: its time is the record's, not its loss
            state = "re-timing: the official time" + ("" if check and log.file in check.retimings else
                                                      " (not checked)")
        rows.append([f'<code class="hash">{esc(log.file)}</code>', esc(state), fmt(log.val_loss, ".4f"),
                     fmt(log.train_time_ms / 1000 if log.train_time_ms else None, ".3f"), esc(log.torch or "—"),
                     f'<code class="hash">{esc(log.fingerprint[:24] or "—")}</code>',
                     esc(", ".join(log.missing) or "—")])
        classes.append("deviation" if log.file in left else "")
    out = '<h2 id="runs">Runs (published logs)</h2>' + table(
        ["log", "in the verdict", "final val loss", "train time (s)", "PyTorch", "fingerprint", "the log lacks"],
        rows, classes)
    gone = [[f'<code class="hash">{esc(x.file)}</code>', esc(x.reason), esc(x.detail or "—")]
            for x in (check.left_out if check else ())]
    out += '<h2 id="left-out">Logs left out and why</h2>' + (table(["log", "why", "detail"], gone) if gone else
                                                              "<p>None left out" + ("" if check else " (not checked)")
                                                              + ".</p>")
    skipped = s.record.imported.skipped_folders if s.record.imported else ()
    if skipped:
        out += "<p>Upstream folders not imported: " + ", ".join(f"<code>{esc(f)}</code>" for f in skipped) + "</p>"
    return out


def _loss_chart(s: SiteRecord) -> str:
    """Each published run's final loss against the target: from the logs' entries, else the manifest's list."""
    logs = [(log.file[:12], log.val_loss) for log in s.record.run_logs if log.val_loss is not None]
    points = logs or [(f"run {i}", loss) for i, loss in enumerate(s.record.published.losses, 1)]
    if not points:
        return "<p>No published final loss to draw.</p>"
    target = s.record.rules.target_val_loss
    figure = {"data": [{"type": "scatter", "mode": "markers", "name": "published runs",
                        "x": [x for x, _ in points], "y": [y for _, y in points],
                        "marker": {"size": 9}, "hovertemplate": "%{x}<br>val loss %{y:.4f}<extra></extra>"}],
              "layout": {"title": {"text": "final validation loss of each published run"}, "hovermode": "closest",
                         "xaxis": {"title": {"text": "run"}}, "yaxis": {"title": {"text": "validation loss"}},
                         "shapes": [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": target, "y1": target,
                                     "line": {"dash": "dash", "width": 1}}], "margin": {"t": 50, "r": 20}}}
    return ('<div class="chart" id="chart-losses" data-figure="chart-losses-data"></div>'
            + data_block("chart-losses-data", figure))


def _rule_words(evidence: str) -> str:
    """The rule the record is judged by, as upstream's README states it, and where."""
    sentence, source = UPSTREAM_WORDS.get(evidence, ("", ""))
    if not sentence:
        return esc(f"{evidence}: a rule upstream does not state")
    return f'<blockquote class="upstream">{esc(sentence)}</blockquote><span class="note">{esc(source)}</span>'


def record_page(s: SiteRecord, check: CheckRow | None, plan: PlanRow | None, parent_known: bool,
                library_src: str) -> str:
    r = s.record
    parent = (f'<a href="{esc(r.parent)}.html">{esc(r.parent)}</a>' if parent_known else esc(r.parent)) \
        if r.parent else "—"
    claimed = f"{r.imported.claimed_time} ({fmt(r.imported.claimed_time_s, '.2f')} s, upstream table row " \
              f"{r.imported.row})" if r.imported else f"{fmt(r.published.mean_time_s, '.2f')} s (its manifest)"
    facts = [["date", esc(r.date)], ["track", esc(r.track)], ["claimed time", esc(claimed)], ["parent", parent],
             ["upstream", upstream_link(s)], ["environment", environment_cell(s) + f' <span class="note">'
                                                                                   f"{esc(s.environment_reason)}</span>"],
             ["can be run", plan_cell(plan)],
             ["target", esc(f"val loss ≤ {r.rules.target_val_loss}, p < {r.rules.p_value_max} "
                            f"(evidence: {r.rules.loss_evidence}; rules v{r.rules.version})")],
             ["rule, in upstream's words", _rule_words(r.rules.loss_evidence)],
             ["hardware", esc(f"{r.hardware.gpu_count} × {r.hardware.gpu_model}")],
             ["software", esc(f"PyTorch {r.software.torch or '?'}, Python {r.software.python or '?'}")]]
    body = (f'<nav><a href="../index.html">← all records</a></nav><h1>{esc(r.name)}</h1><p>{esc(r.title)}</p>'
            f'<p class="note">{esc(r.description)}</p>' + table(["", ""], facts)
            + '<h2 id="verdict">Verdict on its own logs</h2>' + _verdict(check) + _loss_chart(s) + _runs(s, check))
    return page(f"{r.name}: speedrun record", body, f'<script src="{esc(library_src)}"></script>')
