"""The Docker engine, reached one way: one client factory, one error for "no engine", one snippet runner.

    client = connect()                                  # docker.DockerClient; client.api is the low-level API
    done = run_snippet(image, ["python3", "-c", CODE])  # a throwaway container, always removed
    done.stdout, done.exit_code, done.gpu_access_error

The SDK reads DOCKER_HOST (and DOCKER_TLS_VERIFY, DOCKER_CERT_PATH) itself; without it, the local
socket. An absent or silent daemon becomes EngineUnavailable (exit 4), naming where it looked and
how to start one. run_snippet creates, starts, waits and removes in `finally`: a snippet never
leaves a stopped container behind, whether it succeeds, fails, times out or is interrupted.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from pipeline.errors import InputError, MissingDependency, RunFailed

DEFAULT_SOCKET = "unix:///var/run/docker.sock"
START_FIX = ("start one: `make docker-engine` (installs docker.io and starts dockerd, as root) or "
             "`sudo systemctl start docker`; if the engine runs elsewhere, set DOCKER_HOST to it")


class EngineUnavailable(MissingDependency):
    """No Docker engine answers (no SDK, no socket, a daemon that does not reply)."""


def engine_address() -> str:
    """Where the SDK will look: DOCKER_HOST or the local socket (credentials in a URL are blanked)."""
    return _public(os.environ.get("DOCKER_HOST") or DEFAULT_SOCKET)


def _public(text: str) -> str:
    """text with user:password@ in any URL blanked: engine messages can quote DOCKER_HOST."""
    from pipeline.redact import scrub_urls

    return scrub_urls(text)


def connect(timeout: int = 600, alternative: str = ""):
    """A pinged docker.DockerClient; `alternative` adds what the user can do without Docker."""
    try:
        import docker
    except ImportError:
        raise EngineUnavailable("the Docker SDK for Python is not installed",
                                "install repro's dependencies (`make setup`)") from None
    try:
        client = docker.DockerClient(timeout=timeout, **docker.utils.kwargs_from_env())
        client.ping()
        return client
    except Exception as exc:  # the SDK raises DockerException, requests' and urllib3's errors for "no daemon"
        fix = START_FIX + (f"; or {alternative}" if alternative else "")
        raise EngineUnavailable(f"no Docker engine answers at {engine_address()} ({type(exc).__name__})",
                                fix) from None


@dataclass(frozen=True, kw_only=True)
class SnippetResult:
    image: str
    exit_code: int | None
    stdout: str
    stderr: str
    gpu_access_error: str | None  # GPUs were asked for and the engine could not give them: why


def _run_once(api, image: str, argv: list[str], gpus: bool, network: bool, timeout_s: float,
              labels: dict) -> SnippetResult:
    import docker

    host_config = api.create_host_config(
        device_requests=[docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])] if gpus else None)
    container = api.create_container(image, entrypoint=argv[:1], command=argv[1:], host_config=host_config,
                                     network_disabled=not network, labels={"io.repro.role": "snippet", **labels})
    try:
        api.start(container)
        try:
            status = api.wait(container, timeout=timeout_s)
        except Exception as exc:  # requests' ReadTimeout: the snippet is still running; it is removed below
            raise RunFailed(f"a snippet in image {image} did not finish within {timeout_s:.0f} s "
                            f"({type(exc).__name__})",
                            "check the image's python (run it by hand with `docker run`)") from None
        out = api.logs(container, stdout=True, stderr=False).decode("utf-8", errors="replace")
        err = api.logs(container, stdout=False, stderr=True).decode("utf-8", errors="replace")
        return SnippetResult(image=image, exit_code=status.get("StatusCode"), stdout=out, stderr=err,
                             gpu_access_error=None)
    finally:
        try:
            api.remove_container(container, force=True)
        except docker.errors.NotFound:
            pass


def run_snippet(image: str, argv: list[str], gpus: bool = False, network: bool = False, timeout_s: float = 300,
                labels: dict | None = None, client=None) -> SnippetResult:
    """Run argv in a fresh container of image and remove it; with gpus, fall back to none and say why."""
    import docker

    client = client or connect()
    api = getattr(client, "api", client)
    labels = labels or {}
    try:
        try:
            return _run_once(api, image, argv, gpus, network, timeout_s, labels)
        except docker.errors.APIError as exc:
            if not gpus or isinstance(exc, docker.errors.ImageNotFound):
                raise
            # No GPU runtime on this engine: still run it, and keep the engine's reason.
            reason = _public(str(exc.explanation or exc))[:300]
            done = _run_once(api, image, argv, False, network, timeout_s, labels)
            return SnippetResult(image=image, exit_code=done.exit_code, stdout=done.stdout, stderr=done.stderr,
                                 gpu_access_error=reason)
    except docker.errors.ImageNotFound:
        raise InputError(f"image {image} is not on this Docker engine",
                         "build it with `repro env build` or load it with `repro env load FILE`") from None
    except docker.errors.APIError as exc:
        raise RunFailed(f"the Docker engine refused to run a snippet in {image}: {exc.explanation or exc}",
                        "check the engine (`docker info`) and the image") from None
