"""Which environment manifest a record names, and why, by the rule: the exact PyTorch it ran, else the nearest
stable. (What a run may actually build on this node, given the locks and a wheelhouse, is pipeline/env/choose.py's
choose_environment, at run time; this is the rule the importer and `records list` apply to the registry.)

    choice = environment_by_rule(record_torch="2.9.0.dev20250726+cu126", record_name=..., record_date=...,
                                environments=registry_environments(ws.environments_dir))
    choice.environment, choice.kind, choice.reason, choice.deviation

Rules, in order:
1. exact: an environment pins the record's very PyTorch build (same version and local tag), and the build
   can be had: a stable release always (PyPI and PyTorch's index keep them); a nightly only while PyTorch's
   nightly index still lists it (about 60 days after its date) or when a wheelhouse (--wheelhouse DIR)
   holds the file its lock names.
2. stable stand-in: otherwise the environment pinning the stable release nearest to the record's
   (a nightly X.Y.0.devD counts as X.Y: it became that release), declared as a deviation. Ties go to
   an environment made for this record (its declared fallback), then to the newer release for a nightly
   and the older for a stable build; among environments with the same PyTorch, one made for no record
   wins, then by name.
3. a log that names no PyTorch (2024's llm.c-style logs): the stable release current on the record's
   date (release dates below) stands for it, then rule 2.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

from pipeline.findings import Finding
from pipeline.yamlio import YamlRefused, load_file

# First stable release of each minor version (PyTorch's release announcements), for rule 3.
STABLE_RELEASES = (("2.3", "2024-04-24"), ("2.4", "2024-07-24"), ("2.5", "2024-10-17"),
                   ("2.6", "2025-01-29"), ("2.7", "2025-04-23"), ("2.8", "2025-08-06"),
                   ("2.9", "2025-10-15"))
NIGHTLY_INDEX_DAYS = 60

_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?((?:\.dev|a|b|rc)\d+)?(?:\+(\S+))?$")
_TORCH_IN_URL = re.compile(r"/torch-([0-9][^-]*?)-cp")
_NIGHTLY_DATE = re.compile(r"\.dev(\d{8})")


@dataclass(frozen=True)
class TorchVersion:
    text: str
    minor: tuple[int, int]
    nightly: bool
    local: str  # "cu126", "" when absent

    @property
    def family(self) -> str:
        return f"torch-{self.minor[0]}.{self.minor[1]}-{'nightly' if self.nightly else 'stable'}"


def parse_torch(text: str) -> TorchVersion | None:
    m = _VERSION.match((text or "").strip())
    if not m:
        return None
    return TorchVersion(text=text.strip(), minor=(int(m.group(1)), int(m.group(2))),
                        nightly=bool(m.group(4)), local=m.group(5) or "")


def environment_family(torch_text: str) -> str:
    v = parse_torch(torch_text)
    return v.family if v else "unknown"


@dataclass(frozen=True, kw_only=True)
class EnvironmentPin:
    name: str
    torch: str  # the exact torch build it installs, "" when it cannot be read from the manifest
    record: str  # the record it was made for, "" for none
    locked: bool  # a <name>.lock.yaml exists beside it
    torch_file: str = ""  # the torch wheel's file name in the lock ("" when unlocked)
    torch_sha256: str = ""  # its sha256 in the lock ("" when not resolved yet)


@dataclass(frozen=True, kw_only=True)
class EnvironmentChoice:
    environment: str  # "" when the registry has no environment that can stand in
    kind: str  # exact | stable-stand-in | none
    family: str
    reason: str
    deviation: Finding | None  # environment.stand_in; None for an exact match

    def to_dict(self) -> dict:
        return {**self.__dict__, "deviation": self.deviation.to_dict() if self.deviation else None}


def _pinned_torch(doc: dict) -> str:
    expect = doc.get("expect") or {}
    if isinstance(expect, dict) and expect.get("torch"):
        return str(expect["torch"])
    for req in doc.get("requirements") or []:
        req = str(req).replace("%2B", "+")
        if m := re.match(r"^torch\s*==\s*(\S+)", req):
            return m.group(1)
        if req.startswith("torch") and (m := _TORCH_IN_URL.search(req)):
            return m.group(1)
    return ""


def _locked_torch(lock_path: Path) -> tuple[str, str]:
    try:
        lock = load_file(lock_path, "lock")
    except (YamlRefused, OSError):
        return "", ""
    for package in (lock.get("packages") or []) if isinstance(lock, dict) else []:
        if isinstance(package, dict) and package.get("name") == "torch":
            return str(package.get("filename") or ""), str(package.get("sha256") or "")
    return "", ""


# registry_environments' answers by folder, valid while no file of the folder changes (name, size, mtime): a
# command that chooses for every record (`records list`, `site`) reads the ~60 KB locks once, not once a record.
_PINS: dict[tuple, tuple[EnvironmentPin, ...]] = {}


def _folder_state(folder: Path) -> tuple:
    state = []
    for path in sorted(folder.glob("*.yaml")):
        try:
            st = path.stat()
        except OSError:
            continue
        state.append((path.name, st.st_size, st.st_mtime_ns))
    return (str(folder.resolve()), tuple(state))


def registry_environments(environments_dir: Path) -> list[EnvironmentPin]:
    """The environment manifests of a registry, read only for what choosing needs (unreadable ones skipped)."""
    key = _folder_state(Path(environments_dir))
    if key not in _PINS:
        _PINS.clear()  # one registry at a time is what a command reads
        _PINS[key] = tuple(_read_environments(Path(environments_dir)))
    return list(_PINS[key])


def _read_environments(environments_dir: Path) -> list[EnvironmentPin]:
    pins = []
    for path in sorted(Path(environments_dir).glob("*.yaml")):
        if path.name.endswith(".lock.yaml"):
            continue
        try:
            doc = load_file(path)
        except (YamlRefused, OSError):
            continue
        if not isinstance(doc, dict):
            continue
        name = str(doc.get("name") or path.stem)
        lock = path.parent / f"{name}.lock.yaml"
        torch_file, torch_sha = _locked_torch(lock) if lock.is_file() else ("", "")
        pins.append(EnvironmentPin(name=name, torch=_pinned_torch(doc), record=str(doc.get("record") or ""),
                                   locked=lock.is_file(), torch_file=torch_file, torch_sha256=torch_sha))
    return pins


def _stable_on(date: str) -> str:
    current = ""
    for minor, released in STABLE_RELEASES:
        if date and released <= date:
            current = minor
    return current


def nightly_available(env: EnvironmentPin, version: TorchVersion, today: date,
                      wheelhouse: Path | None) -> tuple[bool, str]:
    """(can this environment's nightly torch be had, why). Stable builds always can."""
    if not version.nightly:
        return True, "a stable release stays on PyPI and PyTorch's index"
    if wheelhouse is not None and env.torch_file and (Path(wheelhouse) / env.torch_file).is_file():
        return True, f"the wheelhouse {wheelhouse} holds {env.torch_file}"
    m = _NIGHTLY_DATE.search(version.text)
    if m:
        built = date(int(m.group(1)[:4]), int(m.group(1)[4:6]), int(m.group(1)[6:]))
        until = built + timedelta(days=NIGHTLY_INDEX_DAYS)
        if today <= until:
            return True, f"PyTorch's nightly index keeps it until about {until.isoformat()}"
        return False, (f"the nightly left PyTorch's index around {until.isoformat()} (nightlies are kept about "
                       f"{NIGHTLY_INDEX_DAYS} days) and no wheelhouse holds "
                       f"{env.torch_file or 'its wheel'} (pass --wheelhouse DIR)")
    return False, "a nightly without a date in its version: no index can be counted on (pass --wheelhouse DIR)"


def environment_by_rule(record_torch: str, record_name: str, record_date: str,
                       environments: list[EnvironmentPin], today: date | None = None,
                       wheelhouse: Path | None = None) -> EnvironmentChoice:
    wanted = parse_torch(record_torch)
    inferred = ""
    if wanted is None:
        minor = _stable_on(record_date)
        if not minor:
            return EnvironmentChoice(environment="", kind="none", family="unknown",
                                     reason="the record's logs name no PyTorch version and its "
                                     f"date ({record_date or 'unknown'}) predates the releases this tool knows",
                                     deviation=None)
        wanted = parse_torch(minor + ".0")
        inferred = (f"the record's logs name no PyTorch version; {minor}, the stable release current on "
                    f"{record_date}, stands for it")
    family = wanted.family if not inferred else "unknown"
    exact = [e for e in environments if e.torch and e.torch == wanted.text]
    unavailable = ""
    if exact and not inferred:
        env = sorted(exact, key=lambda e: (e.record != record_name, e.record != "", e.name))[0]
        available, why = nightly_available(env, wanted, today or date.today(), wheelhouse)
        lock = (f"locked in {env.name}.lock.yaml" + ("" if env.torch_sha256 else ", torch's sha256 not resolved yet")
                if env.locked else f"not locked yet (`repro env lock --env {env.name}`)")
        if available:
            return EnvironmentChoice(environment=env.name, kind="exact", family=family,
                                     reason=f"{env.name} pins PyTorch {wanted.text}, the build the record ran "
                                     f"({lock}); {why}", deviation=None)
        unavailable = f"{env.name} pins the record's PyTorch {wanted.text}, but {why}"
    stable = [(e, parse_torch(e.torch)) for e in environments]
    stable = [(e, v) for e, v in stable if v is not None and not v.nightly]
    if not stable:
        return EnvironmentChoice(environment="", kind="none", family=family,
                                 reason=f"no environment in the registry pins PyTorch {wanted.text} "
                                 "or any stable release to stand in for it", deviation=None)
    target = wanted.minor[0] * 100 + wanted.minor[1]
    newer_first = -1 if wanted.nightly else 1

    def rank(item):
        e, v = item
        distance = v.minor[0] * 100 + v.minor[1] - target
        return (abs(distance), e.record != record_name, newer_first * distance, v.local != wanted.local,
                e.record != "", e.name)

    env, v = sorted(stable, key=rank)[0]
    why = inferred or unavailable or f"no environment pins the record's PyTorch {wanted.text}"
    return EnvironmentChoice(environment=env.name, kind="stable-stand-in", family=family,
                             reason=f"{why}; {env.name} pins PyTorch {v.text}, the nearest stable release in the "
                             "registry",
                             deviation=stand_in(env.name, v.text, "" if inferred else wanted.text))


def stand_in(environment: str, torch: str, record_torch: str) -> Finding:
    """The deviation of an environment whose PyTorch is not the build the record ran ("" when its logs name none):
    one finding, whether the rule proposes it here or `reproduce` chooses it on a node (pipeline/env/choose.py)."""
    return Finding("environment.stand_in", "deviation",
                   {"environment": environment, "torch": torch, "record_torch": record_torch or None})
