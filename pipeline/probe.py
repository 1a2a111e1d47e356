"""The runtime probe: what the Python that will train really has, read by that Python itself.

    facts = probe_interpreter("/path/to/venv/bin/python")      # the host runtime
    facts = probe_image("sha256:…", gpus=True)                 # the docker runtime (container removed after)
    facts = parse_probe(text, where="saved torch-env.json")    # a saved probe output

One snippet (SNIPPET) runs in the target interpreter and prints one JSON line; one frozen type
(RuntimeProbe) holds it, with one set of keys used by preflight, `repro env verify`, the host
runtime and run.yaml. A component that cannot be imported is not an error of the probe: its value
is None and `errors[component]` says why. Saved outputs of the older snippets (keys `cuda`,
`device`, a full `sys.version`) parse into the same type.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict, dataclass, field

from pipeline.errors import InputError, MissingDependency

MARKER = "REPRO-PROBE "
# Runs in the target Python (3.8+), stdlib only at top level. argv: "--packages" lists every
# installed distribution, "--pip-check" runs `pip check` (both for `repro env verify`).
SNIPPET = r"""
import importlib.metadata as md, json, os, platform, subprocess, sys
out = {"python": platform.python_version(), "implementation": platform.python_implementation(),
       "executable": sys.executable, "platform": platform.platform(), "machine": platform.machine(),
       "libc": " ".join(platform.libc_ver()).strip(), "errors": {}}
def read(name, fn):
    try:
        return fn()
    except BaseException as exc:
        out["errors"][name] = "%s: %s" % (type(exc).__name__, exc)
        return None
torch = read("torch", lambda: __import__("torch"))
if torch is not None:
    out["torch"] = torch.__version__
    out["torch_cuda"] = torch.version.cuda
    cudnn = torch.backends.cudnn
    out["cudnn"] = read("cudnn", lambda: cudnn.version() if cudnn.is_available() else None)
    out["nccl"] = read("nccl", lambda: torch.cuda.nccl.version())
    out["cuda_available"] = bool(torch.cuda.is_available())
    out["device_count"] = torch.cuda.device_count() if out["cuda_available"] else 0
    out["devices"] = [torch.cuda.get_device_name(i) for i in range(out["device_count"])]
out["triton"] = read("triton", lambda: __import__("triton").__version__)
out["flash_attention"] = read("flash_attention", lambda: bool(__import__("flash_attn_interface")) and "importable")
def built_commit():
    with open("/etc/repro/fa3.json") as fh:
        return json.load(fh)["commit"]
if out["flash_attention"] and os.path.exists("/etc/repro/fa3.json"):
    out["flash_attention"] = read("flash_attention", built_commit)
if os.path.exists("/etc/repro/environment.json"):
    with open("/etc/repro/environment.json") as fh:
        out["image_environment"] = json.load(fh)
if "--packages" in sys.argv:
    out["packages"] = sorted({(d.metadata["Name"] or "", d.version) for d in md.distributions()} - {("", "")})
if "--pip-check" in sys.argv:
    proc = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True)
    out["pip_check"] = [proc.returncode == 0, (proc.stdout.strip() or proc.stderr.strip())[-2000:]]
print("REPRO-PROBE " + json.dumps(out))
"""

# The one hint for a Python without torch (preflight's and the host runtime's): the locked CPU build that
# `make setup` installs, or the same lock into the Python at hand.
INSTALL_TORCH = ("in a clone, `make setup` builds .venv with torch's CPU build from requirements-torch-cpu.lock "
                 "(every sha256 pinned; `pip install --require-hashes --no-deps -r requirements-torch-cpu.lock` puts "
                 "the same into this Python); installed with pip, `pip install '.[train]'` (unpinned)")


@dataclass(frozen=True, kw_only=True)
class RuntimeProbe:
    where: str  # "host: /usr/bin/python3", "docker: sha256:…", "saved torch-env.json"
    python: str | None = None  # "3.10.12"
    implementation: str | None = None
    executable: str | None = None
    platform: str | None = None
    machine: str | None = None
    libc: str | None = None  # "glibc 2.35"
    torch: str | None = None
    torch_cuda: str | None = None  # torch.version.cuda: the CUDA torch was built with
    cudnn: str | None = None
    nccl: str | None = None
    cuda_available: bool | None = None
    device_count: int | None = None
    devices: tuple[str, ...] = ()
    triton: str | None = None
    flash_attention: str | None = None  # the commit FA3 was built from, "importable", or None
    image_environment: dict | None = None  # /etc/repro/environment.json of a repro image
    packages: tuple[tuple[str, str], ...] = ()  # (name, version), when asked for
    pip_check: tuple[bool, str] | None = None
    errors: dict = field(default_factory=dict)  # component -> why it could not be read
    gpu_access_error: str | None = None  # docker: why a container could not be given the GPUs

    @property
    def error(self) -> str | None:
        """Why torch could not be imported (None when it was)."""
        why = self.errors.get("torch")
        return f"import torch failed: {why}" if why else None

    def to_dict(self) -> dict:
        data = asdict(self)
        data["packages"] = [list(p) for p in self.packages]
        data["devices"] = list(self.devices)
        return data


def version_text(value) -> str | None:
    """cuDNN and NCCL report versions as ints (91900 = 9.19.0, 22105 = 2.21.5), tuples or strings."""
    if value is None or value == "":
        return None
    if isinstance(value, (list, tuple)):
        return ".".join(str(v) for v in value)
    if isinstance(value, int):
        major_div = 10000 if value >= 10000 else 1000
        return f"{value // major_div}.{value % major_div // 100}.{value % 100}"
    return str(value)


def _json_object(text: str) -> dict | None:
    """The probe's JSON: after MARKER on a line, the last line (warnings may come first), or the whole text."""
    lines = text.strip().splitlines()
    candidates = [line[len(MARKER):] for line in lines if line.startswith(MARKER)]
    candidates += [lines[-1] if lines else "", text]
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except (ValueError, RecursionError):  # not JSON (or an int of 5,000 digits, or nested too deeply)
            continue
        if isinstance(data, dict):
            return data
    return None


def parse_probe(text: str, where: str, gpu_access_error: str | None = None) -> RuntimeProbe:
    """RuntimeProbe from the snippet's output (or a saved output of an older snippet)."""
    data = _json_object(text)
    if data is None:
        raise InputError(f"{where}: the runtime did not print a JSON object of versions",
                         "check that the runtime's python starts: run it by hand with `-c 'import torch'`")
    return probe_from_mapping(data, where, gpu_access_error)


def probe_from_mapping(data: dict, where: str, gpu_access_error: str | None = None) -> RuntimeProbe:
    """RuntimeProbe from the snippet's keys (RuntimeProbe.to_dict() gives them back; run.yaml stores them).
    Values of the wrong shape (an edited file) are an InputError naming `where`, never a traceback."""
    try:
        return _from_mapping(data, where, gpu_access_error)
    except (AttributeError, TypeError, ValueError) as exc:
        raise InputError(f"{where}: not a runtime probe's fields ({exc})",
                         "the file was not written by this tool or was edited; run it again") from None


def _from_mapping(data: dict, where: str, gpu_access_error: str | None) -> RuntimeProbe:
    errors = dict(data.get("errors") or {})
    if data.get("error"):  # older snippets: one error string for the torch import
        errors.setdefault("torch", str(data["error"]).removeprefix("import torch failed: "))
    python = data.get("python")
    devices = data.get("devices") or ([data["device"]] if data.get("device") else [])
    pip_check = data.get("pip_check")
    return RuntimeProbe(
        where=where, python=python.split()[0] if isinstance(python, str) and python else None,
        implementation=data.get("implementation"), executable=data.get("executable"),
        platform=data.get("platform"), machine=data.get("machine"), libc=data.get("libc"),
        torch=data.get("torch"), torch_cuda=data.get("torch_cuda", data.get("cuda")),
        cudnn=version_text(data.get("cudnn")), nccl=version_text(data.get("nccl")),
        cuda_available=data.get("cuda_available"),
        device_count=data.get("device_count", data.get("cuda_devices")), devices=tuple(str(d) for d in devices),
        triton=data.get("triton"), flash_attention=data.get("flash_attention"),
        image_environment=data.get("image_environment"),
        packages=tuple((str(n), str(v)) for n, v in data.get("packages") or ()),
        pip_check=(bool(pip_check[0]), str(pip_check[1])) if pip_check else None,
        errors={str(k): str(v) for k, v in errors.items()}, gpu_access_error=gpu_access_error)


def interpreter_argv(python: str, packages: bool = False, pip_check: bool = False) -> list[str]:
    return [python, "-c", SNIPPET] + (["--packages"] if packages else []) + (["--pip-check"] if pip_check else [])


def probe_interpreter(python: str = sys.executable, timeout_s: float = 300, packages: bool = False) -> RuntimeProbe:
    """Run the snippet with `python` (a subprocess: importing torch here would tie it to repro's own Python)."""
    try:
        done = subprocess.run(interpreter_argv(python, packages), capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MissingDependency(f"cannot run {python} to read its versions: {exc}",
                                "check the Python environment (`repro env venv` builds one)") from None
    if done.returncode != 0:
        raise MissingDependency(f"{python} failed to report its versions: {done.stderr.strip()[-300:]}",
                                "check the Python environment (`repro env venv` builds one)")
    return parse_probe(done.stdout, f"host: {python}")


def probe_image(image: str, gpus: bool = True, packages: bool = False, pip_check: bool = False,
                client=None, python: str = "python3") -> RuntimeProbe:
    """Run the snippet in a throwaway container of image (removed afterwards), GPUs when the engine has them."""
    from pipeline.docker_engine import run_snippet
    from pipeline.errors import RunFailed

    done = run_snippet(image, interpreter_argv(python, packages, pip_check), gpus=gpus,
                       labels={"io.repro.role": "probe"}, client=client)
    try:
        return parse_probe(done.stdout, f"docker: {image}", done.gpu_access_error)
    except InputError:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-10:])
        raise RunFailed(f"the probe in image {image} printed no result (exit {done.exit_code}):\n{tail}",
                        f"check that the image has `{python}` on its PATH") from None
