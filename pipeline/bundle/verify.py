"""Check a record bundle offline: `repro bundle verify BUNDLE.tar.gz [--pubkey PEM] [--json]`.

Nothing in the bundle is trusted. Members are read from the archive into memory, never extracted
blindly: absolute names, `..`, links, devices, fifos, duplicates, members outside the bundle's one
folder and members over the size limit are problems. Every member's sha256 is recomputed against
SHA256SUMS (a changed, added or removed file is named), the detached signature is checked, the
manifest's schema is read, and, once the members are known to be safe, they are written to a
temporary folder so that the verdict can be recomputed from the logs inside and compared with the
manifest's, along with each run's status and the data and environment lock digests. Every problem
is reported, each with the member it concerns; any problem makes the bundle fail (exit 1).

    repro bundle show BUNDLE.tar.gz      # what a bundle says, without checking it
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import tarfile
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pipeline.bundle.archive import (
    ATTEMPTS,
    KIND,
    MANIFEST,
    MAX_MEMBER_BYTES,
    SCHEMA_VERSION,
    SIGNATURE,
    SUMS,
    judge_tree,
    verdict_for_manifest,
)
from pipeline.errors import InputError, ReproError
from pipeline.hashing import sha256_bytes
from pipeline.yamlio import YamlRefused, load_bytes, load_file

MAX_TOTAL_BYTES = 2 << 30
ARCHIVE = "(archive)"
_SUM_LINE = re.compile(r"^([0-9a-f]{64})  (.+)$")
REQUIRED = ("schema_version", "kind", "name", "record", "verdict", "runs", "environment", "hardware", "data",
            "program")


@dataclass(frozen=True)
class Problem:
    member: str  # the member's name inside the bundle folder, or "(archive)"
    problem: str

    def __str__(self) -> str:
        return f"{self.member}: {self.problem}"


@dataclass(frozen=True)
class BundleCheck:
    path: str
    name: str | None
    members: tuple[str, ...]
    problems: tuple[Problem, ...]
    notes: tuple[str, ...]
    signature: str  # valid | invalid | absent | unchecked
    manifest_outcome: str | None
    recomputed_outcome: str | None

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict:
        return {"path": self.path, "name": self.name, "ok": self.ok, "members": list(self.members),
                "problems": [{"member": p.member, "problem": p.problem} for p in self.problems],
                "notes": list(self.notes), "signature": self.signature,
                "manifest_outcome": self.manifest_outcome, "recomputed_outcome": self.recomputed_outcome}


@dataclass
class _Read:
    top: str | None
    files: dict[str, bytes]
    problems: list[Problem]
    unsafe: bool  # a member whose name or type makes extraction unsafe


def _name_problem(name: str) -> str | None:
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return "absolute path"
    if "\\" in name:
        return "backslash in the name"
    parts = name.split("/")
    if ".." in parts:
        return "'..' in the path (would escape the extraction folder)"
    if any(p in ("", ".") for p in parts[:-1]) or not parts[-1]:
        return "empty or '.' path component"
    return None


def _type_problem(info: tarfile.TarInfo) -> str | None:
    if info.issym():
        return f"symbolic link (to {info.linkname!r}); bundles hold only regular files"
    if info.islnk():
        return f"hard link (to {info.linkname!r}); bundles hold only regular files"
    if info.ischr() or info.isblk():
        return "device file; bundles hold only regular files"
    if info.isfifo():
        return "fifo; bundles hold only regular files"
    if not (info.isreg() or info.isdir()):
        return f"unsupported member type {info.type!r}"
    if info.mode & 0o7000:
        return f"mode {info.mode:o} sets setuid/setgid/sticky bits"
    return None


def read_members(path: Path, max_member_bytes: int, max_total_bytes: int) -> _Read:
    """Every member's bytes, in memory, with a problem for each unsafe or oversized member."""
    out = _Read(None, {}, [], False)
    total = 0
    try:
        with tarfile.open(path, mode="r:gz") as tar:
            for info in tar:
                name = info.name
                problem = _name_problem(name)
                top, _, rel = name.rstrip("/").partition("/")
                if problem is None:
                    if not rel and not info.isdir():
                        problem = "a file beside, not inside, the bundle folder"
                    else:
                        out.top = out.top or top
                        if top != out.top:
                            problem = f"outside the bundle folder {out.top!r}"
                shown = rel if (problem is None and rel) else name
                problem = problem or _type_problem(info)
                if problem:
                    out.problems.append(Problem(shown, problem))
                    out.unsafe = True
                    continue
                if info.isdir():
                    continue
                if info.size > max_member_bytes:
                    out.problems.append(Problem(rel, f"{info.size} bytes, over the {max_member_bytes}-byte limit"))
                    out.unsafe = True
                    continue
                if rel in out.files:
                    out.problems.append(Problem(rel, "appears twice in the archive"))
                    out.unsafe = True
                    continue
                total += info.size
                if total > max_total_bytes:
                    out.problems.append(Problem(ARCHIVE, f"members add up to more than {max_total_bytes} bytes"))
                    out.unsafe = True
                    break
                handle = tar.extractfile(info)
                out.files[rel] = handle.read() if handle else b""
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        out.problems.append(Problem(ARCHIVE, f"not a readable tar.gz ({exc}); the file is damaged or truncated"))
        out.unsafe = True
    return out


def check_sums(files: dict[str, bytes]) -> list[Problem]:
    if SUMS not in files:
        return [Problem(SUMS, "missing: the bundle has no list of hashes to check against")]
    problems: list[Problem] = []
    listed: dict[str, str] = {}
    for i, line in enumerate(files[SUMS].decode("utf-8", errors="replace").splitlines(), 1):
        m = _SUM_LINE.match(line)
        if not m:
            problems.append(Problem(SUMS, f"line {i} is not '<sha256>  <name>': {line[:80]!r}"))
            continue
        digest, name = m.groups()
        if name in listed:
            problems.append(Problem(SUMS, f"lists {name} twice"))
        listed[name] = digest
    for name, digest in sorted(listed.items()):
        if name not in files:
            problems.append(Problem(name, "listed in SHA256SUMS but not in the bundle (removed after archiving)"))
        elif sha256_bytes(files[name]) != digest:
            problems.append(Problem(name, "sha256 differs from SHA256SUMS (changed after archiving)"))
    for name in sorted(files):
        if name not in listed and name not in (SUMS, SIGNATURE):
            problems.append(Problem(name, "not listed in SHA256SUMS (added after archiving)"))
    return problems


def _load_public_key(pem: Path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        key = serialization.load_pem_public_key(Path(pem).read_bytes())
    except FileNotFoundError:
        raise InputError(f"public key {pem} not found", "give the signer's ed25519 public key in PEM") from None
    except ValueError as exc:
        raise InputError(f"{pem} is not a PEM public key ({exc})",
                         "export it with `openssl pkey -in key.pem -pubout -out key.pub.pem`") from None
    if not isinstance(key, Ed25519PublicKey):
        raise InputError(f"{pem} holds a {type(key).__name__}, not an ed25519 public key",
                         "give the public half of the ed25519 key the bundle was signed with")
    return key


def check_signature(files: dict[str, bytes], manifest: dict, pubkey: Path | None) -> tuple[str, list[Problem],
                                                                                          list[str]]:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    claimed = (manifest.get("signature") or {}).get("public_key") if isinstance(manifest.get("signature"),
                                                                                   dict) else None
    given = _load_public_key(pubkey) if pubkey else None
    if SIGNATURE not in files:
        if given is not None:
            return "absent", [Problem(SIGNATURE, "missing, although --pubkey asks for a signed bundle")], []
        if claimed:
            return "absent", [Problem(SIGNATURE, "missing, although manifest.yaml says the bundle was signed")], []
        return "absent", [], []
    try:
        signature = base64.b64decode(files[SIGNATURE].strip(), validate=True)
    except (binascii.Error, ValueError):
        return "invalid", [Problem(SIGNATURE, "is not base64 text")], []
    notes: list[str] = []
    if given is not None:
        key = given
    elif claimed:
        try:
            key = Ed25519PublicKey.from_public_bytes(base64.b64decode(claimed))
        except (binascii.Error, ValueError):
            return "invalid", [Problem(MANIFEST, "signature.public_key is not a base64 ed25519 key")], []
        notes.append("the signature was checked with the key named inside the bundle, which proves only that the "
                     "bundle is unchanged since it was signed by whoever holds it; pass --pubkey with the key you "
                     "expect to check who signed")
    else:
        return "unchecked", [], ["the bundle is signed but names no key; pass --pubkey to check the signature"]
    try:
        key.verify(signature, files.get(SUMS, b""))
    except InvalidSignature:
        return "invalid", [Problem(SIGNATURE, "does not match SHA256SUMS for this key (wrong key, or the "
                                              "bundle was altered after signing)")], notes
    return "valid", [], notes


def check_manifest(files: dict[str, bytes]) -> tuple[dict, list[Problem]]:
    if MANIFEST not in files:
        return {}, [Problem(MANIFEST, "missing")]
    try:
        data = load_bytes(files[MANIFEST], f"bundle member {MANIFEST}", "bundle_member")
    except YamlRefused as exc:
        return {}, [Problem(MANIFEST, f"refused: {exc.what}")]
    if not isinstance(data, dict):
        return {}, [Problem(MANIFEST, "the top level is not a mapping")]
    problems = []
    if data.get("schema_version") != SCHEMA_VERSION:
        problems.append(Problem(MANIFEST, f"schema_version is {data.get('schema_version')!r}, this tool reads "
                                          f"{SCHEMA_VERSION}"))
    if data.get("kind") != KIND:
        problems.append(Problem(MANIFEST, f"kind is {data.get('kind')!r}, not {KIND!r}"))
    for key in REQUIRED:
        if key not in data:
            problems.append(Problem(MANIFEST, f"field {key!r} is missing"))
    if not isinstance(data.get("record"), dict) or not data["record"].get("name"):
        problems.append(Problem(MANIFEST, "record.name is missing"))
    if not isinstance(data.get("runs"), list):
        problems.append(Problem(MANIFEST, "runs is not a list"))
    return data, problems


def _first_differences(a, b, path: str = "verdict", limit: int = 5) -> list[str]:
    """Dotted paths where two plain-data trees differ (the first few)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            out += _first_differences(a.get(key), b.get(key), f"{path}.{key}", limit - len(out))
            if len(out) >= limit:
                break
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += _first_differences(x, y, f"{path}[{i}]", limit - len(out))
            if len(out) >= limit:
                break
        return out
    return [] if a == b else [f"{path}: manifest {json.dumps(a)[:120]} vs recomputed {json.dumps(b)[:120]}"]


def _extract(files: dict[str, bytes], root: Path) -> None:
    """Write the already-checked members under root (names were validated: no '..', no absolute paths)."""
    for rel, data in files.items():
        target = root.joinpath(*PurePosixPath(rel).parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def _status_and_exit(root: Path, run_id: str) -> tuple[str, object]:
    status = root / "runs" / run_id / "status"
    meta_path = root / "runs" / run_id / "run.yaml"
    meta = {}
    if meta_path.is_file():
        try:
            meta = load_file(meta_path, "run") or {}
        except InputError:
            meta = {}
    return (status.read_text().strip() if status.is_file() else "unknown",
            meta.get("exit_code") if isinstance(meta, dict) else None)


def recompute(files: dict[str, bytes], manifest: dict) -> tuple[str | None, list[Problem], list[str]]:
    """Extract to a temporary folder and recompute the verdict, run rows and lock digests."""
    problems: list[Problem] = []
    notes: list[str] = []
    record_name = str((manifest.get("record") or {}).get("name", ""))
    run_ids = sorted({rel.split("/")[1] for rel in files if rel.startswith("runs/") and rel.count("/") == 2})
    listed = [r.get("id") for r in manifest.get("runs", []) if isinstance(r, dict)]
    for run_id in sorted(set(listed) - set(run_ids)):
        problems.append(Problem(f"runs/{run_id}", "listed in manifest.yaml but absent from the bundle"))
    for run_id in sorted(set(run_ids) - set(listed)):
        problems.append(Problem(f"runs/{run_id}", "in the bundle but not listed in manifest.yaml"))
    if not run_ids:
        return None, problems + [Problem("runs/", "the bundle holds no runs")], notes
    record_member = f"manifests/records/{record_name}.yaml"
    if record_member not in files:
        return None, problems + [Problem(record_member, "missing: the record the verdict was judged against")], notes
    with tempfile.TemporaryDirectory(prefix="repro-bundle-verify-") as tmp:
        root = Path(tmp) / "bundle"
        _extract(files, root)
        try:
            _, verdict = judge_tree(root, record_name, run_ids)
        except ReproError as exc:
            return None, problems + [Problem(record_member, f"the verdict cannot be recomputed: {exc.what}")], notes
        mine, theirs = verdict_for_manifest(verdict), manifest.get("verdict") or {}
        if theirs.get("outcome") != mine["outcome"]:
            problems.append(Problem(MANIFEST, f"verdict outcome says {theirs.get('outcome')!r}, but the logs inside "
                                              f"give {mine['outcome']!r}"))
        elif theirs.get("reasons") != mine["reasons"]:
            problems.append(Problem(MANIFEST, "verdict reasons differ from those the logs inside give: "
                                    + "; ".join(_first_differences(theirs.get("reasons"), mine["reasons"],
                                                                   "verdict.reasons", 2))))
        else:
            for diff in _first_differences(theirs, mine):
                problems.append(Problem(MANIFEST, f"verdict detail differs from the recomputed one: {diff}"))
        judged = {Path(r.source).name: r for r in verdict.runs}
        for row in manifest.get("runs", []):
            if not isinstance(row, dict) or row.get("id") not in judged:
                continue
            status, exit_code = _status_and_exit(root, row["id"])
            run = judged[row["id"]]
            for key, value in (("status", status), ("exit_code", exit_code),
                               ("final_val_loss", run.final_val_loss), ("train_time_s", run.train_time_s)):
                if row.get(key) != value:
                    problems.append(Problem(MANIFEST, f"runs[{row['id']}].{key} is {row.get(key)!r}, but the run's "
                                                      f"files give {value!r}"))
        problems += _check_attempts(root, files, manifest)
        problems += _check_locks(root, files, manifest, notes)
        return verdict.outcome, problems, notes


def _check_attempts(root: Path, files: dict[str, bytes], manifest: dict) -> list[Problem]:
    """Retried runs sit in attempts/<id>/ outside the verdict; their listing must match their files."""
    present = sorted({rel.split("/")[1] for rel in files if rel.startswith(f"{ATTEMPTS}/") and rel.count("/") == 2})
    rows = {r.get("id"): r for r in manifest.get("attempts") or [] if isinstance(r, dict)}
    problems = [Problem(f"{ATTEMPTS}/{i}", "in the bundle but not listed in manifest.yaml attempts")
                for i in present if i not in rows]
    problems += [Problem(f"{ATTEMPTS}/{i}", "listed in manifest.yaml attempts but absent from the bundle")
                 for i in sorted(set(rows) - set(present))]
    for run_id in present:
        if run_id in rows:
            status = (root / ATTEMPTS / run_id / "status")
            found = status.read_text().strip() if status.is_file() else "unknown"
            if rows[run_id].get("status") != found:
                problems.append(Problem(MANIFEST, f"attempts[{run_id}].status is {rows[run_id].get('status')!r}, "
                                                  f"but its status file says {found!r}"))
    return problems


def _check_locks(root: Path, files: dict[str, bytes], manifest: dict, notes: list[str]) -> list[Problem]:
    problems = []
    data = manifest.get("data") or {}
    if data.get("lock_file"):
        if data["lock_file"] not in files:
            problems.append(Problem(data["lock_file"], "named by manifest.yaml data.lock_file but absent"))
        else:
            from pipeline.data.verify import data_lock_digest

            try:
                digest = data_lock_digest((root / data["lock_file"]).parent)
            except ReproError as exc:
                problems.append(Problem(data["lock_file"], f"unreadable: {exc.what}"))
            else:
                if digest != data.get("lock_sha256"):
                    problems.append(Problem(MANIFEST, f"data.lock_sha256 is {data.get('lock_sha256')}, the bundled "
                                                      f"lock gives {digest}"))
                for claim in data.get("runs_claim") or []:
                    if claim != digest:
                        notes.append(f"a run's run.yaml names data lock {claim[:12]}…, not the bundled lock "
                                     f"{digest[:12]}…")
    env = manifest.get("environment") or {}
    if env.get("lock_file"):
        if env["lock_file"] not in files:
            problems.append(Problem(env["lock_file"], "named by manifest.yaml environment.lock_file but absent"))
        else:
            digest = sha256_bytes(files[env["lock_file"]])
            if digest != env.get("lock_sha256"):
                problems.append(Problem(MANIFEST, f"environment.lock_sha256 is {env.get('lock_sha256')}, the "
                                                  f"bundled lock gives {digest}"))
            for claim in env.get("runs_claim_lock_sha256") or []:
                if claim != digest:
                    notes.append(f"a run's run.yaml names environment lock {claim[:12]}…, not the bundled lock "
                                 f"{digest[:12]}…")
    return problems


def verify_bundle(path: Path, pubkey: Path | None = None, max_member_bytes: int = MAX_MEMBER_BYTES,
                  max_total_bytes: int = MAX_TOTAL_BYTES) -> BundleCheck:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"bundle {path} not found", "give the path of a .tar.gz written by `repro archive`")
    read = read_members(path, max_member_bytes, max_total_bytes)
    problems = list(read.problems)
    notes: list[str] = []
    problems += check_sums(read.files)
    manifest, manifest_problems = check_manifest(read.files)
    problems += manifest_problems
    signature, sig_problems, sig_notes = check_signature(read.files, manifest, pubkey)
    problems += sig_problems
    notes += sig_notes
    if manifest.get("name") and read.top and manifest["name"] != read.top:
        problems.append(Problem(MANIFEST, f"name is {manifest['name']!r} but the bundle folder is {read.top!r}"))
    outcome = None
    if read.unsafe:
        notes.append("the verdict was not recomputed: unsafe members are never written to disk")
    elif manifest and not manifest_problems:
        outcome, more, more_notes = recompute(read.files, manifest)
        problems += more
        notes += more_notes
    verdict = manifest.get("verdict") if isinstance(manifest.get("verdict"), dict) else {}
    return BundleCheck(str(path), read.top, tuple(sorted(read.files)), tuple(problems), tuple(notes), signature,
                       verdict.get("outcome"), outcome)


@dataclass(frozen=True)
class BundleSummary:
    path: str
    manifest: dict
    members: tuple[tuple[str, int], ...]  # (name inside the bundle folder, size)


def show_bundle(path: Path) -> BundleSummary:
    """What a bundle says about itself (its manifest and member list), without judging it."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"bundle {path} not found", "give the path of a .tar.gz written by `repro archive`")
    members: list[tuple[str, int]] = []
    manifest: dict = {}
    try:
        with tarfile.open(path, mode="r:gz") as tar:
            for info in tar:
                rel = info.name.partition("/")[2] or info.name
                members.append((rel, info.size))
                if rel == MANIFEST and info.isreg() and info.size <= MAX_MEMBER_BYTES:
                    handle = tar.extractfile(info)
                    loaded = load_bytes(handle.read(), f"{path}: {MANIFEST}", "bundle_member") if handle else None
                    manifest = loaded if isinstance(loaded, dict) else {}
    except (tarfile.TarError, EOFError, zlib.error, OSError, YamlRefused) as exc:
        raise InputError(f"{path} is not a readable bundle: {exc}", "check it with `repro bundle verify`") from None
    if not manifest:
        raise InputError(f"{path} has no manifest.yaml", "check it with `repro bundle verify`")
    return BundleSummary(str(path), manifest, tuple(members))
