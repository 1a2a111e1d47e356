"""Environment manifests: manifests/environments/<name>.yaml loaded once into frozen types.

    env = load_environment(ws, "record-2025-09")   (ws: pipeline.workspace.Workspace)
    repro env lock --env record-2025-09            (reads this, writes <name>.lock.yaml beside it)

An environment says what to pin: the base images (by digest), the exact Python, the top-level
pip requirements (the lock holds the resolved closure with URLs and sha256), the Dockerfile that
builds it, the FA3 pin and which components `repro env verify` reads inside the image. An environment depends on
no record manifest: it loads in a registry that a fresh `repro records import` wrote, whatever that holds. Its
`record` names the record it was made for; that record's software pins, when the registry holds it, add the
`software.differs` deviations. An environment that is not the record's own (a
fallback) carries a `deviation` text and every use of it is reported as a deviation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import InputError, ReproError
from pipeline.findings import Finding, differences
from pipeline.hashing import sha256_file
from pipeline.manifest_io import Fields, check_schema_version, load_yaml
from pipeline.records.model import FlashAttentionPin, Software, flash_attention_pin, load_record
from pipeline.workspace import Workspace

SCHEMA_VERSION = 1
COMPONENTS = ("python", "torch", "triton", "flash_attention", "cuda", "packages")
# What an image reference must look like to count as pinned: a registry digest or a local image id.
DIGEST_REF_RE = re.compile(r"^(?:[^@\s]+@)?sha256:[0-9a-f]{64}$")
LOCAL_TAG_RE = re.compile(r"^local:(?P<tag>[^\s@]+)$")


@dataclass(frozen=True, kw_only=True)
class Environment:
    name: str
    description: str
    dockerfile: str  # as written: docker/<file>, the tool's docker folder
    dockerfile_path: Path
    record: str  # "" for environments that serve no record (tests, demos)
    deviation: str  # "" for the record's own environment; why it differs otherwise
    fallbacks: tuple[str, ...]
    # stage name -> image reference: "repo:tag@sha256:…", or "local:TAG" (an image only this engine
    # has; the lock replaces it with that image's id, which is a content digest too)
    bases: dict
    python: str
    glibc: str  # the base's glibc: which manylinux wheels fit
    arch: str
    apt_snapshot: str
    index_url: str
    extra_index_urls: tuple[str, ...]
    requirements: tuple[str, ...]
    build_requirements: tuple[str, ...]
    flash_attention: FlashAttentionPin | None
    components: tuple[str, ...]
    expect: dict  # component -> version string that verify compares against
    path: Path
    record_software: Software | None = None  # the record's pins, read once with the manifest
    record_environment: str = ""  # the record's own environment (this one's name, unless this is a fallback)

    @property
    def manifest_sha256(self) -> str:
        return sha256_file(self.path)

    @property
    def lock_path(self) -> Path:
        """The committed lock, beside the manifest."""
        return self.path.with_name(f"{self.name}.lock.yaml")

    def platform_tags(self) -> list[str]:
        """manylinux tags this base runs, newest first: pip's --platform wants every one listed."""
        major, minor = (int(x) for x in self.glibc.split("."))
        tags = [f"manylinux_{major}_{m}_{self.arch}" for m in range(minor, 16, -1)]
        return tags + [f"manylinux2014_{self.arch}", f"linux_{self.arch}"]

    @property
    def index_urls(self) -> tuple[str, ...]:
        return (self.index_url, *self.extra_index_urls)

    @property
    def expected(self) -> dict:
        """component -> the version verify must find: Python from `python`, the rest from `expect`."""
        return {"python": self.python, **self.expect}

    def deviations(self) -> tuple[Finding, ...]:
        """Every way this environment differs from its record's software, as findings: always reported."""
        out = []
        if self.deviation:
            out.append(Finding("environment.fallback", "deviation", {
                "environment": self.name, "record_environment": self.record_environment or self.record,
                "why": self.deviation}))
        software = self.record_software
        if software is not None:
            found = {**self.expected, "torch_cuda": self.expected.get("cuda")}
            out += differences("software.differs", software.pins(), found)
        return tuple(out)


def environment_names(ws: Workspace) -> list[str]:
    return sorted(p.name[: -len(".yaml")] for p in ws.environments_dir.glob("*.yaml")
                  if not p.name.endswith(".lock.yaml"))


def _dockerfile_path(ws: Workspace, dockerfile: str) -> Path:
    """docker/<file> names a file of the tool's docker folder (the checkout's, or the wheel's copy)."""
    relative = Path(dockerfile)
    if relative.parts[:1] == ("docker",):
        return ws.docker_dir.joinpath(*relative.parts[1:])
    return ws.docker_dir.parent / relative


def _bases(f: Fields) -> dict:
    bases = {}
    for stage, ref in f.data.items():
        if not isinstance(ref, str) or not (DIGEST_REF_RE.match(ref) or LOCAL_TAG_RE.match(ref)):
            raise f.fail(str(stage), f"is {ref!r}, not pinned",
                         "write the image as name:tag@sha256:<digest> (a tag alone is rebuilt over time), "
                         "or local:<tag> for an image built on this engine")
        bases[str(stage)] = ref
    if not bases:
        raise f.fail("", "names no base image", "add at least `runtime: name:tag@sha256:<digest>`")
    return bases


def _served_record(record: str, ws: Workspace):
    """The record this environment was made for, when the registry holds a readable manifest of it; an
    environment never depends on it (a fresh import may lack it, or write it differently)."""
    if not record or not (ws.records_dir / f"{record}.yaml").is_file():
        return None
    try:
        return load_record(record, ws.records_dir)
    except ReproError:
        return None


def _flash_attention(top: Fields) -> FlashAttentionPin | None:
    """The FA3 build this environment compiles: its own pin, written here (never taken from a record manifest)."""
    value = top.data.get("flash_attention")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise top.fail("flash_attention", f"is {value!r}, not a pin",
                       "write the FA3 pin here (repository, branch, commit, cutlass_commit, subdirectory, build_env): "
                       "an environment depends on no record manifest")
    return flash_attention_pin(top.sub("flash_attention"))


def load_environment_file(path: Path, ws: Workspace) -> Environment:
    top = Fields(load_yaml(path), path)
    check_schema_version(top, SCHEMA_VERSION)
    top.only("schema_version", "name", "description", "dockerfile", "record", "deviation", "fallbacks", "bases",
             "python", "platform", "apt_snapshot", "index_url", "extra_index_urls", "requirements",
             "build_requirements", "flash_attention", "components", "expect")
    name = top.req("name", str)
    if name != Path(path).name[: -len(".yaml")]:
        raise top.fail("name", f"is {name!r} but the file is {Path(path).name}",
                       "name the file <name>.yaml or correct the name field")
    dockerfile = top.req("dockerfile", str)
    dockerfile_path = _dockerfile_path(ws, dockerfile)
    if ".." in Path(dockerfile).parts or not dockerfile_path.is_file():
        raise top.fail("dockerfile", f"{dockerfile} is not a file of {ws.docker_dir}",
                       "write docker/<file> naming one of the tool's Dockerfiles")
    record = top.opt("record", str, "")
    served = _served_record(record, ws)
    record_software = served.software if served else None
    flash_attention = _flash_attention(top)
    components = top.list_of("components", str)
    for i, component in enumerate(components):
        if component not in COMPONENTS:
            raise top.fail(f"components[{i}]", f"is {component!r}", f"use some of: {', '.join(COMPONENTS)}")
    expect = top.opt("expect", dict, {})
    unknown = sorted(set(expect) - set(COMPONENTS))
    if unknown:
        raise top.fail(f"expect.{unknown[0]}", "is not a component", f"use some of: {', '.join(COMPONENTS)}")
    requirements = top.list_of("requirements", str)
    for i, requirement in enumerate(requirements):
        if re.match(r"^\s*kernels\s*(?:[=<>!~;\[@ ]|$)", requirement, re.IGNORECASE):
            raise top.fail(f"requirements[{i}]", f"is {requirement!r}: the Hugging Face kernels client, which "
                           "downloads unpinned kernels from the hub when the program runs",
                           "remove it: repro's stand-in (pipeline/runs/hub_standin/) answers the program's "
                           "get_kernel, first on its path")
    platform = top.sub("platform")
    platform.only("glibc", "arch")
    glibc = platform.req("glibc", str)
    if not re.match(r"^\d+\.\d+$", glibc):
        raise platform.fail("glibc", f"is {glibc!r}", "write the base image's glibc version, e.g. \"2.35\"")
    return Environment(
        name=name, description=top.req("description", str).strip(), dockerfile=dockerfile,
        dockerfile_path=dockerfile_path, record=record, record_software=record_software,
        record_environment=served.environment if served else "",
        deviation=top.opt("deviation", str, "").strip(), fallbacks=top.list_of("fallbacks", str, required=False),
        bases=_bases(top.sub("bases")), python=top.req("python", str), glibc=glibc,
        arch=platform.req("arch", str), apt_snapshot=top.opt("apt_snapshot", str, ""),
        index_url=top.req("index_url", str), extra_index_urls=top.list_of("extra_index_urls", str, required=False),
        requirements=requirements,
        build_requirements=top.list_of("build_requirements", str, required=False),
        flash_attention=flash_attention, components=components,
        expect={str(k): str(v) for k, v in expect.items()}, path=Path(path))


def load_environment(ws: Workspace, name: str) -> Environment:
    path = ws.environments_dir / f"{name}.yaml"
    if name.endswith(".lock") or "/" in name or name.startswith(".") or not path.is_file():
        known = ", ".join(environment_names(ws)) or "none"
        raise InputError(f"unknown environment {name!r} (no {path})", f"use one of: {known} (`repro env list`)")
    return load_environment_file(path, ws)
