"""Build an environment's image from its lock, through the Docker SDK's low-level build API.

    repro env build [--env record-2025-09] [--wheelhouse DIR] [--no-cache] [--tag T]
    build_image(ws, "record-2025-09", log=print)

One function for every environment: the record's CUDA image and the tests' bookworm image go through
the same staging (requirements from the lock, wheelhouse checked file by file against the lock's
sha256), the same build args and labels, the same streamed log and the same failure report (the
failing step's own output). The result lands in state/image.json for the stages that run it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.parse
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pipeline.clock import utc_at
from pipeline.env.dockerfile_policy import check_dockerfile
from pipeline.env.image import LABEL_PREFIX, connect, save_image_state, state_from_image
from pipeline.env.lock import Lock, LockedFile, load_lock
from pipeline.env.manifest import Environment, load_environment
from pipeline.errors import InputError, Interrupted, MissingDependency, RunFailed
from pipeline.findings import Finding
from pipeline.hashing import sha256_file
from pipeline.workspace import Workspace, checkout_root

STEP_RE = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
WHEELHOUSE_IN_IMAGE = "/tmp/wheelhouse"


@dataclass(frozen=True, kw_only=True)
class BuildResult:
    image_id: str
    tag: str
    environment: str
    lock_sha256: str
    labels: dict
    layers: tuple[str, ...]
    deviations: tuple[Finding, ...]
    seconds: float
    steps: int
    offline: bool
    state_path: str


def _git(*args: str) -> str:
    """git in the clone the tool runs from; "" for an installed wheel (no clone) or without git."""
    root = checkout_root()
    if root is None:
        return ""
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    except OSError:
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""


def source_date_epoch() -> int:
    """SOURCE_DATE_EPOCH if set, else the commit time of HEAD: a date fixed by the inputs, not the clock."""
    if os.environ.get("SOURCE_DATE_EPOCH", "").isdigit():
        return int(os.environ["SOURCE_DATE_EPOCH"])
    stamp = _git("log", "-1", "--format=%ct")
    return int(stamp) if stamp.isdigit() else 0


def source_revision() -> tuple[str, str]:
    """(repository URL without credentials, HEAD commit with "-dirty" if docker/ or manifests/ changed)."""
    from pipeline.redact import public_url

    url = _git("config", "--get", "remote.origin.url")
    url = public_url(url, keep_query=True) if "://" in url else url
    commit = _git("rev-parse", "HEAD")
    if commit and _git("status", "--porcelain", "--", "docker", "manifests/environments"):
        commit += "-dirty"
    return url, commit


def build_args(env: Environment, lock: Lock, epoch: int, max_jobs: int) -> dict:
    """Every ARG the Dockerfile declares, from the lock (stage `runtime` -> RUNTIME_IMAGE, …)."""
    from dockerfile_parse import DockerfileParser

    values = {f"{stage.upper()}_IMAGE": ref for stage, ref in lock.bases.items()}
    values.update(PYTHON_VERSION=lock.python, SOURCE_DATE_EPOCH=str(epoch), MAX_JOBS=str(max_jobs))
    if env.apt_snapshot:
        values["APT_SNAPSHOT"] = env.apt_snapshot
    fa = lock.flash_attention
    if fa:
        values.update(FA3_REPOSITORY=fa["repository"], FA3_COMMIT=fa["commit"],
                      FA3_CUTLASS_COMMIT=fa["cutlass_commit"], FA3_SUBDIRECTORY=fa["subdirectory"],
                      FA3_BUILD_ENV=" ".join(f"{k}={v}" for k, v in sorted(fa["build_env"].items())))
    declared = {i["value"].split("=")[0].strip() for i in DockerfileParser(path=str(env.dockerfile_path)).structure
                if i["instruction"] == "ARG"}
    return {k: v for k, v in values.items() if k in declared}


def image_labels(env: Environment, lock: Lock, epoch: int) -> dict:
    source, revision = source_revision()
    stage = "runtime" if "runtime" in lock.bases else next(iter(lock.bases))
    runtime_base = lock.bases[stage]
    name, _, digest = runtime_base.rpartition("@")
    name = name or env.bases[stage].removeprefix("local:")  # a local image id: name it by its tag
    return {
        "org.opencontainers.image.title": f"repro {env.name}",
        "org.opencontainers.image.description": env.description.splitlines()[0][:200],
        "org.opencontainers.image.source": source or "local checkout (no git remote)",
        "org.opencontainers.image.revision": revision,
        "org.opencontainers.image.created": utc_at(epoch),
        "org.opencontainers.image.base.name": name,
        "org.opencontainers.image.base.digest": digest or runtime_base,
        LABEL_PREFIX + "environment": env.name,
        LABEL_PREFIX + "record": env.record,
        LABEL_PREFIX + "environment-lock.sha256": lock.sha256,
        LABEL_PREFIX + "deviations": json.dumps([d.to_dict() for d in lock.deviations]),
    }


def _wheelhouse_url(file: LockedFile) -> str:
    return f"file://{WHEELHOUSE_IN_IMAGE}/{urllib.parse.quote(file.filename)}"


def stage_context(env: Environment, lock: Lock, context: Path, wheelhouse: Path | None) -> None:
    """The build context: Dockerfile, requirements from the lock, the checked wheels, the environment record."""
    shutil.copyfile(env.dockerfile_path, context / "Dockerfile")
    dockerignore = env.dockerfile_path.parent / ".dockerignore"
    if dockerignore.is_file():
        shutil.copyfile(dockerignore, context / ".dockerignore")
    for folder in ("requirements", "wheelhouse", "fa3"):
        (context / folder).mkdir()
    files = {f.filename: f for f in lock.packages + lock.build_packages}
    if wheelhouse is not None:
        for filename, file in sorted(files.items()):
            source = wheelhouse / filename
            if not source.is_file():
                raise InputError(f"wheelhouse {wheelhouse} lacks {filename} ({file.name} {file.version})",
                                 f"fill it with `repro env lock --env {env.name} --wheelhouse {wheelhouse}` "
                                 "on a machine with network access")
            actual = sha256_file(source)
            if actual != file.sha256:
                raise InputError(f"wheelhouse file {source}: sha256 is {actual}, the lock says {file.sha256}",
                                 "replace it with the file the lock names (`repro env lock --wheelhouse DIR` "
                                 "downloads it again); never edit the lock to match a file")
            target = context / "wheelhouse" / filename
            try:
                os.link(source, target)  # same filesystem: no copy of multi-GB wheels
            except OSError:
                shutil.copyfile(source, target)

    fa = lock.flash_attention
    if wheelhouse is not None and fa:
        # offline: FA3's source comes from the wheelhouse too, checked like every wheel
        source = wheelhouse / fa.get("source_file", f"flash-attention-{fa['commit']}.tar")
        if not fa.get("source_sha256") or not source.is_file():
            raise InputError(f"an offline build needs FA3's source {source.name} in {wheelhouse}, with its sha256 "
                             "in the lock", f"run `repro env lock --env {env.name} --wheelhouse {wheelhouse}` "
                             "on a machine with network and git")
        actual = sha256_file(source)
        if actual != fa["source_sha256"]:
            raise InputError(f"wheelhouse file {source}: sha256 is {actual}, the lock says {fa['source_sha256']}",
                             "replace it with `repro env lock --wheelhouse DIR` (it packs the pinned commit)")
        shutil.copyfile(source, context / "fa3" / "source.tar")

    def requirements(items: tuple[LockedFile, ...]) -> str:
        return "".join(f.requirement(_wheelhouse_url(f) if wheelhouse else None) + "\n" for f in items)

    (context / "requirements" / "runtime.txt").write_text(requirements(lock.packages))
    (context / "requirements" / "build.txt").write_text(requirements(lock.build_packages))
    record = {"environment": env.name, "record": env.record, "lock_sha256": lock.sha256,
              "deviations": [d.to_dict() for d in lock.deviations], "expect": lock.expect}
    (context / "repro-environment.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


def _stream_build(client, log: Callable[[str], None], **kwargs) -> tuple[str, int]:
    """Run the build, log each line live; on failure raise with the failing step's own output."""
    step, total, instruction = 0, 0, ""
    step_output: deque[str] = deque(maxlen=40)
    image_id, started, pulled = "", time.monotonic(), set()
    for chunk in client.build(decode=True, **kwargs):
        if "stream" in chunk:
            for line in chunk["stream"].splitlines():
                m = STEP_RE.match(line)
                if m:
                    step, total, instruction = int(m[1]), int(m[2]), m[3]
                    step_output.clear()
                    log(f"[{step}/{total} {time.monotonic() - started:6.1f}s] {instruction}")
                elif line.strip():
                    step_output.append(line)
                    log(f"    {line}")
                    if line.startswith("Successfully built "):
                        image_id = image_id or line.split()[-1]
        elif "aux" in chunk and "ID" in chunk["aux"]:
            image_id = chunk["aux"]["ID"]
        elif "status" in chunk:  # base image pulls: one line per layer and state, not every progress tick
            key = (chunk.get("id"), chunk["status"])
            if key not in pulled:
                pulled.add(key)
                log(f"    pull {chunk.get('id', '')} {chunk['status']}")
        elif "error" in chunk:
            detail = chunk.get("errorDetail", {}).get("message") or chunk["error"]
            output = "\n".join(f"    {line}" for line in step_output)
            where = f"step {step}/{total} ({instruction})" if step else "before the first step"
            fix = "read the step's output above, fix what it names, then run `repro env build` again"
            if "DO NOT MATCH THE HASHES" in output:
                fix = "a file does not match the lock's sha256: re-download it (`repro env lock --wheelhouse DIR`)"
            raise RunFailed(f"image build failed at {where}: {detail.strip()}\n  output of that step:\n{output}", fix)
    if not image_id:
        raise RunFailed("the engine finished the build without an image id", "run the build again with --no-cache")
    return image_id, step


def build_image(ws: Workspace, env_name: str, *, wheelhouse: Path | None = None, nocache: bool = False,
                tag: str | None = None, max_jobs: int | None = None, lock_file: Path | None = None, client=None,
                log: Callable[[str], None] = lambda line: None) -> BuildResult:
    """Build env_name's image from its committed lock, or `lock_file` (one resolved on this node).

    `wheelhouse`: the lock's files, checked against it and installed offline; `tag` defaults to
    repro/<environment>:<lock sha256[:12]>; `max_jobs`: compile jobs inside the build (default: this
    machine's cores)."""
    env = load_environment(ws, env_name)
    lock = load_lock(env, lock_file)
    lock.require_complete(env)
    epoch = source_date_epoch()
    args = build_args(env, lock, epoch, max_jobs or os.cpu_count() or 1)
    policy = check_dockerfile(env.dockerfile_path, args)
    if not policy.ok:
        first = policy.violations[0]
        raise InputError(f"{env.dockerfile}:{first.line}: {first.problem} ({len(policy.violations)} violation(s))",
                         f"{first.fix}; see `repro env check-dockerfile {env.dockerfile}`")
    if wheelhouse is not None and not Path(wheelhouse).is_dir():
        raise InputError(f"wheelhouse {wheelhouse} is not a folder",
                         "give the folder that `repro env lock --wheelhouse DIR` filled")
    client = client or connect()
    import docker

    for stage, ref in lock.bases.items():
        if ref.startswith("sha256:"):  # a local image id cannot be pulled: it must be here
            try:
                client.inspect_image(ref)
            except docker.errors.ImageNotFound:
                raise MissingDependency(f"base image {ref} ({stage}) is not on this engine",
                                        f"re-create it, then `repro env lock --env {env.name}` again") from None
    tag = tag or f"repro/{env.name}:{lock.sha256[:12]}"
    labels = image_labels(env, lock, epoch)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="repro-build-") as tmp:
        context = Path(tmp)
        stage_context(env, lock, context, Path(wheelhouse) if wheelhouse else None)
        mode = f"offline, wheelhouse {wheelhouse}" if wheelhouse else "online"
        log(f"building {tag} from {env.dockerfile} ({mode})")
        try:
            image_id, steps = _stream_build(client, log, path=str(context), dockerfile="Dockerfile", tag=tag,
                                            buildargs=args, labels=labels, rm=True, forcerm=True,
                                            nocache=nocache, pull=False)
        except KeyboardInterrupt:
            raise Interrupted("image build interrupted",
                              "run `repro env build` again; finished steps are cached") from None
        except docker.errors.APIError as exc:
            raise RunFailed(f"the Docker engine refused the build: {exc.explanation or exc}",
                            "check the engine (`docker info`) and its free disk space") from None
    seconds = time.monotonic() - started
    state = state_from_image(client, image_id, "build", build_seconds=round(seconds, 1))
    state_path = save_image_state(state, ws.state)
    log(f"built {image_id} as {tag} in {seconds:.1f}s; recorded in {state_path}")
    return BuildResult(image_id=image_id, tag=tag, environment=env.name, lock_sha256=lock.sha256,
                       labels=state.labels, layers=state.layers, deviations=lock.deviations, seconds=round(seconds, 1),
                       steps=steps, offline=wheelhouse is not None, state_path=str(state_path))
