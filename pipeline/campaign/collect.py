"""`repro campaign collect`: every finished run of a campaign into one verified bundle, with a per-node table.

The selection, the verdict, the archive, the report and the bundle check are the reproduce flow's
own stages (pipeline/reproduce/flow.py: AFTER_RUNS, the archive, the bundle check, the report) run on the
campaign folder: with enough runs that count, the verdict is on them and every failed or aborted run goes into
the bundle as an attempt; with too few, the verdict is on every run of the configuration, so the bundle
says why. Each run carries its node.json (the bundle keeps it beside run.yaml), from which the
per-node table is drawn: campaign/nodes.md in the bundle (with campaign/campaign.yaml, the request and
its job ids), copied to CAMPAIGN/report/nodes.md and printed by the command.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pipeline.atomic import write_text
from pipeline.campaign.model import CAMPAIGN_FILE, NODE_FILE, Campaign, load_prepare, read_task
from pipeline.campaign.status import CampaignView, campaign_view
from pipeline.campaign.work import campaign_flow
from pipeline.errors import CheckFailed
from pipeline.folderlock import FolderLock
from pipeline.hashing import sha256_file
from pipeline.records.logparse import parse_log
from pipeline.regular_file import read_bounded
from pipeline.reproduce.flow import AFTER_RUNS, judged_and_attempts
from pipeline.runs.rundir import read_status
from pipeline.workspace import Workspace
from pipeline.yamlio import LIMITS

NODES_MEMBER = "campaign/nodes.md"  # bundle members a campaign adds
CAMPAIGN_MEMBER = "campaign/campaign.yaml"


@dataclass(frozen=True, kw_only=True)
class NodeRow:
    run_id: str
    role: str  # judged | attempt
    index: int | None
    job: str | None
    node: str
    hostname: str | None
    status: str
    final_val_loss: float | None
    train_time_s: float | None


@dataclass(frozen=True, kw_only=True)
class CollectResult:
    bundle: str
    bundle_sha256: str
    bundle_verified: bool
    problems: tuple[str, ...]
    outcome: str
    reasons: tuple[str, ...]
    runs: tuple[str, ...]
    attempts: tuple[str, ...]
    report: str
    nodes_table: str
    nodes: tuple[NodeRow, ...]


def node_rows(judged: list[Path], attempts: list[Path]) -> list[NodeRow]:
    rows = []
    for role, runs in (("judged", judged), ("attempt", attempts)):
        for run in runs:
            task = read_task(run / NODE_FILE) if (run / NODE_FILE).is_file() else None
            log = parse_log(run / "log.txt") if (run / "log.txt").is_file() else None
            time_ms = log.train_time_ms if log is not None else None
            rows.append(NodeRow(run_id=run.name, role=role, index=task.index if task else None,
                                job=task.job if task else None,
                                node=task.node if task else "unknown (no node.json)",
                                hostname=task.hostname if task else None,
                                status=read_status(run), final_val_loss=log.final_val_loss if log else None,
                                train_time_s=time_ms / 1000 if time_ms is not None else None))
    return rows


def _mean(values: list[float]) -> str:
    return f"{sum(values) / len(values):.4f}" if values else "—"


def render_nodes(rows: list[NodeRow]) -> str:
    """Markdown: one line per node (how many runs, how they ended, mean loss and time), then one per run."""
    lines = ["## Runs per node", "",
             "| node | host | judged | attempts | statuses | mean val loss | mean train time s |",
             "|---|---|---|---|---|---|---|"]
    for node in sorted({r.node for r in rows}):
        mine = [r for r in rows if r.node == node]
        judged = [r for r in mine if r.role == "judged"]
        statuses = ", ".join(f"{n} {s}" for s, n in sorted(_count(r.status for r in mine).items()))
        hosts = ", ".join(sorted({r.hostname for r in mine if r.hostname})) or "—"
        lines.append(f"| {node} | {hosts} | {len(judged)} | {len(mine) - len(judged)} | {statuses} | "
                     f"{_mean([r.final_val_loss for r in judged if r.final_val_loss is not None])} | "
                     f"{_mean([r.train_time_s for r in judged if r.train_time_s is not None])} |")
    lines += ["", "| run | role | task | job | node | status | val loss | train time s |",
              "|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r.role != "judged", r.index if r.index is not None else -1, r.run_id)):
        loss = f"{r.final_val_loss:.4f}" if r.final_val_loss is not None else "—"
        secs = f"{r.train_time_s:.1f}" if r.train_time_s is not None else "—"
        lines.append(f"| {r.run_id} | {r.role} | {r.index if r.index is not None else '—'} | {r.job or '—'} | "
                     f"{r.node} | {r.status} | {loss} | {secs} |")
    return "\n".join(lines) + "\n"


def _why_no_run(view: CampaignView) -> str:
    if not view.campaign.submissions:
        return "it was never submitted"
    if view.active:
        return "its jobs are still queued or starting"
    ended = [t for t in view.tasks if t.outcome is not None]
    if ended:
        return "its tasks ended before a run started (" + "; ".join(
            f"task {t.index}: {t.outcome}" + (f", {t.detail.splitlines()[0][:120]}" if t.detail else "")
            for t in ended[:3]) + ")"
    return "no task of it started (a failed prepare job cancels them)"


def _count(items) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        out[item] = out.get(item, 0) + 1
    return out


def collect(ws: Workspace, campaign: Campaign, say: Callable[[str], None] = lambda line: None,
            sign_key: Path | None = None) -> CollectResult:
    view = campaign_view(ws, campaign)  # also marks runs whose job was killed outright as aborted
    running = [r.path for t in view.tasks for r in t.runs if r.status == "running"]
    if running:
        raise CheckFailed(f"{len(running)} run(s) are still running, e.g. {running[0]}",
                          f"collect once they end: `repro campaign wait {campaign.folder}`")
    flow = campaign_flow(ws, campaign, say, sign_key=sign_key)
    finished = sum(len(t.runs) for t in view.tasks)
    if not finished:
        raise CheckFailed(f"campaign {campaign.folder} has no run yet: " + _why_no_run(view),
                          f"see `repro campaign status {campaign.folder}`; submit what is missing with "
                          f"`repro campaign submit --campaign {campaign.folder}`, then `repro campaign wait`")
    judged, attempts = judged_and_attempts(flow)  # what stage_archive will pick, by the same rule
    if not judged and attempts and all(read_status(run) == "aborted" for run in attempts):
        # nothing ran to its end: an aborted run is an attempt, never judged (pipeline/reproduce/selection.py)
        table = render_nodes(node_rows([], attempts))
        raise CheckFailed(f"every run of campaign {campaign.folder} was aborted ({len(attempts)} attempt(s), "
                          f"none ran to its end):\n{table}",
                          f"run them again: `repro campaign submit --campaign {campaign.folder}`")
    if finished and not judged:
        raise CheckFailed(f"none of the {finished} finished run(s) in {campaign.runs_dir} is of the campaign's "
                          "configuration (trainer, runtime, preset, --set, and for the native trainer the code in "
                          "train/, which may have changed since they ran)",
                          f"run them again: `repro campaign submit --campaign {campaign.folder}`")
    prepared = load_prepare(campaign)
    if prepared is not None and prepared.image_id:
        flow.image_state = {"image_id": prepared.image_id}
    rows = node_rows(judged, attempts)
    table = render_nodes(rows)
    nodes_md = f"# Campaign {campaign.folder.name}: where the runs ran\n\n" + table
    # inside the bundle, beside the runs (whose node.json files it is drawn from) and the campaign's own file
    flow.extra_members = {NODES_MEMBER: nodes_md.encode(),
                          CAMPAIGN_MEMBER: read_bounded(campaign.folder / CAMPAIGN_FILE, LIMITS["manifest"],
                                                            "campaign file", "submit the campaign again")}
    with FolderLock(campaign.folder, "repro campaign collect"):
        for stage in AFTER_RUNS:
            outcome = stage(flow)
            say(f"[{outcome.stage}] {outcome.action}: {outcome.detail}")
    write_text(campaign.folder / "report" / "nodes.md", nodes_md)
    return CollectResult(bundle=str(flow.bundle), bundle_sha256=sha256_file(flow.bundle),
                         bundle_verified=flow.bundle_ok,
                         problems=tuple(str(p) for p in flow.check.problems), outcome=flow.outcome,
                         reasons=tuple(str(r) for r in flow.reasons), runs=tuple(p.name for p in flow.judged),
                         attempts=tuple(p.name for p in flow.attempts), report=str(flow.report), nodes_table=table,
                         nodes=tuple(rows))
