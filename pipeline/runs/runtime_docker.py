"""The docker runtime: one container per run, through the Docker SDK.

    repro train --trainer record --runtime docker            # the image from `repro env build`

The container gets all GPUs (a DeviceRequest), the host's IPC namespace (NCCL and the dataloader's
shared memory), unlimited memlock and a 64 MiB stack, the data read-only, the run's working
folder, and a named compile-cache volume. The volume is keyed by image id and program sha256:
inductor and Triton caches are only valid for the exact software and code that filled them, and a
second run of the same pair finds them warm. Output streams live to the terminal and stdout.txt;
Ctrl-C stops and removes the container and the run ends `aborted`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from pipeline.errors import InputError, RunFailed
from pipeline.runs.launch import Launch, Outcome, Tee, interrupts_deferred

CACHE_TARGET = "/cache"
CACHE_ENV = {"TORCHINDUCTOR_CACHE_DIR": f"{CACHE_TARGET}/inductor", "TRITON_CACHE_DIR": f"{CACHE_TARGET}/triton"}
STACK_BYTES = 64 << 20
STOP_TIMEOUT_S = 10
ALL_GPUS = -1
UNLIMITED = -1


def cache_volume_name(image_id: str, program_sha256: str) -> str:
    return "repro-cache-" + hashlib.sha256((image_id + program_sha256).encode()).hexdigest()[:16]


@dataclass(frozen=True, kw_only=True)
class ContainerSpec:
    image: str
    command: tuple[str, ...]
    name: str
    working_dir: str
    environment: dict[str, str]
    binds: tuple[tuple[str, str, bool], ...]  # (host path, container path, read-only)
    cache_volume: str
    gpus: int  # ALL_GPUS, 0 (none: CPU-only hosts and tests) or a count
    memlock: int = UNLIMITED  # bytes; lower only where the engine may not raise it (an unprivileged daemon)
    labels: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """What --dry-run prints: the container exactly as it would be created."""
        return {
            "image": self.image, "name": self.name, "command": list(self.command), "working_dir": self.working_dir,
            "environment": dict(self.environment),
            "mounts": [{"source": s, "target": t, "read_only": ro, "type": "bind"} for s, t, ro in self.binds]
            + [{"source": self.cache_volume, "target": CACHE_TARGET, "read_only": False, "type": "volume"}],
            "gpus": "all" if self.gpus == ALL_GPUS else self.gpus,
            "ipc_mode": "host", "ulimits": {"memlock": self.memlock, "stack": STACK_BYTES}, "labels": dict(self.labels),
        }

    def create_kwargs(self) -> dict:
        from docker.types import DeviceRequest, Mount, Ulimit

        mounts = [Mount(target=t, source=s, type="bind", read_only=ro) for s, t, ro in self.binds]
        mounts.append(Mount(target=CACHE_TARGET, source=self.cache_volume, type="volume"))
        kwargs = dict(
            image=self.image, command=list(self.command), name=self.name, working_dir=self.working_dir,
            environment=dict(self.environment), mounts=mounts, labels=dict(self.labels), ipc_mode="host",
            ulimits=[Ulimit(name="memlock", soft=self.memlock, hard=self.memlock),
                     Ulimit(name="stack", soft=STACK_BYTES, hard=STACK_BYTES)],
            detach=True, stdin_open=False, tty=False)
        if self.gpus != 0:
            kwargs["device_requests"] = [DeviceRequest(count=self.gpus, capabilities=[["gpu"]])]
        return kwargs


def container_spec(launch: Launch, image: str, name: str, cache_volume: str, gpus: int, labels: dict[str, str],
                   memlock: int = UNLIMITED) -> ContainerSpec:
    env = {"PYTHONUNBUFFERED": "1", **CACHE_ENV, **launch.env}
    binds = tuple((str(m.source), m.target, m.read_only) for m in launch.mounts)
    return ContainerSpec(image=image, command=launch.argv, name=name, working_dir=launch.workdir, environment=env,
                         binds=binds, cache_volume=cache_volume, gpus=gpus, memlock=memlock, labels=labels)


def docker_client():
    from pipeline.docker_engine import connect

    return connect(alternative="use --runtime host")


def image_id(client, image: str) -> str:
    """The image's content id; a tag is resolved here once, so the run records what actually ran."""
    import docker

    try:
        return client.images.get(image).id
    except docker.errors.ImageNotFound:
        raise InputError(f"the image {image} is not on this Docker engine",
                         "build it with `repro env build` (or load it with `repro env load`)") from None


def ensure_cache_volume(client, name: str, labels: dict[str, str]) -> bool:
    """Create the compile-cache volume unless it exists; True when an earlier run's volume is reused."""
    import docker

    try:
        client.volumes.get(name)
        return True
    except docker.errors.NotFound:
        client.volumes.create(name=name, labels=labels)
        return False


def _remove(client, name: str, container) -> None:
    import docker

    try:
        container = container or client.containers.get(name)
        container.remove(force=True)
    except docker.errors.NotFound:
        pass


def run_docker(client, spec: ContainerSpec, tee: Tee, stop_timeout_s: int = STOP_TIMEOUT_S) -> Outcome:
    import docker

    container, streamed = None, 0
    try:
        # create + start, not containers.run: run() pulls a missing image from a registry, and a
        # record run must use the image that was built and locked here, never whatever a tag resolves to.
        container = client.containers.create(**spec.create_kwargs())
        container.start()
        for chunk in container.logs(stream=True, follow=True):
            tee.write(chunk)
            streamed += len(chunk)
        return Outcome(int(container.wait()["StatusCode"]), aborted=False)
    except KeyboardInterrupt:
        with interrupts_deferred():
            tee.note(f"interrupted: stopping container {spec.name} ({stop_timeout_s} s grace, then kill)")
            code = None
            try:
                container = container or client.containers.get(spec.name)
                container.stop(timeout=stop_timeout_s)
                code = int(container.wait(timeout=stop_timeout_s + 30)["StatusCode"])
                tee.write(container.logs()[streamed:])  # what the trainer printed while it was stopping
            except docker.errors.NotFound:
                pass  # interrupted before the container existed
            except Exception as exc:  # still remove it below; say why stopping went wrong
                tee.note(f"stopping the container failed ({exc}); removing it by force")
            _remove(client, spec.name, container)
            container = None
        return Outcome(code, aborted=True)
    except docker.errors.ImageNotFound:
        raise InputError(f"the image {spec.image} is not on this Docker engine",
                         "build it with `repro env build` (or load it with `repro env load`)") from None
    except docker.errors.APIError as exc:
        why = str(exc.explanation or exc)
        fix = ("this engine may not raise the memlock limit (its daemon lacks CAP_SYS_RESOURCE); run it "
               "privileged, or give --memlock BYTES at most its limit (NCCL over RDMA wants unlimited)"
               if "rlimit" in why else "check the message; GPU requests need the NVIDIA container toolkit "
               "(`repro preflight` checks it)")
        raise RunFailed(f"the Docker engine refused the container: {why}", fix) from None
    finally:
        if container is not None:
            with interrupts_deferred():
                _remove(client, spec.name, container)
