"""Check an image against its lock by looking inside it.

    repro env verify [--env NAME] [--image ID] [--json]

Runs the image once (no network, container removed afterwards) with the runtime probe
(pipeline/probe.py): Python's version, every installed distribution, and the values the program
would see (torch.__version__, torch.version.cuda, triton.__version__, FA3's import and the commit
it was built from). Each is compared with the lock; a declared component that is missing is a
mismatch, not a skip.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.env.image import connect, load_image_state
from pipeline.env.lock import Lock, load_lock
from pipeline.env.manifest import Environment, load_environment
from pipeline.errors import InputError
from pipeline.findings import Finding
from pipeline.probe import RuntimeProbe, probe_image
from pipeline.workspace import Workspace


@dataclass(frozen=True)
class Check:
    component: str
    expected: str
    found: str
    ok: bool


@dataclass(frozen=True, kw_only=True)
class VerifyReport:
    image_id: str
    environment: str
    lock_sha256: str
    checks: tuple[Check, ...]
    deviations: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def mismatches(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if not c.ok)


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _component(probe: RuntimeProbe, name: str) -> str:
    value = getattr(probe, name)
    if value is not None:
        return str(value)
    why = probe.errors.get("torch" if name == "cuda" else name)
    return f"missing ({why})" if why else "absent"


COMPONENT_FIELDS = {"torch": "torch", "triton": "triton", "cuda": "torch_cuda", "flash_attention": "flash_attention"}


def compare(env: Environment, lock: Lock, probe: RuntimeProbe) -> list[Check]:
    python = lock.expect.get("python", lock.python)
    checks = [Check("python", python, probe.python or "absent", probe.python == python)]
    image_record = probe.image_environment or {}
    checks.append(Check("environment-lock", lock.sha256, image_record.get("lock_sha256", "absent"),
                        image_record.get("lock_sha256") == lock.sha256))
    for name in ("torch", "triton", "cuda"):
        if name in env.components:
            expected = lock.expect.get(name, "")
            found = _component(probe, COMPONENT_FIELDS[name])
            checks.append(Check(name, expected or "(declared, no version pinned)", found,
                                bool(expected) and found == expected))
    if "flash_attention" in env.components:
        expected = (lock.flash_attention or {}).get("commit", "")
        found = _component(probe, "flash_attention")
        checks.append(Check("flash_attention", expected or "(declared, no pin)", found, bool(expected) and
                            found == expected))
    if "packages" in env.components:
        installed = {_norm(k): v for k, v in probe.packages}
        locked = {f.name: f.version for f in lock.packages}
        for name, version in sorted(locked.items()):
            found = installed.get(name, "absent")
            checks.append(Check(f"package {name}", version, found, found == version))
        allowed_extra = {"flash-attn-3", "flash-attn"} if lock.flash_attention else set()
        for name in sorted(set(installed) - set(locked) - allowed_extra):
            checks.append(Check(f"package {name}", "absent (not in the lock)", installed[name], False))
        if probe.pip_check is not None:
            ok, said = probe.pip_check
            checks.append(Check("pip check", "no broken requirements", said or "ok", ok))
    return checks


def verify_image(ws: Workspace, env_name: str | None = None, image: str | None = None, client=None,
                 lock_file=None) -> VerifyReport:
    """Compare what is inside the image with the lock. The image defaults to the one in ws.state/image.json."""
    state = None
    if image is None:
        state = load_image_state(ws.state)
        image = state.image_id
    client = client or connect()
    import docker

    try:
        info = client.inspect_image(image)
    except docker.errors.ImageNotFound:
        raise InputError(f"image {image} is not on this engine",
                         "build it with `repro env build` or load it with `repro env load FILE`") from None
    labels = info.get("Config", {}).get("Labels") or {}
    env_name = env_name or labels.get("io.repro.environment") or (state.environment if state else "")
    if not env_name:
        raise InputError(f"image {image} does not say which environment it is", "pass --env NAME")
    env = load_environment(ws, env_name)
    lock = load_lock(env, lock_file)
    wanted = set(env.components)
    probe = probe_image(info["Id"], gpus=False, packages="packages" in wanted,
                        pip_check="packages" in wanted and any(f.name == "pip" for f in lock.packages),
                        client=client, python="python")
    return VerifyReport(image_id=info["Id"], environment=env.name, lock_sha256=lock.sha256,
                        checks=tuple(compare(env, lock, probe)), deviations=lock.deviations)
