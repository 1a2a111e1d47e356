"""Pinning policy for Dockerfiles: nothing may enter an image that is not fixed by a digest or hash.

    repro env check-dockerfile [docker/Dockerfile] [--build-arg NAME=VALUE ...] [--json]

Rules, per instruction (dockerfile-parse reads the file, continuation lines joined):
  FROM       an earlier stage, `scratch`, name@sha256:<digest> or a local image id sha256:<id>,
             after ARG substitution (defaults, overridden by --build-arg as a build would)
  pip        `pip install` / `pip download` need --require-hashes; `pip wheel` builds local source only
             (--no-index --no-deps)
  apt        `apt-get install` needs pkg=version for every package, or the stage's sources rewritten to
             a dated snapshot (snapshot.ubuntu.com / snapshot.debian.org + YYYYMMDDTHHMMSSZ) first
  git        `git clone` needs a checkout of a full 40-hex commit in the same RUN
  curl/wget  need `sha256sum -c` in the same RUN; ADD of a URL is refused (the classic builder has no --checksum)
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path

from pipeline.env.manifest import DIGEST_REF_RE
from pipeline.errors import InputError
from pipeline.regular_file import read_bounded

SNAPSHOT_RE = re.compile(r"snapshot\.(?:ubuntu\.com|debian\.org)\S*?/\d{8}T\d{6}Z")
COMMIT_RE = re.compile(r"\bcheckout\s+(?:--detach\s+|-q\s+)*['\"]?([0-9a-f]{40})\b")
SEGMENT_SPLIT_RE = re.compile(r"&&|\|\||;|\bthen\b|\belse\b|\bfi\b|\|")
VAR_RE = re.compile(r"\$\{(\w+)\}|\$(\w+)")


@dataclass(frozen=True)
class Violation:
    line: int  # 1-based line where the instruction starts
    instruction: str
    problem: str
    fix: str


@dataclass(frozen=True)
class PolicyReport:
    path: str
    violations: tuple[Violation, ...]
    instructions_checked: int
    base_images: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.violations


def _substitute(text: str, args: dict) -> str:
    return VAR_RE.sub(lambda m: args.get(m.group(1) or m.group(2), m.group(0)), text)


def _pip_problems(segment: str) -> list[tuple[str, str]]:
    m = re.search(r"pip['\"]?\s+(install|download|wheel)\b", segment)
    if not m:
        return []
    verb = m.group(1)
    if verb == "wheel":
        if "--no-index" in segment and "--no-deps" in segment:
            return []
        return [("`pip wheel` may fetch from an index", "add --no-index --no-deps (build local source only)")]
    if "--require-hashes" not in segment:
        return [(f"`pip {verb}` without --require-hashes",
                 "install from a requirements file of `name @ url --hash=sha256:…` lines with --require-hashes")]
    return []


def _apt_problems(segment: str, snapshot_seen: bool) -> list[tuple[str, str]]:
    m = re.search(r"\bapt(?:-get)?\s+(?:\S+\s+)*?install\b(.*)", segment)
    if not m or snapshot_seen:
        return []
    packages = [t for t in m.group(1).split() if not t.startswith("-")]
    loose = [p for p in packages if "=" not in p]
    if not loose:
        return []
    return [(f"`apt-get install` of unpinned package(s): {', '.join(loose)}",
             "pin each as name=version, or rewrite the sources to a dated snapshot "
             "(snapshot.ubuntu.com/ubuntu/YYYYMMDDTHHMMSSZ) before installing")]


def _run_problems(command: str, snapshot_seen: bool) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    for segment in SEGMENT_SPLIT_RE.split(command):
        problems += _pip_problems(segment)
        problems += _apt_problems(segment, snapshot_seen)
        snapshot_seen = snapshot_seen or bool(SNAPSHOT_RE.search(segment))
    if re.search(r"\bgit\s+clone\b", command) and not COMMIT_RE.search(command):
        problems.append(("`git clone` without a checkout of a full commit",
                         "follow it with `git checkout <40-hex commit>` in the same RUN"))
    if re.search(r"\b(curl|wget)\b", command) and "sha256sum -c" not in command:
        problems.append(("a download (curl/wget) whose bytes are not checked",
                         "verify it in the same RUN: `echo '<sha256>  file' | sha256sum -c`"))
    return problems


MAX_DOCKERFILE_BYTES = 1 << 20


def _read_dockerfile(path: Path) -> bytes:
    """The file's bytes, bounded: the parser is given bytes, since it takes a path whose name does not end
    in "Dockerfile" (docker/Dockerfile.fa3, a file given on the command line) for a folder."""
    if not path.is_file():
        raise InputError(f"no Dockerfile at {path}", "give the path of a Dockerfile (default docker/Dockerfile)")
    text = read_bounded(path, MAX_DOCKERFILE_BYTES, "Dockerfile", "give a Dockerfile")
    return text


def check_dockerfile(path: Path, build_args: dict | None = None) -> PolicyReport:
    """Judge one Dockerfile; build_args override ARG defaults the way a build would."""
    from dockerfile_parse import DockerfileParser

    path = Path(path)
    parser = DockerfileParser(fileobj=io.BytesIO(_read_dockerfile(path)), build_args=dict(build_args or {}))
    args: dict = {}
    stages: set[str] = set()
    bases: list[str] = []
    violations: list[Violation] = []
    snapshot_seen = False
    checked = 0

    def flag(item, problem, fix):
        violations.append(Violation(item["startline"] + 1, item["instruction"], problem, fix))

    for item in parser.structure:
        kind, value = item["instruction"], item["value"]
        if kind == "COMMENT":
            continue
        checked += 1
        if kind == "ARG":
            name, _, default = value.partition("=")
            name = name.strip()
            # a build arg wins over every default; a redeclaration without a default keeps the global one
            if name in (build_args or {}):
                args[name] = build_args[name]
            elif default:
                args[name] = default.strip().strip('"')
        elif kind == "FROM":
            words = value.split()
            image = _substitute(words[0], args)
            earlier_stage = image.lower() in stages
            if len(words) >= 3 and words[1].lower() == "as":
                stages.add(words[2].lower())
            snapshot_seen = False
            if earlier_stage or image == "scratch":
                continue
            bases.append(image)
            if "$" in image:
                flag(item, f"FROM {words[0]} has no value", "give the ARG a digest default or pass it as a build arg")
            elif not DIGEST_REF_RE.match(image):
                flag(item, f"FROM {image} is not pinned by digest",
                     "write name:tag@sha256:<digest> (tags are rebuilt over time)")
        elif kind == "RUN":
            command = _substitute(value, args)
            for problem, fix in _run_problems(command, snapshot_seen):
                flag(item, problem, fix)
            if SNAPSHOT_RE.search(command):
                snapshot_seen = True
        elif kind == "ADD" and re.search(r"\bhttps?://", value):
            flag(item, "ADD of a URL: its bytes are not checked",
                 "download in a RUN with `sha256sum -c`, or put the file in the build context")
    return PolicyReport(path=str(path), violations=tuple(violations), instructions_checked=checked,
                        base_images=tuple(bases))
