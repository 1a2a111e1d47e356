"""The CLI at the speed of its work (issue 39): each command of a reviewer's loop beside the floor of reading
and hashing the same logs, measured in one run.

    .venv/bin/python benchmarks/cli_speed.py                                   # the shared 21-folder sample
    .venv/bin/python benchmarks/cli_speed.py --history /work/upstream-head      # and the whole history
    .venv/bin/python benchmarks/cli_speed.py --history DIR --out benchmarks/cli_speed-2026-12-02.txt

A benchmark, not a test: it prints numbers and ratios, it asserts nothing. Each command runs as `bin/repro`
in a fresh workspace (--root) and a fresh registry (the checkout's datasets/ and environments/, records written
by the import), so "cold" means an empty log-reader memo. Times are wall and CPU (user + sys of the child and
of what it ran, such as git, from getrusage): the machine may be shared, and CPU time is what the command itself
cost, so the verdict column judges CPU (the ratios for the import, the seconds for the others); wall time is
printed beside it, with the load average before and after each part. The floor is this process reading and
hashing every log under records/ (what any import must do at least), one process on one core, timed the same
way; each command is one process too. The issue's own floor, "reading and hashing every log (`cat` +
`sha256sum`)", is measured beside it as one `sha256sum` process given every log (coreutils, where the machine has
it). The cold import is judged against that floor, the one the issue's target names, on the line below the
import's; its ratios to the stricter in-process floor stay printed on its own line, unjudged (where sha256sum is
missing, the in-process floor judges it). The other ratios are over the in-process floor. Before timing, the
tool's modules are compiled to bytecode (as an install leaves them): a shell with PYTHONDONTWRITEBYTECODE set
would otherwise make every command compile its sources.
"""

from __future__ import annotations

import argparse
import compileall
import hashlib
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
REPRO = REPO_ROOT / "bin" / "repro"
SAMPLE = Path("/work/shared/upstream/modded-nanogpt")  # the project's shared sample, when this machine has it
COMMIT = "f411b3d346aa52d3504324ca93c230fd84c6c07f"  # upstream HEAD both copies were taken at
LOG_SUFFIXES = (".txt", ".log")
ISSUE_FLOOR = "floor (issue 39's): one sha256sum process, every log"
OVER_ISSUE_FLOOR = "  the cold import over issue 39's sha256sum floor"


def floor(clone: Path) -> tuple[float, float, int, int]:
    """(wall s, CPU s, files, bytes) of reading and hashing every log under records/."""
    paths = sorted(p for p in (clone / "records").rglob("*") if p.suffix in LOG_SUFFIXES and p.is_file())
    wall, cpu = time.perf_counter(), time.process_time()
    size = 0
    for path in paths:
        data = path.read_bytes()
        hashlib.sha256(data).hexdigest()
        size += len(data)
    return time.perf_counter() - wall, time.process_time() - cpu, len(paths), size


def coreutils_floor(clone: Path) -> tuple[float, float] | None:
    """(wall s, CPU s) of one `sha256sum` process reading and hashing every log under records/ (the issue's own
    floor); None without sha256sum on this machine."""
    tool = shutil.which("sha256sum")
    if tool is None:
        return None
    paths = sorted(str(p) for p in (clone / "records").rglob("*") if p.suffix in LOG_SUFFIXES and p.is_file())
    wall, cpu, _ = timed_command([tool, "--", *paths])
    return wall, cpu


def timed_command(command: list[str]) -> tuple[float, float, int]:
    """(wall s, CPU s of the child, exit code) of one command, its output discarded."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        code = subprocess.run(command, stdout=sink, stderr=subprocess.DEVNULL, check=False).returncode
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), code


def timed(args: list[str], repro: Path = REPRO) -> tuple[float, float, int]:
    """(wall s, CPU s of the child, exit code) of one `repro ARGS`."""
    return timed_command([str(repro), *args])


def fresh_registry(folder: Path) -> Path:
    for name in ("datasets", "environments"):
        shutil.copytree(REPO_ROOT / "manifests" / name, folder / name)
    (folder / "records").mkdir()
    return folder


def verdict(target: str, cpu: float, f_cpu: float) -> str:
    """Is the target met, on CPU time ("<= 10x floor": the CPU ratio; "<= 10 s": CPU seconds)?"""
    if not target:
        return ""
    bound = float(target.split()[1].rstrip("x"))
    value = cpu / f_cpu if target.endswith("floor") else cpu
    return "met" if value <= bound else "NOT met"


def load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def measure(label: str, clone: Path, commit: str, repro: Path = REPRO) -> list[str]:
    f_wall, f_cpu, files, size = floor(clone)
    issue_floor = coreutils_floor(clone)
    lines = [f"## {label}: {clone} ({files} logs, {size / 1e6:.1f} MB); {load()} at the start", "",
             f"{'command (one process each)':55} {'wall s':>8} {'CPU s':>8} {'wall/floor':>10} {'CPU/floor':>9}  "
             "target (on CPU)",
             f"{'floor: read + sha256 of every log (in-process, 1 core)':55} {f_wall:8.2f} {f_cpu:8.2f} {1:10.2f} "
             f"{1:9.2f}"]
    if issue_floor is not None:
        i_wall, i_cpu = issue_floor
        lines.append(f"{ISSUE_FLOOR:55} {i_wall:8.2f} {i_cpu:8.2f} {i_wall / f_wall:10.2f} {i_cpu / f_cpu:9.2f}")
    with tempfile.TemporaryDirectory(prefix="cli-speed-") as tmp:
        root, reg, site = Path(tmp) / "root", fresh_registry(Path(tmp) / "registry"), Path(tmp) / "site"
        base = ["--root", str(root), "--registry", str(reg)]
        imp = ["records", "import", str(clone), "--commit", commit, "--registry", str(reg)]
        check = ["records", "check", "--from", str(clone), "--json"]
        steps = [
            ("records import, track 1, cold (empty memo)", base + imp, "<= 10x floor"),
            ("records import, track 1, again (facts memo)", base + imp, ""),
            ("records import, track 1, nothing changed (import memo)", base + imp, "<= 2x floor"),
            ("records import, track 2 (cold)", base + imp + ["--track", "2"], ""),
            ("records check --json, first after the imports", base + check, "<= 10 s"),
            ("records check --json, again", base + check, "<= 10 s"),
            ("records site --from --plans", base + ["records", "site", "--from", str(clone), "--plans", "--out",
                                                    str(site)], "<= 20 s"),
            ("reproduce --plan --all --json (one process)", base + ["reproduce", "--plan", "--all", "--json"], ""),
            ("records list", base + ["records", "list"], "<= 1 s"),
            ("repro --help", ["--help"], "<= 0.5 s"),
        ]
        for name, args, target in steps:
            wall, cpu, code = timed(args, repro)
            note = "" if code in (0, 1) else f"  (exit {code})"
            over_issue_floor = name.endswith("cold (empty memo)") and issue_floor is not None
            shown = "(in-process floor: not judged)" if over_issue_floor else target
            lines.append(f"{name:55} {wall:8.2f} {cpu:8.2f} {wall / f_wall:10.2f} {cpu / f_cpu:9.2f}  {shown}"
                         f"{'  ' + verdict(target, cpu, f_cpu) if target and not over_issue_floor else ''}{note}")
            if over_issue_floor:
                lines.append(f"{OVER_ISSUE_FLOOR:55} {'':8} {'':8} {wall / issue_floor[0]:10.2f} "
                             f"{cpu / issue_floor[1]:9.2f}  {target}  {verdict(target, cpu, issue_floor[1])}")
        records = len(list((reg / "records").glob("*.yaml")))
    lines += [f"({records} record manifests; exit 1 of check/plan is a verdict or a refusal, not a failure; "
              f"{load()} at the end)", ""]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=Path, default=SAMPLE, help="the shared sample [%(default)s]")
    parser.add_argument("--history", type=Path, default=None, help="a copy of upstream's whole history (optional)")
    parser.add_argument("--commit", default=COMMIT, help="the upstream commit of both copies [%(default)s]")
    parser.add_argument("--out", type=Path, default=None, help="also write the output to this file")
    parser.add_argument("--repro", type=Path, default=REPRO,
                        help="the repro to time, e.g. another checkout's bin/repro for a before/after [%(default)s]")
    args = parser.parse_args()
    if not args.repro.is_file():
        sys.exit(f"{args.repro} is missing: run `make setup` first")
    compileall.compile_dir(args.repro.resolve().parents[1] / "pipeline", quiet=2)  # no command compiles the tool
    lines = [f"# benchmarks/cli_speed.py, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.node()}: "
             f"{os.cpu_count()} CPUs, {load()} at the start; timing {args.repro} (bytecode compiled first)", ""]
    print("\n".join(lines), flush=True)
    for label, clone in (("sample", args.sample), ("history", args.history)):
        if clone is None:
            part = [f"## {label}: not given (--{label} DIR)", ""]
        elif not (clone / "records").is_dir():
            part = [f"## {label}: skipped: {clone} has no records/ folder", ""]
        else:
            part = measure(label, clone, args.commit, args.repro)
        print("\n".join(part), flush=True)
        lines += part
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")

if __name__ == "__main__":
    main()
