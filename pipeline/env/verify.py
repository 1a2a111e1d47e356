"""Check an image against its lock by looking inside it.

    repro env verify [--env NAME] [--image ID] [--json]

Runs the image once (no network) with a probe that prints what is really there: Python's version,
every installed distribution, and for each component the environment declares, the value the
program would see (torch.__version__, torch.version.cuda, triton.__version__, FA3's import and the
commit it was built from). Each is compared with the lock; a declared component that is missing is a
mismatch, not a skip.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pipeline.env.image import connect, load_image_state
from pipeline.env.lock import Lock, load_lock
from pipeline.env.manifest import Environment, load_environment
from pipeline.errors import InputError, RunFailed

MARKER = "REPRO-PROBE "
# Runs inside the image with its own python; argv names the components to read.
PROBE = r"""
import importlib.metadata as md, json, pathlib, platform, subprocess, sys
wanted = set(sys.argv[1:])
out = {"python": platform.python_version(), "executable": sys.executable,
       "packages": {d.metadata["Name"]: d.version for d in md.distributions()}}
def read(name, fn):
    if name in wanted:
        try:
            out[name] = {"value": fn()}
        except Exception as exc:
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
read("torch", lambda: __import__("torch").__version__)
read("cuda", lambda: __import__("torch").version.cuda)
read("triton", lambda: __import__("triton").__version__)
def fa3():
    import flash_attn_interface  # what the record's program imports
    return json.loads(pathlib.Path("/etc/repro/fa3.json").read_text())["commit"]
read("flash_attention", fa3)
read("environment", lambda: json.loads(pathlib.Path("/etc/repro/environment.json").read_text()))
if "pip_check" in wanted:
    proc = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True)
    out["pip_check"] = {"value": proc.stdout.strip() or proc.stderr.strip(), "ok": proc.returncode == 0}
print("REPRO-PROBE " + json.dumps(out))
"""


@dataclass(frozen=True)
class Check:
    component: str
    expected: str
    found: str
    ok: bool


@dataclass(frozen=True)
class VerifyReport:
    image_id: str
    environment: str
    lock_sha256: str
    checks: tuple[Check, ...]
    deviations: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def mismatches(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if not c.ok)


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def run_probe(client, image: str, components: tuple[str, ...]) -> dict:
    container = client.create_container(image, entrypoint=["python", "-c", PROBE], command=list(components),
                                        network_disabled=True, labels={"io.repro.role": "env-verify"})
    try:
        client.start(container)
        status = client.wait(container, timeout=300)
        stdout = client.logs(container, stdout=True, stderr=False).decode(errors="replace")
        stderr = client.logs(container, stdout=False, stderr=True).decode(errors="replace")
    finally:
        client.remove_container(container, force=True)
    for line in stdout.splitlines():
        if line.startswith(MARKER):
            return json.loads(line[len(MARKER):])
    tail = "\n".join((stderr or stdout).strip().splitlines()[-10:])
    raise RunFailed(f"the probe in image {image} printed no result (exit {status.get('StatusCode')}):\n{tail}",
                    "check that the image has `python` on its PATH (the venv at /opt/venv)")


def _component(probe: dict, name: str) -> str:
    item = probe.get(name)
    if item is None:
        return "not read"
    return str(item["value"]) if "value" in item else f"missing ({item['error']})"


def compare(env: Environment, lock: Lock, probe: dict) -> list[Check]:
    checks = [Check("python", lock.expect.get("python", lock.python), probe["python"],
                    probe["python"] == lock.expect.get("python", lock.python))]
    image_record = probe.get("environment", {}).get("value") or {}
    checks.append(Check("environment-lock", lock.sha256, image_record.get("lock_sha256", "absent"),
                        image_record.get("lock_sha256") == lock.sha256))
    for name in ("torch", "triton", "cuda"):
        if name in env.components:
            expected = lock.expect.get(name, "")
            found = _component(probe, name)
            checks.append(Check(name, expected or "(declared, no version pinned)", found,
                                bool(expected) and found == expected))
    if "flash_attention" in env.components:
        expected = (lock.flash_attention or {}).get("commit", "")
        found = _component(probe, "flash_attention")
        checks.append(Check("flash_attention", expected or "(declared, no pin)", found, bool(expected) and
                            found == expected))
    if "packages" in env.components:
        installed = {_norm(k): v for k, v in probe["packages"].items()}
        locked = {f.name: f.version for f in lock.packages}
        for name, version in sorted(locked.items()):
            found = installed.get(name, "absent")
            checks.append(Check(f"package {name}", version, found, found == version))
        allowed_extra = {"flash-attn-3", "flash-attn"} if lock.flash_attention else set()
        for name in sorted(set(installed) - set(locked) - allowed_extra):
            checks.append(Check(f"package {name}", "absent (not in the lock)", installed[name], False))
        if "pip_check" in probe:
            checks.append(Check("pip check", "no broken requirements", probe["pip_check"]["value"] or "ok",
                                probe["pip_check"]["ok"]))
    return checks


def verify_image(env_name: str | None = None, image: str | None = None, client=None) -> VerifyReport:
    """Compare what is inside the image with the lock. The image defaults to state/image.json's."""
    state = None
    if image is None:
        state = load_image_state()
        image = state.image_id
    client = client or connect()
    import docker

    try:
        labels = client.inspect_image(image).get("Config", {}).get("Labels") or {}
    except docker.errors.ImageNotFound:
        raise InputError(f"image {image} is not on this engine",
                         "build it with `repro env build` or load it with `repro env load FILE`") from None
    env_name = env_name or labels.get("io.repro.environment") or (state.environment if state else "")
    if not env_name:
        raise InputError(f"image {image} does not say which environment it is", "pass --env NAME")
    env = load_environment(env_name)
    lock = load_lock(env)
    components = list(env.components) + ["environment"]
    if any(f.name == "pip" for f in lock.packages):
        components.append("pip_check")
    probe = run_probe(client, image, tuple(components))
    return VerifyReport(image_id=client.inspect_image(image)["Id"], environment=env.name, lock_sha256=lock.sha256,
                        checks=tuple(compare(env, lock, probe)), deviations=lock.deviations)
