"""`repro preflight`: this node against the record's node, before anyone pays for runs.

    repro preflight [--record NAME] [--runtime docker|host] [--strict] [--json] [--output PATH]
"""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.errors import CheckFailed, MissingDependency
from pipeline.plain_text import plain
from pipeline.preflight.collect import SAVED_FILES, HostSources, SavedSources
from pipeline.preflight.run import (
    RUNTIMES,
    PreflightReport,
    default_locations,
    preflight_log,
    write_report,
)
from pipeline.preflight.run import preflight as run_preflight
from pipeline.registry import Registry

from .output import echo, emit_json, pass_registry


def _gib(kib_or_bytes: int, unit: int) -> str:
    return f"{kib_or_bytes * unit / 1024**3:.1f} GiB"


def _summary(report: PreflightReport) -> list[str]:
    f, hw = report.facts, report.record_hardware
    node = (f"{hw['gpu_count']} x {hw['gpu_model']}, {hw['gpu_form_factor']}, {hw['interconnect']}"
            if hw.get("gpu_count") else f"CPU {hw.get('cpu_model') or '(model not pinned)'}")
    lines = [f"preflight: {report.facts_from} against {report.record} ({node}), runtime {report.runtime}"]
    if f.gpus:
        names = sorted({f"{g.name} ({g.memory_total_mib} MiB)" for g in f.gpus})
        lines.append(f"  GPUs     {len(f.gpus)} x {', '.join(names)}; driver {f.driver}, CUDA {f.cuda_driver}")
    else:
        lines.append("  GPUs     none visible")
    if f.topology and f.topology.links:
        lines.append(f"  links    {', '.join(sorted({link.kind for link in f.topology.links}))} "
                     f"over {len(f.topology.links)} pairs")
    if rt := f.runtime:
        lines.append(f"  runtime  python {rt.python or '-'}, torch {rt.torch or '-'} (CUDA {rt.torch_cuda or '-'}), "
                     f"cuDNN {rt.cudnn or '-'}, NCCL {rt.nccl or '-'}, Triton {rt.triton or '-'} [{rt.where}]")
    if f.cpu:
        lines.append(f"  CPU      {f.cpu.model}, {f.cpu.logical_cpus} CPUs, {f.cpu.sockets} socket(s), "
                     f"{f.cpu.numa_nodes} NUMA node(s)")
    if f.memory:
        lines.append(f"  RAM      {_gib(f.memory.total_kib, 1024)}")
    if f.os:
        lines.append(f"  OS       {f.os.pretty_name}, kernel {f.os.kernel}")
    if f.disks:
        lines.append("  disk     " + "; ".join(f"{d.label} {d.free_bytes / 1e9:.1f} GB free of "
                                               f"{d.total_bytes / 1e9:.1f} GB" for d in f.disks))
    if f.docker:
        lines.append(f"  docker   {f.docker.server_version}, runtimes {', '.join(f.docker.runtimes)}")
    for m in f.missing:
        lines.append(f"  missing  {m.source}: {m.reason}")
    return lines


def _print_human(report: PreflightReport, written: Path | None) -> None:
    for line in _summary(report):
        echo(line)
    echo("checks")
    colors = {"pass": "green", "warn": "yellow", "fail": "red", "skip": None}
    for c in report.checks:
        # the status word in colour; the name and reason (which quote the node's own answers) made plain first
        status = click.style(f"{c.status.upper():4}", fg=colors[c.status])
        click.echo(f"  {status}" + plain(f"  {c.name:17} {c.reason}"))
        if c.status in ("warn", "fail"):
            echo(f"  {'':4}  {'':17} timing: {c.timing_impact}")
    failed, warned = len(report.by_status("fail")), len(report.by_status("warn"))
    strict = " (--strict: warnings fail)" if report.strict and warned else ""
    echo(f"outcome: {report.outcome}{strict}: {failed} failed, {warned} warned"
         + (f"; wrote {written}" if written else ""))


@click.command()
@click.option("--record", "record_name", default=None, help=f"Record to compare with [{Registry.DEFAULT_RECORD}].")
@click.option("--runtime", type=click.Choice(RUNTIMES), default="docker", show_default=True,
              help="Where training will run: the pinned image (docker) or this machine's python (host).")
@click.option("--strict", is_flag=True, help="Warnings fail too: only the record's kind of node passes.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (the content of preflight.json).")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write preflight.json [default: state/preflight.json under the workspace root when "
                   "reading this machine; not written for --from-dir/--from-log unless given].")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the data goes [default: data/ under the workspace root].")
@click.option("--runs-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where runs go [default: runs/ under the workspace root].")
@click.option("--from-dir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help=f"Read a node's saved outputs instead of this machine ({', '.join(sorted(SAVED_FILES.values()))}).")
@click.option("--from-log", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Check the node a record-format run log ran on, from its nvidia-smi table and version lines.")
@pass_registry
def preflight(registry, record_name, runtime, strict, as_json, output, data_dir, runs_dir, from_dir, from_log):
    """Read this node (GPUs, driver, topology, runtime versions, CPU, RAM, disk, /dev/shm, Docker) and
    check it against the record's hardware. A node unlike the record's gets warnings that say why its
    time is not comparable; it is not refused. Nothing secret is recorded.

    \b
    Exit codes:
      0  no check failed (warnings allowed)
      1  a check failed, or a check warned under --strict
      3  bad input (unknown record, unreadable --from-dir / --from-log)
      4  no GPU visible: the report is still printed and written, gpus_visible fails
    """
    if from_dir and from_log:
        raise click.UsageError("give --from-dir or --from-log, not both")
    ws, record = registry.workspace, registry.record_or_default(record_name)
    if from_log:
        report = preflight_log(from_log, record, strict)
    else:
        sources = SavedSources(from_dir) if from_dir else HostSources(state_dir=ws.state)
        report = run_preflight(record, runtime, strict, sources,
                               default_locations(record, data_dir or ws.data, runs_dir or ws.runs))
    target = output or (None if from_dir or from_log else ws.state / "preflight.json")
    written = write_report(report, target) if target else None
    if as_json:
        emit_json(report.to_dict())
    else:
        _print_human(report, written)
    if report.no_gpu:
        raise MissingDependency("preflight: no GPU visible; the record cannot be timed on this machine",
                                "run on a GPU node (`make demo` runs the CPU demo here)")
    if report.no_docker is not None:
        from pipeline.docker_engine import START_FIX

        raise MissingDependency(f"preflight: {report.no_docker.reason}", f"{START_FIX}; or use --runtime host")
    if report.outcome == "fail":
        names = [c.name for c in report.failures()]
        raise CheckFailed(f"preflight failed: {', '.join(names)}",
                          "see each check's reason above; --strict makes warnings fail" if strict else
                          "see each check's reason above")
