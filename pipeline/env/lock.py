"""Environment locks: the exact files an environment installs, each with URL and sha256.

    repro env lock --env record-2025-09 [--wheelhouse DIR]
    repro env lock --env pypi-torch-2.8 --from-pypi

pip resolves the manifest's requirements for the image's Python and platform (a dry run with a
JSON report: pip is the resolver, not us); then every resolved file is downloaded and hashed here,
from its bytes, and checked against any sha256 the index announced. With --wheelhouse the files
are kept, so `repro env build --wheelhouse DIR` can later build with no network at all.

--from-pypi takes each file's sha256 from PyPI's own listing (pip's report carries it) instead of
downloading: the CUDA wheels of a torch closure are gigabytes, and PyPI never changes a published
file's bytes, so its sha256 is the pin. Every install later enforces it (`pip --require-hashes`).
It is refused for an environment that names any index besides PyPI.

The lock is written without timestamps: locking the same inputs twice gives the same bytes, so
its sha256 (an image label) names the inputs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.env.manifest import DIGEST_REF_RE, LOCAL_TAG_RE, Environment
from pipeline.errors import InputError, ManifestError, MissingDependency, RunFailed
from pipeline.findings import Finding, deviations_from_list
from pipeline.hashing import sha256_file
from pipeline.manifest_io import Fields, check_schema_version, load_yaml
from pipeline.redact import public_url, scrub_urls
from pipeline.regular_file import read_text_bounded
from pipeline.yamlio import dump

SCHEMA_VERSION = 2  # 2: deviations are findings (version 1 wrote sentences; still read)
PYPI_SIMPLE = "https://pypi.org/simple"
LOCK_HEADER = ("# The lock of environment {name} ({name}.yaml): exact files + sha256. Do not edit by hand:\n"
               "# empty sha256 and `unresolved` entries are unknown; `repro env lock --env {name}` fills them.\n")


@dataclass(frozen=True, kw_only=True)
class LockedFile:
    name: str
    version: str
    url: str
    filename: str
    sha256: str  # "" = not known yet; a build refuses it

    def requirement(self, url: str | None = None) -> str:
        """One line of a pip requirements file that installs exactly this file."""
        return f"{self.name} @ {url or self.url} --hash=sha256:{self.sha256}"


@dataclass(frozen=True, kw_only=True)
class Lock:
    environment: str
    manifest_sha256: str
    resolved_by: str
    python: str
    bases: dict
    packages: tuple[LockedFile, ...]
    build_packages: tuple[LockedFile, ...]
    flash_attention: dict | None
    expect: dict
    deviations: tuple[Finding, ...]  # the environment's, as locked (Environment.deviations())
    path: Path
    # requirements not resolved into files yet (a lock written offline); a build refuses any
    unresolved: tuple[str, ...] = field(default_factory=tuple)
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def sha256(self) -> str:
        return sha256_file(self.path)

    def unknown_entries(self) -> list[str]:
        out = [f"unresolved[{item}]" for item in self.unresolved]
        out += [f"packages[{f.name}]" for f in self.packages if not f.sha256]
        out += [f"build_packages[{f.name}]" for f in self.build_packages if not f.sha256]
        out += [f"bases.{stage}" for stage, ref in self.bases.items() if not DIGEST_REF_RE.match(ref)]
        return out

    def require_complete(self, env: Environment) -> None:
        """A build must never install an unhashed file: name the first unknown entry and the fix."""
        if self.manifest_sha256 != env.manifest_sha256:
            raise InputError(f"{self.path} is stale: {env.path.name} changed since it was locked",
                             f"run `repro env lock --env {env.name}` to re-resolve it")
        unknown = self.unknown_entries()
        if unknown:
            more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
            raise InputError(f"{self.path}: entry {unknown[0]} is not resolved to a file with a sha256{more}; the "
                             "build installs only hashed files",
                             f"run `repro env lock --env {env.name}` on a machine that reaches "
                             f"{' and '.join(env.index_urls)} (add --wheelhouse DIR to keep the files for an "
                             "offline build)")

    @property
    def files(self) -> tuple[LockedFile, ...]:
        """Every file the environment installs: the runtime closure, then the build packages not in it."""
        names = {f.filename for f in self.packages}
        return self.packages + tuple(f for f in self.build_packages if f.filename not in names)


def _locked_files(f: Fields, key: str) -> tuple[LockedFile, ...]:
    out = []
    for g in f.items(key, required=False):
        g.only("name", "version", "url", "filename", "sha256")
        out.append(LockedFile(name=g.req("name", str), version=g.req("version", str), url=g.req("url", str),
                              filename=g.req("filename", str), sha256=g.sha256("sha256", required=False) or ""))
    return tuple(out)


def load_lock_file(path: Path) -> Lock:
    # a lock's size limit (pipeline/yamlio.py), not a manifest's
    top = Fields(load_yaml(path, "lock", SCHEMA_VERSION), path)
    check_schema_version(top, SCHEMA_VERSION, older=(1,))
    top.only("schema_version", "environment", "manifest_sha256", "resolved_by", "python", "bases", "packages",
             "build_packages", "flash_attention", "expect", "deviations", "unresolved", "notes")
    fa = top.opt("flash_attention", dict)
    return Lock(environment=top.req("environment", str), manifest_sha256=top.sha256("manifest_sha256"),
                resolved_by=top.req("resolved_by", str), python=top.req("python", str),
                bases=dict(top.req("bases", dict)), packages=_locked_files(top, "packages"),
                build_packages=_locked_files(top, "build_packages"), flash_attention=fa,
                expect={str(k): str(v) for k, v in top.opt("expect", dict, {}).items()},
                deviations=deviations_from_list(top.opt("deviations", list, []), f"{path}: deviations"),
                unresolved=top.list_of("unresolved", str, required=False),
                notes=top.list_of("notes", str, required=False), path=Path(path))


def load_lock(env: Environment, path: Path | None = None) -> Lock:
    """The environment's committed lock (beside its manifest), or the one at `path` (resolved on a node)."""
    path = Path(path or env.lock_path)
    if not path.is_file():
        raise InputError(f"environment {env.name} has no lock ({path})",
                         f"run `repro env lock --env {env.name}` on a machine with network access")
    lock = load_lock_file(path)
    if lock.environment != env.name:
        raise ManifestError(path, "environment", f"is {lock.environment!r}, expected {env.name!r}",
                            f"re-run `repro env lock --env {env.name}`")
    return lock


def lock_to_yaml(lock: Lock) -> str:
    def files(items):
        return [{"name": f.name, "version": f.version, "url": f.url, "filename": f.filename, "sha256": f.sha256}
                for f in items]

    data = {"schema_version": SCHEMA_VERSION, "environment": lock.environment,
            "manifest_sha256": lock.manifest_sha256, "resolved_by": lock.resolved_by, "python": lock.python,
            "bases": dict(lock.bases), "packages": files(lock.packages),
            "build_packages": files(lock.build_packages), "flash_attention": lock.flash_attention,
            "expect": dict(lock.expect), "deviations": [d.to_dict() for d in lock.deviations],
            "unresolved": list(lock.unresolved), "notes": list(lock.notes)}
    return LOCK_HEADER.format(name=lock.environment) + dump(data, sort_keys=False, width=200)


# --- resolution -------------------------------------------------------------------------------------------------

def _public_url(url: str) -> str:
    """A URL without user:password@ (index credentials must never reach a lock or a log)."""
    return public_url(url, keep_query=True)


def _public_url_text(text: str) -> str:
    """Any URL credentials in a line of pip's output, blanked."""
    return scrub_urls(text)


def _pip_env() -> dict:
    # The machine's pip configuration (extra indexes, constraints, find-links) must not leak into a lock.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


def pip_resolve(env: Environment, requirements: tuple[str, ...], workdir: Path) -> list[dict]:
    """pip's own resolver, run for the image's Python and platform: returns the report's install list."""
    workdir.mkdir(parents=True, exist_ok=True)
    reqs = workdir / "requirements.in"
    reqs.write_text("\n".join(requirements) + "\n")
    report = workdir / "report.json"
    py_minor = ".".join(env.python.split(".")[:2])
    cmd = [sys.executable, "-m", "pip", "--isolated", "install", "--dry-run", "--ignore-installed", "--quiet",
           "--no-cache-dir", "--target", str(workdir / "target"), "--report", str(report),
           "--python-version", py_minor, "--implementation", "cp", "--only-binary=:all:",
           "--index-url", env.index_url]
    for url in env.extra_index_urls:
        cmd += ["--extra-index-url", url]
    for tag in env.platform_tags():
        cmd += ["--platform", tag]
    cmd += ["-r", str(reqs)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_pip_env())
    if proc.returncode != 0:
        tail = "\n".join(_public_url_text(line) for line in proc.stderr.strip().splitlines()[-8:])
        indexes = " and ".join(_public_url(u) for u in env.index_urls)
        fix = f"check the requirements in {env.path} and that {indexes} is reachable from here"
        if "No matching distribution" in proc.stderr and env.extra_index_urls:
            fix = (f"a pinned file is on none of {indexes} any more (nightlies are pruned): lock from a wheelhouse "
                   "that kept it, or use the environment's declared fallback")
        if "DO NOT MATCH THE HASHES" in proc.stderr:
            fix = "a file on the index does not match the sha256 the index announces: do not use it until explained"
        raise RunFailed(f"pip could not resolve environment {env.name}:\n{tail}", fix)
    return json.loads(read_text_bounded(report, 256 << 20, "pip report", "lock again"))["install"]




def _download(url: str, dest: Path | None) -> str:
    """Stream url (http, https or file) through sha256, into dest when given (pipeline/http.py: retries,
    resume of dest's .partial, atomic rename)."""
    from pipeline.atomic import commit
    from pipeline.http import HttpRefused, Policy, download

    part = dest.with_name(dest.name + ".partial") if dest is not None else None
    if part is not None:
        part.parent.mkdir(parents=True, exist_ok=True)
    try:
        got = download(url, part, policy=Policy(timeout_s=120))
    except HttpRefused as exc:
        if part is not None:
            part.unlink(missing_ok=True)
        raise MissingDependency(f"could not download {_public_url(url)}: {exc.what}",
                                "check the network or the index, then re-run `repro env lock`") from None
    if part is not None:
        commit(part, dest)
    return got.sha256


def fetch_and_hash(url: str, dest: Path | None, announced: str = "") -> str:
    """sha256 of a file's bytes (downloaded, or already kept at dest), checked against the index's."""
    kept = dest is not None and dest.is_file()
    sha = sha256_file(dest) if kept else _download(url, dest)
    if announced and sha != announced:
        if dest is not None and not kept:
            dest.unlink()
        name = dest.name if dest is not None else url.rsplit("/", 1)[-1]
        raise RunFailed(f"{name}: sha256 of the downloaded bytes is {sha}, but the index announced {announced}",
                        "the file changed or was corrupted in transit; do not use this index until that is explained")
    return sha


def _lock_files(items: list[dict], wheelhouse: Path | None, log: Callable[[str], None],
                hashes: str = "download") -> tuple[LockedFile, ...]:
    """Each resolved file with its sha256: from its bytes (`download`), or as the index announced it (`index`)."""
    out = []
    for item in sorted(items, key=lambda i: i["metadata"]["name"].lower()):
        info = item["download_info"]
        url = info["url"]
        filename = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
        announced = info.get("archive_info", {}).get("hashes", {}).get("sha256", "")
        if hashes == "index" and wheelhouse is None:
            if not announced:
                raise RunFailed(f"the index announced no sha256 for {filename}",
                                "lock without --from-pypi (every file is then downloaded and hashed here)")
            sha = announced
            log(f"  {filename}  sha256 {sha}  (as the index announces it)")
        else:
            sha = fetch_and_hash(url, wheelhouse / filename if wheelhouse else None, announced)
            log(f"  {filename}  sha256 {sha}" + ("  (matches the index)" if announced else ""))
        name = item["metadata"]["name"].lower().replace("_", "-").replace(".", "-")
        out.append(LockedFile(name=name, version=item["metadata"]["version"], url=_public_url(url),
                              filename=filename, sha256=sha))
    return tuple(out)


def resolve_bases(env: Environment, client=None) -> dict:
    """Digest references stay; local:TAG becomes that image's id (the sha256 of its config)."""
    out = {}
    for stage, ref in env.bases.items():
        m = LOCAL_TAG_RE.match(ref)
        if m is None:
            out[stage] = ref
            continue
        if client is None:
            from pipeline.docker_engine import connect

            client = connect().api
        import docker

        try:
            out[stage] = client.inspect_image(m["tag"])["Id"]
        except docker.errors.ImageNotFound:
            raise MissingDependency(f"base image {m['tag']} ({stage}) is not on this Docker engine",
                                    "build or load it first (tests: tests/docker_base.py ensure_test_base)") from None
    return out


def check_pypi_only(env: Environment) -> None:
    """--from-pypi trusts the index's sha256: only for PyPI, which never replaces a published file."""
    others = [_public_url(u) for u in env.index_urls if u.rstrip("/") != PYPI_SIMPLE]
    if others:
        raise InputError(f"environment {env.name} resolves from {', '.join(others)}, not from PyPI alone",
                         f"lock it without --from-pypi: `repro env lock --env {env.name}` (downloads and hashes "
                         "every file)")


def resolve_lock(env: Environment, wheelhouse: Path | None = None, client=None,
                 log: Callable[[str], None] = lambda line: None, from_pypi: bool = False,
                 out: Path | None = None, notes: tuple[str, ...] = ()) -> Lock:
    """Resolve env to a lock and write it to `out` (default: beside the manifest). Needs the index."""
    if from_pypi:
        check_pypi_only(env)
    hashes = "index" if from_pypi else "download"
    if wheelhouse is not None:
        wheelhouse.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="repro-lock-") as tmp:
        log(f"resolving {len(env.requirements)} requirements for Python {env.python} ({env.platform_tags()[0]}) "
            f"from {' and '.join(_public_url(u) for u in env.index_urls)}")
        packages = _lock_files(pip_resolve(env, env.requirements, Path(tmp) / "run"), wheelhouse, log, hashes)
        build_packages: tuple[LockedFile, ...] = ()
        if env.build_requirements:
            log(f"resolving the builder stage ({len(env.build_requirements)} more requirements)")
            items = pip_resolve(env, env.requirements + env.build_requirements, Path(tmp) / "build")
            build_packages = _lock_files(items, wheelhouse, log, hashes)
    pip_version = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True,
                                 env=_pip_env()).stdout.split()[1]
    fa = env.flash_attention
    fa_pin = None if fa is None else {
        "repository": fa.repository, "commit": fa.commit, "cutlass_commit": fa.cutlass_commit,
        "subdirectory": fa.subdirectory, "build_env": dict(sorted(fa.build_env.items()))}
    if fa_pin is not None and wheelhouse is not None:
        from pipeline.env.fa3 import archive_source

        log(f"packing FA3 {fa.commit[:12]} (cutlass {fa.cutlass_commit[:12]}) into the wheelhouse")
        archive = archive_source(fa_pin, wheelhouse)
        fa_pin.update(source_file=archive.name, source_sha256=sha256_file(archive))
    how = "sha256 as PyPI announces it" if from_pypi else "sha256 of the downloaded bytes"
    lock = Lock(environment=env.name, manifest_sha256=env.manifest_sha256,
                resolved_by=f"repro env lock{' --from-pypi' if from_pypi else ''} (pip {pip_version}; {how})",
                python=env.python, bases=resolve_bases(env, client), packages=packages, build_packages=build_packages,
                flash_attention=fa_pin, expect=env.expected, deviations=env.deviations(),
                path=Path(out or env.lock_path), notes=tuple(notes))
    from pipeline.atomic import write_text

    lock.path.parent.mkdir(parents=True, exist_ok=True)
    write_text(lock.path, lock_to_yaml(lock))
    return load_lock_file(lock.path)
