"""`repro train`, planning: what one training run will be, with no side effects (--dry-run stops here).

    plan = plan_train(TrainRequest(record=record, ws=ws, trainer="native", runtime="host"))
    plan.to_dict()                                     # what --dry-run prints

It verifies the program against the record's pins (smoke-cut when asked), finds the data, the image (docker)
or the Python environment (host), the world size and the exact launch, and which of repro's stand-ins the
record's program is given. pipeline/runs/train_run.py runs the plan.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pipeline.clock import utc_now
from pipeline.env.venv import VenvIdentity
from pipeline.errors import InputError, MissingDependency
from pipeline.findings import differences
from pipeline.hashing import sha256_bytes
from pipeline.probe import RuntimeProbe
from pipeline.records.model import Record
from pipeline.records.program import resolve_program
from pipeline.records.program_files import split_program
from pipeline.records.world_size import world_size_refusal
from pipeline.runs.float_args import LAUNCHER as FLOAT_ARGS_LAUNCHER
from pipeline.runs.float_args import fp32_float_args
from pipeline.runs.fp8_scales import LAUNCHER as FP8_SCALES_LAUNCHER
from pipeline.runs.launch import Launch, Mount
from pipeline.runs.rundir import HostEnvironment, RunMeta, new_run_id
from pipeline.runs.runtime_docker import ALL_GPUS, UNLIMITED, ContainerSpec, cache_volume_name, container_spec
from pipeline.workspace import Workspace

TRAINERS = ("record", "native")
RUNTIMES = ("docker", "host")
TRAIN_GLOB, VAL_GLOB = "fineweb_train_*.bin", "fineweb_val_*.bin"
RECORD_DATA = "data/fineweb10B"  # where the record's program reads shards, relative to its working folder
WORK = "work"  # the record program's working folder inside the run directory (removed once collected)
# The native trainer's package folder and the checkout (or site-packages) holding it, found without importing
# it (train/ imports torch, which the orchestrator does not need).
TRAIN_DIR = Path(importlib.util.find_spec("train").origin).parent
TRAIN_PARENT = TRAIN_DIR.parent
# The FlexAttention stand-in for FA3's flash_attn_interface, put first on the record program's path when the
# training environment cannot import FA3 (a declared deviation).
FA3_STANDIN_DIR = Path(__file__).resolve().parent / "fa3_standin"
# The `kernels` hub stand-in (pipeline/runs/hub_standin/kernels): first on the path of a program that imports
# `kernels`, so no hub kernel is fetched at run time (a declared deviation).
HUB_STANDIN_DIR = Path(__file__).resolve().parent / "hub_standin"
# Paths inside the container
C_WORK, C_RUN, C_DATA, C_REPO = "/workspace", "/repro/run", "/repro/data", "/opt/repro"
C_HUB, C_FA3 = "/opt/repro-standins/hub", "/opt/repro-standins/fa3"


@dataclass(frozen=True, kw_only=True)
class TrainRequest:
    record: Record  # loaded once, from the command's Registry
    ws: Workspace  # where defaults live: data/, runs/, state/ and cache/
    trainer: str = "record"
    runtime: str = "docker"
    nproc: int | None = None
    preset: str | None = None  # native only; default "record"
    overrides: tuple[str, ...] = ()  # native only: --set key=value
    steps: int | None = None  # native only: the record's schedule scaled to this many steps
    data_dir: Path | None = None
    runs_dir: Path | None = None
    program_source: str | None = None  # record only: URL, log/program file, or a clone
    image: str | None = None  # docker only; default: the image `repro env build` recorded
    gpus: int = ALL_GPUS  # docker only: all, 0 (none) or a count
    memlock: int = UNLIMITED  # docker only: the container's memlock limit in bytes
    smoke_steps: int | None = None  # a smoke run: the record's program with its step count cut (a declared patch)
    smoke_val_tokens: int | None = None  # smoke only: validate on this many tokens (small data)
    venv: VenvIdentity | None = None  # host only: a `repro env venv`; its python trains, run.yaml records it
    cache_dir: Path | None = None  # host only: where compile caches persist (ws.cache)


@dataclass(frozen=True, kw_only=True)
class Program:
    sha256: str
    fingerprint: str | None
    source: str
    text: bytes | None  # the program written into the working folder (patched for smoke); None for native
    patch: dict | None = None  # the declared patch applied to `text`: name, sha256, changes, patched_sha256


@dataclass(frozen=True, kw_only=True)
class TrainPlan:
    request: TrainRequest
    record: Record
    run_id: str
    run_dir: Path
    program: Program
    data_dir: Path
    data_lock_sha256: str | None
    world_size: int
    launch: Launch
    container: ContainerSpec | None
    image_id: str | None
    environment: str
    environment_lock_sha256: str | None
    host_environment: HostEnvironment | None  # host runtime: the probe, the venv, the deviations
    compile_cache: str  # docker volume name, or the host folder
    fa3_standin: bool = False  # the record's program runs on the FlexAttention stand-in (FA3 not importable)
    hub_standin: bool = False  # the program's `kernels` hub imports are answered by repro's stand-in
    inductor_fp32_floats: bool = False  # Python float kernel arguments typed as the record's torch did (float_args)
    fp8_aligned_scales: bool = False  # one-element FP8 scales handed to cuBLAS aligned (fp8_scales)

    def meta(self) -> RunMeta:
        r = self.request
        return RunMeta(
            run_id=self.run_id, record=self.record.name, trainer=r.trainer, runtime=r.runtime,
            preset=(r.preset or "record") if r.trainer == "native" else None, overrides=r.overrides, steps=r.steps,
            world_size=self.world_size, command=self.launch.argv, image_id=self.image_id, environment=self.environment,
            environment_lock_sha256=self.environment_lock_sha256, program_sha256=self.program.sha256,
            program_fingerprint=self.program.fingerprint, program_source=self.program.source,
            data_dir=str(self.data_dir), data_lock_sha256=self.data_lock_sha256, compile_cache=self.compile_cache,
            started_at=utc_now(), host_environment=self.host_environment, program_patch=self.program.patch,
            fa3_standin=self.fa3_standin, hub_standin=self.hub_standin, inductor_fp32_floats=self.inductor_fp32_floats,
            fp8_aligned_scales=self.fp8_aligned_scales)

    def to_dict(self) -> dict:
        """What --dry-run shows."""
        return {"run_dir": str(self.run_dir), "record": self.record.name, "trainer": self.request.trainer,
                "runtime": self.request.runtime, "world_size": self.world_size,
                "program": {"sha256": self.program.sha256, "fingerprint": self.program.fingerprint,
                            "source": self.program.source, "patch": self.program.patch,
                            "files": [f.pin() for f in split_program(self.program.text)] if self.program.text
                            else []},
                "fa3_standin": self.fa3_standin, "hub_standin": self.hub_standin,
                "inductor_fp32_floats": self.inductor_fp32_floats, "fp8_aligned_scales": self.fp8_aligned_scales,
                "data_dir": str(self.data_dir), "data_lock_sha256": self.data_lock_sha256,
                "image_id": self.image_id, "environment": self.environment, "compile_cache": self.compile_cache,
                "command": list(self.launch.argv), "workdir": self.launch.workdir,
                "env": dict(self.launch.env) if self.container is None else None,
                "container": self.container.to_dict() if self.container else None,
                "host_environment": self.host_environment.to_dict() if self.host_environment else None}


def native_program_text(root: Path = TRAIN_DIR) -> bytes:
    """The native trainer's program as its log prints it: the files train/program.py declares (that module
    needs no torch), each after a `# ---- train/<name> ----` line."""
    from train.program import program_text

    return program_text(root)


def native_program() -> Program:
    """The native trainer's identity: the sha256 of the program text at the top of its log."""
    root = TRAIN_DIR
    if not (root / "__main__.py").is_file():
        raise MissingDependency(f"the native trainer is not in this checkout ({root / '__main__.py'} is missing)",
                                "use --trainer record, or update the checkout")
    return Program(sha256=sha256_bytes(native_program_text(root)), fingerprint=None, source=f"{root} (native trainer)",
                   text=None)


def check_data(data_dir: Path, trainer: str) -> str | None:
    """The folder must hold train and val shards; returns its lock digest when it has data.lock.yaml."""
    from pipeline.data.verify import LOCK_NAME, data_lock_digest

    fix = ("fetch the record's shards with `repro data fetch`" if trainer == "record"
           else "fetch them with `repro data fetch`, or generate some with `repro data synth --out DIR`")
    if not data_dir.is_dir():
        raise InputError(f"the data folder {data_dir} does not exist", f"{fix}, or give --data-dir")
    for pattern in (TRAIN_GLOB, VAL_GLOB):
        if not any(data_dir.glob(pattern)):
            raise InputError(f"no {pattern} shards in {data_dir}", f"{fix}, or give --data-dir")
    return data_lock_digest(data_dir) if (data_dir / LOCK_NAME).is_file() else None


def count_gpus() -> int:
    """GPUs on this host for `--gpus all` in a container: nvidia-smi's list (no torch needed on the host)."""
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        listed = None
    if listed is None or listed.returncode != 0:
        raise MissingDependency("cannot count this host's GPUs (nvidia-smi -L did not answer)",
                                "give --nproc N (and --gpus none to run without GPUs)")
    return sum(1 for line in listed.stdout.splitlines() if line.startswith("GPU "))


def _native_args(req: TrainRequest, data: str, run: str) -> list[str]:
    args = ["-m", "train", "--preset", req.preset or "record"]
    for item in req.overrides:
        args += ["--set", item]
    if req.steps is not None:
        args += ["--steps", str(req.steps)]
    return args + ["--train-files", f"{data}/{TRAIN_GLOB}", "--val-files", f"{data}/{VAL_GLOB}",
                   "--log-file", f"{run}/log.txt", "--metrics-file", f"{run}/metrics.jsonl"]


def standin_path(*, fa3: bool, hub: bool) -> dict[str, str]:
    """The host run's PYTHONPATH for the record's program given repro's stand-ins (its own imports not found):
    the `kernels` hub answered locally, the FlexAttention stand-in for flash_attn_interface."""
    path = [str(HUB_STANDIN_DIR)] if hub else []
    if fa3:  # the stand-in first, and the checkout for the train.attention it calls
        path += [str(FA3_STANDIN_DIR), str(TRAIN_PARENT)]
    return {"PYTHONPATH": os.pathsep.join(path)} if path else {}


def _host_launch(req: TrainRequest, run_dir: Path, data_dir: Path, head: list[str], env: dict[str, str], *,
                 fp32_floats: bool = False, aligned_scales: bool = False) -> Launch:
    """`head`: torchrun and its options; `env`: the caches, and for the record's program its stand-ins' path;
    `fp32_floats`, `aligned_scales`: the record's program started through the launchers that type its float
    arguments fp32 and hand its FP8 scales aligned (each runs the next argument as __main__)."""
    if req.trainer == "record":
        launchers = [str(FP8_SCALES_LAUNCHER)] * aligned_scales + [str(FLOAT_ARGS_LAUNCHER)] * fp32_floats
        return Launch(tuple(head + launchers + ["train_gpt.py"]), str(run_dir / WORK), env)
    return Launch(tuple(head + _native_args(req, str(data_dir), str(run_dir))), str(TRAIN_PARENT),
                  {**env, "PYTHONPATH": str(TRAIN_PARENT)})


def _docker_launch(req: TrainRequest, run_dir: Path, data_dir: Path, nproc: int, hub_standin: bool) -> Launch:
    head = ["torchrun", "--standalone", f"--nproc_per_node={nproc}"]
    if req.trainer == "record":
        mounts = (Mount(run_dir / WORK, C_WORK, False), Mount(data_dir, f"{C_WORK}/{RECORD_DATA}", True))
        if not hub_standin:
            return Launch(tuple(head + ["train_gpt.py"]), C_WORK, {}, mounts)
        # The kernels hub answered by repro's stand-in, whose FA3 is the FlexAttention stand-in (the PyPI-locked
        # images build no FA3), with the checkout's train/ it calls: all read-only, first on the path.
        mounts += (Mount(HUB_STANDIN_DIR, C_HUB, True), Mount(FA3_STANDIN_DIR, C_FA3, True),
                   Mount(TRAIN_DIR, f"{C_REPO}/train", True))
        return Launch(tuple(head + ["train_gpt.py"]), C_WORK, {"PYTHONPATH": f"{C_HUB}:{C_FA3}:{C_REPO}"}, mounts)
    mounts = (Mount(TRAIN_DIR, f"{C_REPO}/train", True), Mount(run_dir, C_RUN, False),
              Mount(data_dir, C_DATA, True))
    return Launch(tuple(head + _native_args(req, C_DATA, C_RUN)), C_REPO, {"PYTHONPATH": C_REPO}, mounts)


def host_environment(record: Record, probe: RuntimeProbe, venv: VenvIdentity | None) -> HostEnvironment:
    """What a host run records of its Python: the probe, the venv, and the software deviations from the record
    (the verdict's comparison, pipeline/findings.py `differences`, over the same four fields)."""
    want = record.software.pins()
    found = {key: getattr(probe, key) for key in want}
    return HostEnvironment(probe, venv, tuple(differences("software.differs", want, found)))


def imports_hub_kernels(program: bytes) -> bool:
    """Whether any file of the program imports the `kernels` hub package, in any way (pipeline/runs/hub_use.py):
    then the stand-in is first on its path. A way of reaching it that cannot be read (a computed module name)
    counts too: with the stand-in first, whatever it imports as `kernels` is never the hub client."""
    from pipeline.runs.hub_use import hub_use

    use = hub_use(program)
    return use.imports or bool(use.repositories or use.refusals)


def smoke_patch_for(trainer: str, steps: int, val_tokens: int | None):
    """The smoke cut as a declared patch: lines of the record's program, or the native trainer's settings."""
    from pipeline.records.patch import native_smoke_patch, smoke_patch

    return native_smoke_patch(steps, val_tokens) if trainer == "native" else smoke_patch(steps, val_tokens)


def effective_native_settings(overrides: tuple[str, ...], steps: int | None, smoke_steps: int | None,
                              smoke_val_tokens: int | None) -> tuple[tuple[str, ...], int | None]:
    """(overrides, steps) the native trainer runs with. A smoke cut (pipeline/records/patch.py native_smoke_patch)
    sets the scheduled steps, the extension the record's cut keeps and the validation size; it scales nothing, so
    `steps` stays None."""
    from pipeline.records.smoke_cut import SMOKE_EXTENSION

    if smoke_steps is None:
        return tuple(overrides), steps
    extra = (f"scheduled_steps={smoke_steps}", f"extension_steps={SMOKE_EXTENSION}")
    extra += (f"val_tokens={smoke_val_tokens}", f"val_batch_tokens={smoke_val_tokens}") if smoke_val_tokens else ()
    return tuple(overrides) + extra, None


def _smoke_program(program: Program, steps: int, val_tokens: int | None) -> Program:
    """The record's program with its smoke cut applied (fields found in its syntax tree: pipeline/records/
    smoke_cut.py); its identity stays the record's program's, the cut is declared beside it."""
    from pipeline.records.smoke_cut import planned_smoke_cut

    cut = planned_smoke_cut(program.text, steps, val_tokens)
    text = cut.apply(program.text)
    return Program(sha256=program.sha256, fingerprint=program.fingerprint, source=program.source, text=text,
                   patch=cut.declared(text))


def _image(req: TrainRequest) -> tuple[str, str | None, str | None]:
    """(image id, environment name, environment lock sha256) from the engine, or the recorded build."""
    from pipeline.env.image import LABEL_PREFIX, load_image_state
    from pipeline.runs.runtime_docker import docker_client, image_id

    ref = req.image or load_image_state(req.ws.state).image_id
    client = docker_client()
    resolved = image_id(client, ref)
    labels = client.images.get(resolved).labels or {}
    lock = labels.get(LABEL_PREFIX + "environment-lock.sha256") or None
    return resolved, labels.get(LABEL_PREFIX + "environment"), lock


def plan_train(req: TrainRequest) -> TrainPlan:
    req = _checked(req)
    ws, record = req.ws, req.record
    program = _program(req)
    data_dir = Path(req.data_dir or ws.data / record.dataset.name).resolve()
    data_lock = check_data(data_dir, req.trainer)
    run_dir = (Path(req.runs_dir or ws.runs) / record.name / new_run_id()).resolve()  # its name is the run id
    planned = _plan_host if req.runtime == "host" else _plan_docker
    plan = planned(req, program, run_dir, data_dir, data_lock)
    why = world_size_refusal(plan.program.text, plan.world_size) if req.trainer == "record" else None
    if why:  # before the launch: it would stop at its assert after the compile was paid for
        raise InputError(f"{req.record.name}: {why[0]}", why[1])
    return plan


def _checked(req: TrainRequest) -> TrainRequest:
    """The request's settings checked against each other; a native smoke run's cut applied to its settings."""
    if req.trainer not in TRAINERS:
        raise InputError(f"unknown trainer {req.trainer!r}", f"use one of: {', '.join(TRAINERS)}")
    if req.runtime not in RUNTIMES:
        raise InputError(f"unknown runtime {req.runtime!r}", f"use one of: {', '.join(RUNTIMES)}")
    if req.trainer == "record" and (req.preset or req.overrides or req.steps is not None):
        raise InputError("--preset, --set and --steps apply to the native trainer only",
                         "drop them, or use --trainer native (the record's program runs exactly as published; "
                         "--smoke STEPS cuts its step count as a declared patch)")
    if req.smoke_steps is not None and req.trainer == "native":
        if req.steps is not None:
            raise InputError("--steps and --smoke both set the native trainer's step count", "give one of them")
        overrides, steps = effective_native_settings(req.overrides, None, req.smoke_steps, req.smoke_val_tokens)
        req = dataclasses.replace(req, overrides=overrides, steps=steps)
    if req.nproc is not None and req.nproc < 1:
        raise InputError(f"--nproc {req.nproc} is not a process count", "give 1 or more")
    if req.steps is not None and req.steps < 1:
        raise InputError(f"--steps {req.steps} is not a step count", "give 1 or more")
    return req


def _program(req: TrainRequest) -> Program:
    """The program the run trains with: the record's (smoke-cut when asked) or the native trainer."""
    if req.trainer == "record":
        found = resolve_program(req.record, req.program_source, req.ws.cache)  # the cache of fetch-logs, offline
        program = Program(sha256=found.sha256, fingerprint=found.fingerprint, source=found.source, text=found.text)
        if req.smoke_steps is not None:
            program = _smoke_program(program, req.smoke_steps, req.smoke_val_tokens)
        return program
    program = native_program()
    if req.smoke_steps is not None:
        patch = smoke_patch_for("native", req.smoke_steps, req.smoke_val_tokens)
        program = dataclasses.replace(program, patch={"name": patch.name, "sha256": patch.sha256,
                                                      "changes": patch.listing, "patched_sha256": None})
    return program


def _plan_host(req: TrainRequest, program: Program, run_dir: Path, data_dir: Path, data_lock: str | None
               ) -> TrainPlan:
    from pipeline.env.venv import compile_cache_dir
    from pipeline.preflight.fp8 import needs_aligned_scales
    from pipeline.runs.runtime_host import find_torchrun, probe_environment

    venv = req.venv  # as a docker run records its image: the venv's key, lock sha256, python and path
    host = host_environment(req.record, probe_environment(venv.python) if venv else probe_environment(), venv)
    # the probe's flash_attention: FA3's build commit, "importable", or None (then the stand-in)
    standin = req.trainer == "record" and not host.probe.flash_attention
    nproc = req.nproc or max(1, host.probe.device_count or 0)
    # keyed as the docker volume is: the software that compiles (the venv, or the probed Python) + the program
    software = venv.key if venv else json.dumps([getattr(host.probe, k) for k in ("executable", "python",
                                                                                   "torch", "triton")])
    cache_root = Path(req.cache_dir) if req.cache_dir is not None else req.ws.cache
    cache = compile_cache_dir(cache_root, software, program.sha256)
    hub = req.trainer == "record" and imports_hub_kernels(program.text)
    head = [find_torchrun(*([venv.python] if venv else [])), "--standalone", f"--nproc_per_node={nproc}"]
    env = {"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
           "TRITON_CACHE_DIR": str(cache / "triton"), **standin_path(fa3=standin, hub=hub)}
    fp32_floats = req.trainer == "record" and fp32_float_args(program.text, record_torch=req.record.software.torch,
                                                              training_torch=host.probe.torch)
    aligned = req.trainer == "record" and program.text is not None \
        and needs_aligned_scales(host.probe.executable or "python3", program.text)
    launch = _host_launch(req, run_dir, data_dir, head, env, fp32_floats=fp32_floats, aligned_scales=aligned)
    return TrainPlan(request=req, record=req.record, run_id=run_dir.name, run_dir=run_dir, program=program,
                     data_dir=data_dir, data_lock_sha256=data_lock, world_size=nproc, launch=launch,
                     container=None,
                     image_id=None, environment=venv.environment if venv else "host",
                     environment_lock_sha256=venv.lock_sha256 if venv else None, host_environment=host,
                     compile_cache=str(cache), fa3_standin=standin, hub_standin=hub,
                     inductor_fp32_floats=fp32_floats, fp8_aligned_scales=aligned)


def _plan_docker(req: TrainRequest, program: Program, run_dir: Path, data_dir: Path, data_lock: str | None
                 ) -> TrainPlan:
    record, run_id = req.record, run_dir.name
    image, environment, env_lock = _image(req)
    if req.nproc:
        nproc = req.nproc
    elif req.gpus == ALL_GPUS:
        nproc = count_gpus()
    else:
        nproc = max(1, req.gpus)  # a GPU count, or one CPU process for --gpus none
    hub = req.trainer == "record" and imports_hub_kernels(program.text)
    launch = _docker_launch(req, run_dir, data_dir, nproc, hub)
    volume = cache_volume_name(image, program.sha256)
    spec = container_spec(launch, image, f"repro-{run_id.lower()}", volume, req.gpus,
                          {"io.repro.run-id": run_id, "io.repro.record": record.name}, req.memlock)
    return TrainPlan(request=req, record=record, run_id=run_id, run_dir=run_dir, program=program,
                     data_dir=data_dir, data_lock_sha256=data_lock, world_size=nproc, launch=launch,
                     container=spec,
                     image_id=image, environment=environment or record.environment, environment_lock_sha256=env_lock,
                     host_environment=None, compile_cache=volume, fa3_standin=hub, hub_standin=hub)
