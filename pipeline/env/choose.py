"""Which environment a reproduction runs in, and with which lock: chosen in a fixed order, never silently.

    choice = choose_environment(ws, record, work=ws.work / record.name, wheelhouse=None, say=print)
    choice.environment, choice.lock          # what to build the image or the venv from
    choice.deviations                        # Findings for the bundle and the report (code, severity, data)
    choice.tried                             # every candidate passed over, with why (shown on screen too)

The order: the record's own environment first, then each fallback it declares (record-2025-09 ->
pypi-torch-2.8). A candidate is taken when its lock is usable here:
  - its committed lock is complete and every file it names is in the wheelhouse or still downloadable
    from its URL (the record's nightly leaves PyTorch's index after ~60 days), or
  - its committed lock is unresolved (placeholders written offline) and resolving it on this node
    succeeds: trust on first use. The resolved lock is kept in <work>/environments/<name>.lock.yaml
    (a later call reuses it while the manifest is unchanged) and the choice carries the deviation
    "lock resolved on this node, <date>".
A fallback is always a deviation too. If no candidate is usable, MissingDependency (exit 4) lists
every candidate and why, with the fix.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pipeline.env.lock import Lock, load_lock, load_lock_file, resolve_lock
from pipeline.env.manifest import Environment, load_environment
from pipeline.errors import InputError, MissingDependency, ReproError
from pipeline.findings import Finding
from pipeline.records.environment_choice import stand_in
from pipeline.redact import public_url
from pipeline.workspace import Workspace

RESOLVED_NOTE = "resolved on this node on "  # + the UTC date; the lock's own record of trust on first use


@dataclass(frozen=True, kw_only=True)
class EnvironmentChoice:
    environment: Environment
    lock: Lock
    lock_path: Path  # the committed lock, or the one resolved into the work folder
    source: str  # "record" (the record's own environment) or "fallback"
    resolved_on_node: bool
    deviations: tuple[Finding, ...]
    tried: tuple[str, ...]  # candidates passed over: "<name>: <why>"

    def to_dict(self) -> dict:
        return {"environment": self.environment.name, "lock": str(self.lock_path), "lock_sha256": self.lock.sha256,
                "source": self.source, "resolved_on_node": self.resolved_on_node,
                "deviations": [d.to_dict() for d in self.deviations], "tried": list(self.tried)}


def _url_answers(url: str, timeout_s: float = 20) -> bool:
    """A HEAD request: the file is still served (the nightly index prunes; a mirror may be down)."""
    from pipeline.http import answers  # the one HTTP client

    return answers(url, timeout_s)


def missing_files(lock: Lock, wheelhouse: Path | None, available: Callable[[str], bool] = _url_answers) -> list[str]:
    """Files of the lock neither in the wheelhouse nor downloadable: empty when the lock can be installed."""
    out = []
    for f in lock.files:
        if wheelhouse is not None and (Path(wheelhouse) / f.filename).is_file():
            continue
        if not available(f.url):
            out.append(f"{f.filename} ({public_url(f.url)})")
    return out


def _resolved_date(lock: Lock) -> str:
    for note in lock.notes:
        if note.startswith(RESOLVED_NOTE):
            return note[len(RESOLVED_NOTE):]
    return "unknown date"


def _resolve_here(env: Environment, out: Path, wheelhouse: Path | None, say: Callable[[str], None],
                  today: str) -> Lock:
    """Trust on first use: resolve the manifest's pins with pip on this node, into the work folder."""
    if out.is_file():
        kept = load_lock_file(out)
        if kept.manifest_sha256 == env.manifest_sha256 and not kept.unknown_entries():
            say(f"environment {env.name}: using the lock resolved on this node earlier ({out})")
            return kept
    say(f"environment {env.name}: its committed lock is unresolved; resolving it on this node now "
        f"(trust on first use) into {out}")
    pypi_only = all(u.rstrip("/") == "https://pypi.org/simple" for u in env.index_urls)
    return resolve_lock(env, wheelhouse=wheelhouse, log=lambda line: None, from_pypi=pypi_only and wheelhouse is None,
                        out=out, notes=(RESOLVED_NOTE + today,
                                        "trust on first use: this lock was not reviewed or committed"))


def _deviations(env: Environment, source: str, resolved: bool, lock: Lock, record_env: str) -> tuple[Finding, ...]:
    out = []
    if source == "fallback":
        out.append(Finding("environment.fallback", "deviation",
                           {"environment": env.name, "record_environment": record_env, "why": env.deviation}))
    if resolved:
        out.append(Finding("environment.lock_resolved_on_node", "deviation",
                           {"environment": env.name, "date": _resolved_date(lock), "lock_sha256": lock.sha256}))
    return tuple(out)


def _stand_in(env: Environment, source: str, record) -> tuple[Finding, ...]:
    """The record names a stable release for its nightly (pipeline/records/environment_choice.py's rule 2):
    its own environment then installs another PyTorch than the log prints, a deviation like a fallback."""
    wanted, pinned = getattr(getattr(record, "software", None), "torch", ""), env.expected.get("torch", "")
    if source != "record" or not wanted or not pinned or wanted == pinned:
        return ()
    return (stand_in(env.name, pinned, wanted),)


def choose_environment(ws: Workspace, record, work: Path, wheelhouse: Path | None = None,
                       resolve_on_node: bool = True, say: Callable[[str], None] = print,
                       available: Callable[[str], bool] = _url_answers, today: str | None = None) -> EnvironmentChoice:
    """The record's environment if its lock is usable here, else its declared fallbacks in order (see above).

    `record` is a loaded Record (its `environment` names the first candidate). `work` is the reproduction's
    work folder: a lock resolved on this node is written under work/environments/. `say` shows every step
    on screen; `available(url)` says whether a locked file is still served (a HEAD request by default).
    """
    today = today or time.strftime("%Y-%m-%d", time.gmtime())
    first = load_environment(ws, record.environment)
    candidates = [(first, "record")] + [(load_environment(ws, name), "fallback") for name in first.fallbacks]
    tried: list[str] = []
    for env, source in candidates:
        try:
            committed = load_lock(env)
        except InputError as exc:
            tried.append(f"{env.name}: {exc.what}")
            continue
        stale = committed.manifest_sha256 != env.manifest_sha256
        if not stale and not committed.unknown_entries():
            missing = missing_files(committed, wheelhouse, available)
            if missing:
                more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
                tried.append(f"{env.name}: its lock names files that are neither in a wheelhouse nor downloadable: "
                             f"{missing[0]}{more}")
                say(f"environment {env.name} is not available here ({len(missing)} locked file(s) gone); "
                    "trying the next")
                continue
            lock, path, resolved = committed, committed.path, False
        elif not resolve_on_node:
            tried.append(f"{env.name}: its committed lock is {'stale' if stale else 'unresolved'} and resolving on "
                         "this node is off")
            continue
        else:
            out = Path(work) / "environments" / f"{env.name}.lock.yaml"
            try:
                lock = _resolve_here(env, out, wheelhouse, say, today)
            except ReproError as exc:
                tried.append(f"{env.name}: resolving its lock on this node failed: {exc.what.splitlines()[0]}")
                say(f"environment {env.name}: could not resolve its lock here; trying the next")
                continue
            path, resolved = out, True
        deviations = _deviations(env, source, resolved, lock, first.name) + _stand_in(env, source, record)
        for line in tried:
            say(f"passed over: {line}")
        say(f"environment: {env.name} ({'the record' + chr(39) + 's own' if source == 'record' else 'FALLBACK'}"
            f", lock {lock.sha256[:12]}{', resolved on this node' if resolved else ''})")
        return EnvironmentChoice(environment=env, lock=lock, lock_path=Path(path), source=source,
                                 resolved_on_node=resolved, deviations=deviations, tried=tuple(tried))
    raise MissingDependency("no environment of record " + record.name + " is usable here:\n  "
                            + "\n  ".join(tried),
                            "give --wheelhouse DIR holding the record's locked files, or run on a node that reaches "
                            "the package indexes (PyPI at least) so a lock can be resolved")
