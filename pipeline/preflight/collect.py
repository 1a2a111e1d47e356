"""Collect HostFacts from a source: this machine (HostSources) or a folder of saved outputs (SavedSources).

    facts = collect(HostSources(), runtime="host", locations={"data": Path("data"), ...})
    facts = collect(SavedSources(Path("../shared/fixtures/hosts/h200-1gpu")), runtime="host", locations={})

A source that is absent or unreadable (no nvidia-smi, no Docker daemon, no image built yet) is
recorded in HostFacts.missing with the reason, and collection carries on: preflight must report on
any machine, including one without a GPU. Both source kinds feed the same parsers with real text.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from pipeline.errors import InputError, ReproError
from pipeline.preflight.facts import DiskFacts, HostFacts, MissingSource
from pipeline.preflight.parse import (
    allowed_environment,
    parse_docker_info,
    parse_lscpu,
    parse_meminfo,
    parse_nvidia_smi_xml,
    parse_os_release,
    parse_runtime_versions,
    parse_topology,
)
from pipeline.redact import URL_CREDENTIALS

# Printed by the python of the runtime that will train: the versions a run would actually get.
VERSIONS_SNIPPET = r"""
import json, sys
out = {"python": sys.version}
try:
    import torch
except Exception as exc:
    out["error"] = "import torch failed: %r" % (exc,)
else:
    out["torch"] = torch.__version__
    out["cuda"] = torch.version.cuda
    out["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    try:
        out["nccl"] = torch.cuda.nccl.version()
    except Exception:
        out["nccl"] = None
    out["cuda_available"] = torch.cuda.is_available()
    out["device_count"] = torch.cuda.device_count() if out["cuda_available"] else 0
    out["devices"] = [torch.cuda.get_device_name(i) for i in range(out["device_count"])]
try:
    import triton
    out["triton"] = triton.__version__
except Exception:
    out["triton"] = None
print(json.dumps(out))
"""

# Saved outputs: what a folder such as ../shared/fixtures/hosts/h200-1gpu holds for each source.
SAVED_FILES = {
    "nvidia-smi -q -x": "nvidia-smi-q.xml",
    "nvidia-smi topo -m": "nvidia-smi-topo.txt",
    "lscpu": "lscpu.txt",
    "/proc/meminfo": "meminfo.txt",
    "/etc/os-release": "os-release.txt",
    "uname -r": "uname.txt",
    "runtime": "torch-env.json",
    "docker": "docker-info.json",
    "disk": "disk.json",
    "environment": "environ.json",
}
# Error texts can quote URLs (DOCKER_HOST, proxies); a password inside one must not reach preflight.json.
_URL_CREDENTIALS = URL_CREDENTIALS  # pipeline/redact.py: the one pattern
_COMMANDS = {"nvidia-smi -q -x": ["nvidia-smi", "-q", "-x"], "nvidia-smi topo -m": ["nvidia-smi", "topo", "-m"],
             "lscpu": ["lscpu"]}


class SourceMissing(Exception):
    def __init__(self, reason: str):
        reason = _URL_CREDENTIALS.sub("[REDACTED]", reason)
        super().__init__(reason)
        self.reason = reason


class HostSources:
    """This machine: subprocesses, /proc and /etc, statvfs, the Docker SDK."""

    def __init__(self, timeout_s: float = 60.0, python: str = sys.executable):
        self.timeout_s, self.python = timeout_s, python
        self.description = "this machine"

    def _run(self, argv: list[str], timeout_s: float | None = None) -> str:
        if shutil.which(argv[0]) is None:
            raise SourceMissing(f"{argv[0]} not found on PATH")
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s or self.timeout_s,
                                  env={**os.environ, "LC_ALL": "C"})
        except subprocess.TimeoutExpired:
            raise SourceMissing(f"`{' '.join(argv[:3])}` did not answer within {timeout_s or self.timeout_s:.0f} s") \
                from None
        except OSError as exc:
            raise SourceMissing(f"`{argv[0]}` could not start: {exc}") from None
        if done.returncode != 0:
            said = (done.stderr.strip() or done.stdout.strip()).splitlines()
            raise SourceMissing(f"`{' '.join(argv[:3])}` exited {done.returncode}: {said[-1] if said else 'no output'}")
        return done.stdout

    def text(self, source: str) -> str:
        if source in _COMMANDS:
            return self._run(_COMMANDS[source])
        if source == "uname -r":
            return os.uname().release
        paths = {"/proc/meminfo": ["/proc/meminfo"], "/etc/os-release": ["/etc/os-release", "/usr/lib/os-release"]}
        for path in paths[source]:
            try:
                return Path(path).read_text()
            except OSError:
                continue
        raise SourceMissing(f"{source} is not readable here")

    def environment(self) -> Mapping[str, str]:
        return os.environ

    def docker_info(self) -> dict:
        client = _docker_client()
        try:
            return client.info()
        finally:
            client.close()

    def disk(self, label: str, path: Path, present: Path | None) -> DiskFacts:
        # The folder may not exist yet (no data fetched): measure the file system it will be created on.
        probe = Path(path).absolute()
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        try:
            st = os.statvfs(probe)
        except OSError as exc:
            raise SourceMissing(f"statvfs({probe}) failed: {exc}") from None
        present_bytes = None
        if present is not None and present.is_dir():
            present_bytes = sum(f.stat().st_size for f in present.rglob("*") if f.is_file())
        return DiskFacts(label=label, path=str(path), total_bytes=st.f_blocks * st.f_frsize,
                         free_bytes=st.f_bavail * st.f_frsize, present_bytes=present_bytes)

    def runtime(self, runtime: str) -> tuple[str, str, str | None]:
        """(the snippet's output, where it ran, why GPUs were not given) in the runtime that will train."""
        if runtime == "host":
            return self._run([self.python, "-c", VERSIONS_SNIPPET], timeout_s=180), f"host: {self.python}", None
        return _run_in_image(VERSIONS_SNIPPET)


def _docker_client():
    try:
        import docker

        client = docker.from_env(timeout=10)
        client.ping()
        return client
    except Exception as exc:  # the SDK raises several types for "no daemon"
        raise SourceMissing(f"Docker daemon not reachable ({type(exc).__name__}: {str(exc)[:160]})") from None


def _image_reference() -> str:
    try:
        from pipeline.env.image import load_image_state  # written by `repro env build`; may not exist in this checkout
    except ImportError:
        raise SourceMissing("this checkout has no image support (pipeline/env/image.py)") from None
    try:
        return load_image_state().image_id
    except ReproError as exc:
        raise SourceMissing(f"no usable image: {exc.what}") from None


def _run_in_image(snippet: str) -> tuple[str, str, str | None]:
    image = _image_reference()
    client = _docker_client()
    import docker  # importable: _docker_client just used it
    gpus = [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]
    try:
        try:
            out = client.containers.run(image, ["-c", snippet], entrypoint="python3", device_requests=gpus,
                                        remove=True, stderr=False)
            return out.decode(), f"docker: {image}", None
        except docker.errors.APIError as exc:
            # No GPU runtime: still read the versions, and say why containers get no GPU.
            reason = _URL_CREDENTIALS.sub("[REDACTED]", str(getattr(exc, "explanation", None) or exc)[:200])
            out = client.containers.run(image, ["-c", snippet], entrypoint="python3", remove=True, stderr=False)
            return out.decode(), f"docker: {image}", reason
    except docker.errors.DockerException as exc:
        raise SourceMissing(f"could not run {image}: {str(exc)[:200]}") from None
    finally:
        client.close()


class SavedSources:
    """A folder of saved outputs (file names in SAVED_FILES); an absent file is a missing source."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.description = f"saved outputs in {self.folder}"
        if not self.folder.is_dir():
            raise InputError(f"{self.folder} is not a folder of saved outputs",
                             f"give a folder holding files named {', '.join(sorted(SAVED_FILES.values()))}")

    def _read(self, source: str) -> str:
        path = self.folder / SAVED_FILES[source]
        if not path.is_file():
            raise SourceMissing(f"{path.name} not saved in {self.folder}")
        return path.read_text()

    def _json(self, source: str):
        try:
            return json.loads(self._read(source))
        except json.JSONDecodeError as exc:
            raise InputError(f"{self.folder / SAVED_FILES[source]}: not valid JSON ({exc})", "save it again") from None

    def text(self, source: str) -> str:
        return self._read(source).strip() if source == "uname -r" else self._read(source)

    def environment(self) -> Mapping[str, str]:
        try:
            return self._json("environment")
        except SourceMissing:
            return {}

    def docker_info(self) -> dict:
        return self._json("docker")

    def disk(self, label: str, path: Path, present: Path | None) -> DiskFacts:
        saved = self._json("disk").get(label)
        if not isinstance(saved, dict):
            raise SourceMissing(f"no {label!r} entry in {SAVED_FILES['disk']}")
        return DiskFacts(label=label, path=str(saved.get("path", path)), total_bytes=int(saved["total_bytes"]),
                         free_bytes=int(saved["free_bytes"]), present_bytes=saved.get("present_bytes"))

    def runtime(self, runtime: str) -> tuple[str, str, str | None]:
        return self._read("runtime"), f"{runtime}: saved {SAVED_FILES['runtime']}", None


def collect(sources, runtime: str, locations: Mapping[str, tuple[Path, Path | None]]) -> HostFacts:
    """Read every source; `locations` maps a disk label to (folder, what of it is already ours)."""
    missing: list[MissingSource] = []

    def attempt(source: str, read: Callable):
        try:
            return read()
        except SourceMissing as exc:
            missing.append(MissingSource(source, exc.reason))
        except InputError as exc:
            missing.append(MissingSource(source, _URL_CREDENTIALS.sub("[REDACTED]", f"unreadable: {exc.what}")))
        return None

    gpus, driver, cuda = attempt("nvidia-smi -q -x", lambda: parse_nvidia_smi_xml(sources.text("nvidia-smi -q -x"))) \
        or ((), None, None)
    topology = None
    if len(gpus) > 0:  # without nvidia-smi there is no topology to ask for; one missing entry says why
        topology = attempt("nvidia-smi topo -m", lambda: parse_topology(sources.text("nvidia-smi topo -m")))
    docker = attempt("docker", lambda: parse_docker_info(sources.docker_info()))
    disk_places = dict(locations)
    if runtime == "docker" and docker is not None and docker.root_dir:
        disk_places.setdefault("image", (Path(docker.root_dir), None))
    disks = [attempt(f"disk:{label}", lambda label=label, p=p: sources.disk(label, p[0], p[1]))
             for label, p in disk_places.items()]
    kernel = attempt("uname -r", lambda: sources.text("uname -r").strip())
    return HostFacts(
        gpus=gpus, driver=driver, cuda_driver=cuda, topology=topology,
        runtime=attempt("runtime", lambda: parse_runtime_versions(*sources.runtime(runtime))),
        cpu=attempt("lscpu", lambda: parse_lscpu(sources.text("lscpu"))),
        memory=attempt("/proc/meminfo", lambda: parse_meminfo(sources.text("/proc/meminfo"))),
        os=attempt("/etc/os-release", lambda: parse_os_release(sources.text("/etc/os-release"), kernel)),
        disks=tuple(d for d in disks if d is not None), docker=docker,
        environment=allowed_environment(sources.environment()), missing=tuple(missing))
