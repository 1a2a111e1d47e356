"""`repro records list|show|fingerprint|import|plot|fetch-logs|site`: the record registry and the speedrun's history."""

from __future__ import annotations

from pathlib import Path
from statistics import mean
from typing import TYPE_CHECKING

import click

from pipeline.errors import CheckFailed, InputError
from pipeline.plain_text import plain_text
from pipeline.workspace import Workspace

if TYPE_CHECKING:  # imported where used: a re-import that replays its memo loads no record model (issue 39)
    from pipeline.records.environment_choice import EnvironmentChoice
    from pipeline.records.model import Record

from .output import echo, emit_json, pass_registry, pass_workspace


@click.group()
def records():
    """The records this tool knows (the registry's records/*.yaml)."""


WHEELHOUSE = click.option("--wheelhouse", type=click.Path(exists=True, file_okay=False, path_type=Path),
                          default=None, help="A folder of wheels: a record's nightly PyTorch found here counts as "
                                             "available (nightlies leave PyTorch's index after about 60 days).")


def environment_of(ws: Workspace, r: Record, wheelhouse: Path | None = None) -> tuple[EnvironmentChoice, bool]:
    """(the environment the record will use today and why, whether the manifest's environment exists)."""
    from pipeline.records.environment_choice import (
        EnvironmentChoice,
        environment_by_rule,
        environment_family,
        registry_environments,
    )

    pins = registry_environments(ws.environments_dir)
    exists = bool(r.environment) and any(p.name == r.environment for p in pins)
    if r.environment and not exists:  # e.g. `host`: the demo record runs in the machine's own Python
        return EnvironmentChoice(environment=r.environment, kind="named", family=environment_family(r.software.torch),
                                 reason=f"the manifest names {r.environment!r}, which is no environment manifest of "
                                 "this registry: it runs as named (`host` = the machine's own Python)",
                                 deviation=""), False
    return environment_by_rule(r.software.torch, r.name, r.date, pins, wheelhouse=wheelhouse), exists


def _history_row(ws: Workspace, r: Record, wheelhouse: Path | None = None) -> dict:
    from pipeline.records.environment_choice import registry_environments

    choice, env_exists = environment_of(ws, r, wheelhouse)
    losses = [log.val_loss for log in r.run_logs if log.val_loss is not None] or list(r.published.losses)
    times = list(r.published.times_s)
    torch_hashed = any(p.name == choice.environment and p.torch_sha256
                       for p in registry_environments(ws.environments_dir))
    row_number = r.imported.row if r.imported else ""
    return {"name": r.name, "date": r.date, "track": r.track, "row": row_number, "title": plain_text(r.title),
            "parent": r.parent or None, "rule": r.rules.loss_evidence,
            # upstream lists a re-timing (same code, new hardware or software) under the record's own number
            "retiming": r.rules.loss_evidence == "retiming",
            "claimed_time_s": r.imported.claimed_time_s if r.imported else None,
            "mean_time_s": round(mean(times), 3) if times else None, "runs": len(times),
            "mean_val_loss": round(mean(losses), 4) if losses else None,
            "environment": r.environment or None, "environment_exists": env_exists,
            "environment_will_use": choice.environment or None, "environment_match": choice.kind,
            # pinned: the record's own PyTorch build, obtainable, with its wheel's sha256 in the lock
            "environment_pinned": choice.kind == "exact" and torch_hashed,
            # pinned: the registry has the dataset's manifest and the record says how many shards it reads
            # (its author's dataset.train_shards, else the count the importer derived from its program)
            "data_pinned": (ws.datasets_dir / f"{r.dataset.name}.yaml").is_file() and r.dataset.shards_to_fetch > 0}


@records.command("list")
@WHEELHOUSE
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_registry
def list_(registry, wheelhouse, as_json):
    """The history: date, claimed time, mean time and loss of the logs, environment and data pinned."""
    ws = registry.workspace
    from pipeline.records.model import upstream_order

    rows = [_history_row(ws, r, wheelhouse) for r in sorted(registry.records(), key=upstream_order)]
    if as_json:
        emit_json(rows)
        return
    echo(f"{'track':7} {'#':>3}  {'date':10}  {'record':34} {'claimed s':>9} {'logs s':>9} {'runs':>4} "
         f"{'loss':>7}  {'rule':10} {'environment (match)':36} data")

    def num(value, spec, width):
        return format(value, spec) if value is not None else "—".rjust(width)

    for row in rows:
        env = f"{row['environment_will_use'] or '—'} ({row['environment_match']})"
        number = (row["row"] or "—") + ("r" if row["retiming"] else "")
        echo(f"{row['track'][:7]:7} {number:>3}  {row['date']:10}  {row['name'][:34]:34} "
             f"{num(row['claimed_time_s'], '9.1f', 9)} {num(row['mean_time_s'], '9.2f', 9)} {row['runs']:4} "
             f"{num(row['mean_val_loss'], '7.4f', 7)}  {row['rule'][:10]:10} {env[:36]:36} "
             f"{'pinned' if row['data_pinned'] else 'not pinned'}")
    if any(row["retiming"] for row in rows):
        echo("(#r: a re-timing of the record with that number: same code on new hardware or software)")



@records.command()
@click.argument("name")
@WHEELHOUSE
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_registry
def show(registry, name, wheelhouse, as_json):
    """Show everything a record pins, and which environment it will use and why."""
    ws = registry.workspace
    r = registry.record(name)
    choice, env_exists = environment_of(ws, r, wheelhouse)
    if as_json:
        emit_json({**r.to_dict(), "environment_choice": choice.to_dict(), "environment_exists": env_exists})
        return
    p, hw, sw = r.published, r.hardware, r.software
    echo(f"{r.name}: {r.title}\n  {r.description}")
    echo(f"  upstream   {r.upstream.repository} @ {r.upstream.commit or '(not pinned)'} {r.upstream.folder}")
    if r.imported:
        echo(f"  imported   row {r.imported.row} of the table at {r.imported.commit[:12]}, claimed "
             f"{r.imported.claimed_time}; mean time from the {r.imported.mean_time_source}")
        for folder in r.imported.skipped_folders:
            echo(f"  skipped    {folder}")
        if r.imported.missing:
            echo(f"  missing    some logs lack: {', '.join(r.imported.missing)}")
    echo(f"  parent     {r.parent or '-'}")
    echo(f"  published  {len(p.losses)} runs, {p.steps} steps, mean time {p.mean_time_s} s, "
         f"losses {list(p.losses)}")
    echo(f"  program    fingerprint {r.program.fingerprint or '(not pinned)'}")
    for pin in next((log.files for log in r.logs if log.files), ()):  # a program of several files
        echo(f"    file     {pin.name}  sha256 {pin.sha256}  {pin.bytes:,} bytes")
    echo(f"  target     val loss <= {r.rules.target_val_loss} with p < {r.rules.p_value_max} "
         f"(evidence: {r.rules.loss_evidence}; rules v{r.rules.version})")
    if not hw.known:
        echo("  hardware   not in its logs (no nvidia-smi table): GPUs, their model and count unknown")
    elif hw.gpu_count:
        # what the logs do not say is left out, not printed as '?' (an imported log names no interconnect)
        form = ", ".join(x for x in (hw.gpu_form_factor, hw.interconnect) if x)
        echo(f"  hardware   {hw.gpu_count} x {hw.gpu_model}{f' ({form})' if form else ''}, "
             f"driver {hw.driver or 'not logged'}, CUDA {hw.cuda_driver or 'not logged'}")
    else:
        echo(f"  hardware   CPU: {hw.cpu_model}")
    echo(f"  software   Python {sw.python or '?'}, PyTorch {sw.torch or '?'}, Triton {sw.triton or '?'}")
    echo(f"  data       {r.dataset.name}: {r.dataset.shards_to_fetch} train + {r.dataset.val_shards} val shards")
    echo(f"  environment {r.environment or '(none)'} (the manifest's" +
         ("" if env_exists or not r.environment else "; not in this registry") + ")")
    if choice.environment:
        echo(f"    will use {choice.environment} ({choice.kind}): {choice.reason}")
    else:
        echo(f"    will use nothing: {choice.reason}")
    if choice.deviation:
        from pipeline.verdict.render import render

        echo(f"    deviation: {render(choice.deviation)}")
    for log in r.logs:
        loss = f"{log.val_loss}" if log.val_loss is not None else "—"
        time = f"{log.train_time_ms} ms" if log.train_time_ms is not None else "—"
        echo(f"  log        {log.file}  {log.sha256[:12]}…  loss {loss}  {time}"
             + (f"  {log.fingerprint[:17]}…" if log.fingerprint else "")
             + ("  (re-timing: the official time, not a run)" if log.role == "retiming" else ""))


@records.command("fingerprint")
@click.argument("log", type=click.Path(dir_okay=False))
def fingerprint_(log):
    """Print the code fingerprint of the program embedded in LOG (to pin it in a manifest)."""
    from pipeline.records.identity import program_fingerprint
    from pipeline.records.logparse import parse_log

    parsed = parse_log(log)
    if parsed.program is None:
        raise InputError(f"{log} carries no program text", "use a full run log (its program is printed at its top)")
    try:
        echo(program_fingerprint(parsed.program))  # a set of files: each file's, combined
    except (SyntaxError, ValueError) as exc:  # not Python, or nested too deeply for Python's parser
        raise InputError(f"{log}: its program text cannot be fingerprinted: {exc}",
                         "use the record's full, unmodified log") from None


@records.command("import")
@click.argument("clone", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--track", default=1, show_default=True, type=click.IntRange(1, 9), help="Which records table.")
@click.option("--commit", default=None, help="The upstream commit of CLONE (required when it is not a git clone).")
@click.option("--registry", "into", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Registry to write into (DIR/records/) [default: the workspace's registry].")
@click.option("--dry-run", is_flag=True, help="Report what would change; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_workspace
def import_(ws, clone, track, commit, into, dry_run, as_json):
    """Write one manifest per record of the upstream README's records table (idempotent; keeps your edits)."""
    target = ws.with_registry(into.resolve()) if into else ws
    result = _import(ws, target, clone, track, commit, dry_run)
    if as_json:
        emit_json(result.to_dict())
        return
    verb = "would write" if dry_run else "wrote"
    echo(f"upstream {result.commit}, track {track}: {verb} {len(result.written)}, "
         f"unchanged {len(result.unchanged)}, rows not imported {len(result.skipped_rows)}")
    for name in result.written:
        echo(f"  {verb} {target.records_dir / (name + '.yaml')}: {', '.join(result.changes[name])}")
    skipped = not_imported_text(result.skipped_rows)  # one pass: 100,000 rows stay linear
    if skipped:
        echo(skipped.rstrip("\n"))
    for name, marks in result.kept_edits.items():
        echo(f"  kept edit: {name}: {', '.join(marks)} (marked `edited:`; the import would derive another "
             "value)")
    for line in result.warnings:
        echo(f"  warning: {line}")


def not_imported_text(skipped_rows: list[str]) -> str:
    """The rows not imported: those whose folder is not in the clone counted in one line, the others listed.
    One pass and one string (a list membership test per row made 100,000 rows quadratic)."""
    absent = [line.endswith("is not in this clone") for line in skipped_rows]
    head = (f"  not imported: {sum(absent)} row(s) whose log folder is not in this clone (--json lists them)\n"
            if any(absent) else "")
    return head + "".join(f"  not imported: {line}\n" for line, gone in zip(skipped_rows, absent) if not gone)


def _import(ws: Workspace, target: Workspace, clone: Path, track: int, commit: str | None, dry_run: bool):
    """import_records, or the result of the same import replayed when none of its inputs changed since one
    that wrote nothing (pipeline/records/import_memo.py)."""
    from pipeline.errors import ReproError
    from pipeline.records.import_memo import ImportInputs, import_key, recall, remember
    from pipeline.records.import_result import DEFAULT_REPOSITORY

    memo, key = ws.cache / "import-memo", None
    # the key hashes every log of the clone (a tenth of a cold import): worth it when a memo may answer, or when the
    # import may write nothing (and be remembered); into an empty registry with no memo, an import writes each record
    if (Path(clone) / "README.md").is_file() and (_any(memo, "*.json") or _any(target.records_dir, "*.yaml")):
        try:  # the dataset manifests are in the key as files: their shard size is read only when the import runs
            key = import_key(ImportInputs(clone=Path(clone), records_dir=target.records_dir,
                                          environments_dir=target.environments_dir, track=track, commit=commit,
                                          repository=DEFAULT_REPOSITORY, dry_run=dry_run,
                                          datasets_dir=target.datasets_dir))
        except (ReproError, OSError):
            key = None  # the import itself reports it
    result = recall(memo, key) if key else None
    if result is None:
        from pipeline.records.environment_choice import registry_environments
        from pipeline.records.importer import import_records

        shard_tokens = dataset_shard_tokens(target)
        result = import_records(clone, target.records_dir, track=track, commit=commit,
                                environments=registry_environments(target.environments_dir), dry_run=dry_run,
                                shard_tokens=shard_tokens)
        if key:
            remember(memo, key, result)
    return result


def _any(folder: Path, pattern: str) -> bool:
    try:
        return next(Path(folder).glob(pattern), None) is not None
    except OSError:
        return True  # the key's own reading says what is wrong


@records.command("plot")
@click.option("--out", "out_dir", default=Path("report"), show_default=True,
              type=click.Path(file_okay=False, path_type=Path), help="Folder for records_time.png.")
@click.option("--json", "as_json", is_flag=True, help="Print the file written and the records plotted as JSON.")
@pass_registry
def plot(registry, out_dir, as_json):
    """A PNG of record time against date (claimed times, and the mean of each record's logs), track 1 only."""
    from pipeline.records.history_plot import plot_history
    from pipeline.records.model import upstream_order

    rows = [_history_row(registry.workspace, r) for r in sorted(registry.records(), key=upstream_order)
            if r.track.startswith("track_1")]
    path = plot_history(rows, out_dir)
    if as_json:  # the README: every reporting command takes --json
        emit_json({"png": str(path), "records": [row["name"] for row in rows]})
        return
    echo(f"wrote {path}")


def dataset_shard_tokens(ws) -> int | None:
    """One shard's tokens of the dataset imported records read, when the registry has its manifest."""
    from pipeline.data.manifest import load_dataset
    from pipeline.records.importer import DEFAULT_DATASET

    if not (ws.datasets_dir / f"{DEFAULT_DATASET['name']}.yaml").is_file():
        return None
    return load_dataset(DEFAULT_DATASET["name"], ws.registry).format.tokens_per_shard


@records.command("fetch-logs")
@click.argument("name")
@click.option("--from", "--record-logs", "source_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=None,
              help="Copy the logs from this folder instead of downloading them (offline); each is verified.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_registry
def fetch_logs(registry, name, source_dir, as_json):
    """Download the record's published logs (pinned URL, sha256-verified) into the workspace cache."""
    from pipeline.records.published import fetch_published_logs

    fetched = fetch_published_logs(registry.record(name), registry.workspace.cache, source_dir=source_dir)
    if as_json:
        emit_json([{"file": f.file, "path": str(f.path), "source": f.source, "sha256": f.sha256} for f in fetched])
        return
    for f in fetched:
        echo(f"  {f.file}  sha256 ok  ({f.source})")
    echo(f"{len(fetched)} published log(s) of {name} verified in {fetched[0].path.parent}")


@records.command("check")
@click.argument("names", nargs=-1)
@click.option("--from", "upstream_dir", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A folder laid out like the upstream repository (a clone of modded-nanogpt).")
@click.option("--commit", default=None, help="The upstream commit the folder is a copy of (checked when it is a "
                                             "git clone).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per record, in a list.")
@pass_registry
def check(registry, names, upstream_dir, commit, as_json):
    """Judge each record on its own published logs (all records, or NAMES), by its own rules."""
    from pipeline.verdict.history import check_records, upstream_head
    from pipeline.verdict.outcomes import VerdictOutcome

    upstream_head(upstream_dir, commit)
    chosen = [registry.record(n) for n in names] if names else \
        [r for r in registry.records() if r.imported is not None or r.upstream.commit]
    rows = check_records(chosen, upstream_dir)
    if as_json:
        emit_json([row.to_dict() for row in rows])
    else:
        _print_check(rows)
    failed = [r for r in rows if r.verdict in (VerdictOutcome.NOT_REPRODUCED, VerdictOutcome.INVALID)]
    if failed:
        raise CheckFailed(f"{len(failed)} of {len(rows)} record(s) are not upheld by their own logs: "
                          + ", ".join(r.name for r in failed), "read each record's reasons above")


def _print_check(rows) -> None:
    def num(value, spec):
        return "—" if value is None else format(value, spec)

    echo(f"{'record':<34} {'verdict':<27} {'rule':<10} {'runs':>4} {'out':>4} {'mean loss':>9} "
         f"{'p':>8} {'time s':>8} {'/claim':>7}")
    for r in rows:
        echo(f"{r.name[:34]:<34} {r.verdict:<27} {r.rule:<10} {len(r.runs_judged):>4} {len(r.left_out):>4} "
             f"{num(r.mean_loss, '.4f'):>9} {num(r.p, '.2g'):>8} {num(r.time_s, '.2f'):>8} "
             f"{num(r.time_ratio, '.3f'):>7}")
    for r in rows:
        if r.reasons or r.flags:
            echo(f"\n{r.name}: {r.verdict} (rule {r.rule}: {r.rule_why})")
            for line in (*r.reasons, *(f"editor: {f}" for f in r.flags)):
                echo(f"  - {line}")


@records.command("site")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder for the site (index.html, records/, assets/).")
@click.option("--check", "check_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="`repro records check --json` output: each record's verdict on its own logs [not checked].")
@click.option("--plan", "plan_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="A JSON list of {name, runnable, reason}: whether each record can be run [not planned].")
@click.option("--from", "upstream_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="Judge each record on its own logs in this upstream clone now (as `records check`), instead of "
                   "reading --check.")
@click.option("--plans", "plan_here", is_flag=True,
              help="Plan each record now (as `repro reproduce --record NAME --plan`), instead of reading --plan.")
@WHEELHOUSE
@click.option("--json", "as_json", is_flag=True, help="Print the files written as JSON.")
@pass_registry
def site(registry, out_dir, check_file, plan_file, upstream_dir, plan_here, wheelhouse, as_json):
    """A static site of the registry: an index in upstream's order with a time chart, and a page per record."""
    from pipeline.pages.site import build_site, write_site
    from pipeline.pages.site_inputs import SiteRecord, load_check_rows, load_plan_rows

    ws = registry.workspace
    records = []
    for r in registry.records():
        choice, _ = environment_of(ws, r, wheelhouse)
        records.append(SiteRecord(r, choice.environment, choice.kind, choice.reason))
    if upstream_dir is not None and check_file is not None:
        raise InputError("--from and --check both give the records' verdicts", "pass one of them")
    if upstream_dir is not None:
        from pipeline.verdict.history import check_records

        checks = check_records([s.record for s in records if s.record.imported is not None], upstream_dir)
    else:
        checks = load_check_rows(check_file) if check_file else []
    if plan_here and plan_file is not None:
        raise InputError("--plans and --plan both say whether each record can be run", "pass one of them")
    plans = _plan_rows(ws, [s.record for s in records]) if plan_here else \
        load_plan_rows(plan_file) if plan_file else []
    written = write_site(build_site(records, checks, plans), out_dir)
    if as_json:
        emit_json({"out_dir": str(out_dir), "index": str(out_dir / "index.html"), "files": [str(p) for p in written],
                   "checked": len(checks), "planned": len(plans)})
        return
    echo(f"wrote {len(written)} files: {out_dir / 'index.html'} ({len(records)} records, "
         f"{len(checks)} check row(s), {len(plans)} plan row(s))")


def _plan_rows(ws: Workspace, records: list[Record]) -> list:
    """Whether each record can be run, by `reproduce --plan`'s own logic: its refusals, else its environment."""
    from pipeline.pages.site_inputs import PlanRow
    from pipeline.reproduce.flow import ReproduceRequest
    from pipeline.reproduce.plan import plan_reproduce

    rows = []
    for record in records:
        plan = plan_reproduce(ws, ReproduceRequest(record=record.name, runs=4))
        rows.append(PlanRow.of_plan(record.name, list(plan.refusals), plan.environment))
    return rows
