"""`repro archive RUN_DIR...` and `repro bundle verify|show BUNDLE`: the verified record bundle.

    repro archive runs/2025-09-23_MuonCustomSizing/* --record 2025-09-23_MuonCustomSizing [--sign-key key.pem]
    repro bundle verify bundles/<name>.tar.gz [--pubkey key.pub.pem] [--require-signature] [--json]
    repro bundle show bundles/<name>.tar.gz [--json]

`bundle verify` judges by the record manifest of YOUR registry (`repro --registry DIR`), never by the copy
the bundle carries. Its first line says what was proven: "integrity only: unsigned" or "signed by <key>".

Exit codes: archive 0 when written; bundle verify 0 when every check passes, 1 on any problem
(an unsigned bundle with --require-signature included), 3 when the bundle or a key cannot be read.
"""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.bundle.archive import ArchiveSources, record_of_runs
from pipeline.bundle.archive import archive as archive_runs
from pipeline.bundle.verify import MAX_MEMBER_BYTES, MAX_TOTAL_BYTES, show_bundle, verify_bundle
from pipeline.outcome import Outcome
from pipeline.records.model import load_record
from pipeline.verdict.render import render

from .output import echo, emit_json, pass_workspace, secho


@click.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--record", "record_name", default=None, help="Record to judge against [the one in the runs' run.yaml].")
@click.option("--out", "out_dir", default=None, type=click.Path(path_type=Path),
              help="Folder for the bundle [<root>/bundles].")
@click.option("--name", default=None,
              help="Bundle name, never one that exists (default: <record>-<last run end>-<N>runs"
              "[-<F>failed][-<A>aside], -vN added when taken).")
@click.option("--sign-key", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="ed25519 private key (PEM) to sign SHA256SUMS with (writes SHA256SUMS.sig).")
@click.option("--preflight", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The node's preflight.json (default: the first run's).")
@click.option("--env-lock", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Environment lock (default: the registry's environments/<environment>.lock.yaml when present).")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Data folder whose data.lock.yaml goes in (default: the runs' data_dir).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_workspace
def archive(ws, runs, record_name, out_dir, name, sign_key, preflight, env_lock, data_dir, as_json):
    """Bundle run directories, their environment, data lock, verdict and report into one archive."""
    sources = ArchiveSources(preflight=preflight, env_lock=env_lock, data_dir=data_dir)
    record = load_record(record_name or record_of_runs(list(runs)), ws.records_dir)
    result = archive_runs(record, list(runs), out_dir or ws.bundles, work_dir=ws.root, name=name, sources=sources,
                          sign_key=sign_key)
    if as_json:
        emit_json(result)
        return
    echo(f"bundle {result.path} ({len(result.members)} members, sha256 {result.sha256})")
    echo(f"  verdict: {result.outcome}" + ("; signed" if result.signed else ""))
    for member, count in result.redactions:
        echo(f"  redacted {count} secret value(s) in {member}")
    echo(f"  check it with: repro bundle verify {result.path}")


@click.group()
def bundle():
    """Check or show a record bundle written by `repro archive`."""


@bundle.command("verify")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--pubkey", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The signer's ed25519 public key (PEM); the signature must then be present and valid.")
@click.option("--require-signature", is_flag=True,
              help="Fail (exit 1) unless the bundle carries a valid signature.")
@click.option("--max-member-mb", type=click.IntRange(min=1), default=MAX_MEMBER_BYTES >> 20, show_default=True,
              help="Refuse members larger than this (checked against the tar header before reading).")
@click.option("--max-total-mb", type=click.IntRange(min=1), default=MAX_TOTAL_BYTES >> 20, show_default=True,
              help="Refuse bundles whose members add up to more than this.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_workspace
def verify(ws, path, pubkey, require_signature, max_member_mb, max_total_mb, as_json):
    """Recompute every hash, the signature and the verdict of a bundle; exit 1 on any problem."""
    check = verify_bundle(path, ws.records_dir, pubkey=pubkey, require_signature=require_signature,
                          max_member_bytes=max_member_mb << 20, max_total_bytes=max_total_mb << 20)
    if as_json:
        emit_json(check.to_dict())
        return Outcome.check(check.ok)
    echo(check.proven)
    echo(f"bundle {check.path}: {len(check.members)} members, signature {check.signature.status}")
    if check.judged_against:
        echo(f"  record: judged by your registry's {check.judged_against}, not by the bundle's own copy")
    if check.recomputed_outcome:
        echo(f"  verdict: {check.recomputed_outcome} (recomputed from the logs inside; "
             f"the manifest says {check.manifest_outcome})")
    for note in check.notes:
        echo(f"  note: {note}")
    for problem in check.problems:
        secho(f"  problem: {problem}", fg="red")
        if problem.fix:
            echo(f"    fix: {problem.fix}")
    if check.ok:
        secho("bundle verified: every hash, the manifest and the verdict check out", fg="green", bold=True)
    else:
        secho(f"bundle NOT verified: {len(check.problems)} problem(s)", fg="red", bold=True)
    return Outcome.check(check.ok)


@bundle.command("show")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the manifest and member list as JSON.")
def show(path, as_json):
    """Show what a bundle says about itself; exit 1 if its bytes are not intact (truncated, damaged, changed).
    The verdict is not recomputed: `repro bundle verify` does that."""
    summary = show_bundle(path)
    m = summary.manifest
    if as_json:
        emit_json({"path": summary.path, "intact": summary.intact, "manifest": m.to_dict(),
                   "members": [{"name": n, "size": s} for n, s in summary.members],
                   "problems": [{"member": p.member, "problem": p.problem} for p in summary.problems]})
        return Outcome.check(summary.intact)
    if not summary.intact:  # first, so that nothing below is read as a whole bundle's word
        secho(f"bundle NOT intact ({len(summary.problems)} problem(s)): what follows is what its damaged "
              "copy says", fg="red", bold=True)
    echo(f"bundle {m.name} (schema {m.schema_version}, created {m.created or '?'}) -- what it says; "
         "`repro bundle verify` checks it")
    echo(f"  record   {m.record.name}: target {m.record.target_val_loss} (p < {m.record.p_value_max}), "
         f"rules version {m.record.rules_version}")
    echo(f"  verdict  {m.verdict.outcome}")
    for finding in m.verdict.findings:  # rendered by this tool's templates, whatever the writer's wording was
        echo(f"    - {'deviation: ' if finding.severity == 'deviation' else ''}{render(finding)}")
    for run in m.runs:
        loss = f"{run.final_val_loss:.4f}" if run.final_val_loss is not None else "—"
        time = f"{run.train_time_s:.3f} s" if run.train_time_s is not None else "—"
        echo(f"  run      {run.id}  {run.status} (exit {run.exit_code})  "
             f"steps {run.steps}  val_loss {loss}  time {time}")
    for run in m.attempts:
        why = "; ".join(render(f) for f in run.findings if f.severity == "problem") or "replaced"
        echo(f"  attempt  {run.id}  {run.status} (exit {run.exit_code})  steps {run.steps}  not judged: {why}")
    env = m.environment
    echo(f"  env      runtime {', '.join(env.runtimes) or '?'}; image "
         f"{', '.join(env.image_ids) or 'none'}; lock {env.lock_sha256 or 'none'}")
    echo(f"  data     {m.data.dataset or '?'}: {len(m.data.shards)} shard(s), "
         f"lock {m.data.lock_sha256 or 'none'}")
    echo(f"  signed   {'yes' if m.signature else 'no'}")
    echo(f"  members  {len(summary.members)}:")
    for name, size in summary.members:
        echo(f"    {size:>10}  {name}")
    if not summary.intact:
        for problem in summary.problems:
            echo(f"  problem  {problem.member}: {problem.problem}")
        secho(f"bundle NOT intact: {len(summary.problems)} problem(s); `repro bundle verify {path}` checks "
              "it fully", fg="red", bold=True)
    return Outcome.check(summary.intact)
