"""The node checks of preflight (pipeline/preflight/checks.py runs them): runtime, software, CPU model (CPU
records), disk, /dev/shm, Docker.

Each is a pure function (HostFacts, Record, runtime) -> Check; runtime is "docker" or "host".
"""

from __future__ import annotations

from pipeline.findings import differences
from pipeline.preflight.facts import Check, HostFacts
from pipeline.records.model import Record

GIB = 1024**3
SHARD_BYTES = 256 * 4 + 100_000_000 * 2  # one FineWeb shard: 256 int32 header + 100M uint16 tokens
# generated data (`repro data synth`, dataset "synth"): the demo's two shards are 0.6 MB; a bound with room
# for a larger synth, instead of two FineWeb shards' 0.4 GB
SYNTH_BYTES = 16 * 1024**2
RUNS_FREE_MIN = 10 * GIB  # logs are small; the inductor and Triton compile caches are not
IMAGE_FREE_MIN = 30 * GIB  # CUDA devel base + torch + the FA3 build layers
SHM_FAIL_BELOW = 256 * 1024**2  # Docker's 64 MiB default makes NCCL die with "unhandled system error"
SHM_WARN_BELOW = 1 * GIB
SAME = "none: as on the record's node"
NO_TIME = "no effect on the measured step time"


def _gb(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 100e6 or n == 0 else f"{n / 1e6:.1f} MB"


def check_runtime(facts: HostFacts, record: Record, runtime: str) -> Check:
    rt = facts.runtime
    if rt is None:
        why = facts.missing_reason("runtime") or "not read"
        return Check("runtime", "warn", f"the {runtime} runtime's versions are unknown ({why})",
                     "cannot confirm that torch starts and sees the GPUs where training will run")
    if rt.error:
        return Check("runtime", "fail", f"{rt.where}: {rt.error}", "no run can start in this runtime")
    seen = f"torch {rt.torch} (CUDA {rt.torch_cuda or 'none'}) in {rt.where}"
    if not facts.gpus:
        return Check("runtime", "pass", f"{seen} imports; no GPU to use here", "see gpus_visible")
    if rt.cuda_available is False:
        why = rt.gpu_access_error or ("a CPU-only torch build" if not rt.torch_cuda else "driver or device access")
        return Check("runtime", "fail", f"{seen} sees no GPU ({why})", "training would not use the GPUs at all")
    if rt.device_count is not None and rt.device_count < len(facts.gpus):
        visible = facts.environment.get("CUDA_VISIBLE_DEVICES")
        limit = f"; CUDA_VISIBLE_DEVICES={visible}" if visible is not None else ""
        return Check("runtime", "warn", f"{seen} sees {rt.device_count} of {len(facts.gpus)} GPUs{limit}",
                     "a run uses only the GPUs torch sees: fewer GPUs, longer steps")
    if rt.cuda_available is None:
        return Check("runtime", "pass", f"{seen}; GPU access not reported by this source",
                     "unknown whether torch sees the GPUs here")
    return Check("runtime", "pass", f"{seen} sees {rt.device_count} GPU(s)", SAME)


def check_software(facts: HostFacts, record: Record, runtime: str) -> Check:
    rt, want = facts.runtime, record.software
    if rt is None or rt.error:
        return Check("software", "skip", "runtime versions unknown (see runtime)", "unknown")
    pinned = {name: getattr(want, name, "") for name in record.rules.compare_software}
    deviations = differences("software.differs", pinned, {name: getattr(rt, name, None) for name in pinned})
    if deviations:
        return Check("software", "warn", "differs from the record's: " + "; ".join(
            f"{d.data['field']} {d.data['got'] or 'unknown'} (record {d.data['want']})" for d in deviations),
                     "another torch or Triton compiles other kernels: step time can move by several percent "
                     "either way; a recorded software deviation")
    return Check("software", "pass", f"python {rt.python}, torch {rt.torch}, triton {rt.triton} as the record",
                 SAME)


def check_cpu(facts: HostFacts, record: Record, runtime: str) -> Check:
    """A CPU record's time is judged only on its CPU model (GPU records time the GPUs; the CPU is not asked)."""
    want = record.hardware.cpu_model
    if not want:
        return Check("cpu", "skip", "the record pins no CPU model", NO_TIME)
    got = facts.cpu.model if facts.cpu else None
    if got is None:
        return Check("cpu", "warn", f"CPU model unknown ({facts.missing_reason('lscpu') or 'not read'}); "
                     f"the record's is {want}", "the time is reported, not judged, unless the CPU model matches")
    if got != want:
        return Check("cpu", "warn", f"{got}, the record's is {want}",
                     "not comparable: the time is reported, not judged, on another CPU model")
    return Check("cpu", "pass", f"{got}, as the record's", SAME)


def check_disk_data(facts: HostFacts, record: Record, runtime: str) -> Check:
    disk = facts.disk("data")
    if disk is None:
        return Check("disk_data", "warn", f"free space unknown ({facts.missing_reason('disk:data') or 'not read'})",
                     "a fetch may run out of space")
    shards = record.dataset.shards_to_fetch + record.dataset.val_shards
    size = SYNTH_BYTES if record.dataset.name == "synth" else shards * SHARD_BYTES
    need = max(0, size - (disk.present_bytes or 0))
    if disk.free_bytes < need:
        return Check("disk_data", "fail", f"{_gb(disk.free_bytes)} free at {disk.path}; {shards} shards need "
                     f"{_gb(need)} more", "the data fetch would fail: free space or pass another --data-dir")
    return Check("disk_data", "pass", f"{_gb(disk.free_bytes)} free at {disk.path} (need {_gb(need)})", NO_TIME)


def check_disk_runs(facts: HostFacts, record: Record, runtime: str) -> Check:
    disk = facts.disk("runs")
    if disk is None:
        return Check("disk_runs", "warn", f"free space unknown ({facts.missing_reason('disk:runs') or 'not read'})",
                     "runs and compile caches may run out of space")
    if disk.free_bytes < RUNS_FREE_MIN:
        return Check("disk_runs", "warn", f"{_gb(disk.free_bytes)} free at {disk.path}, under "
                     f"{_gb(RUNS_FREE_MIN)}", "a full disk mid-run loses the run; compile caches need gigabytes")
    return Check("disk_runs", "pass", f"{_gb(disk.free_bytes)} free at {disk.path}", NO_TIME)


def check_disk_image(facts: HostFacts, record: Record, runtime: str) -> Check:
    if runtime != "docker":
        return Check("disk_image", "skip", f"no image with --runtime {runtime}", NO_TIME)
    disk = facts.disk("image")
    if disk is None:
        why = facts.missing_reason("disk:image") or facts.missing_reason("docker") or "Docker root not known"
        return Check("disk_image", "warn", f"free space for images unknown ({why})", "a build may run out of space")
    if disk.free_bytes < IMAGE_FREE_MIN:
        return Check("disk_image", "warn", f"{_gb(disk.free_bytes)} free at {disk.path}, under "
                     f"{_gb(IMAGE_FREE_MIN)}", "building or loading the image may run out of space")
    return Check("disk_image", "pass", f"{_gb(disk.free_bytes)} free at {disk.path}", NO_TIME)


def check_shm(facts: HostFacts, record: Record, runtime: str) -> Check:
    shm = facts.disk("shm")
    if shm is None:
        return Check("shm", "warn", f"/dev/shm size unknown ({facts.missing_reason('disk:shm') or 'not read'})",
                     "NCCL and torch's worker IPC allocate shared memory there")
    size = f"/dev/shm is {shm.total_bytes / 1024**2:.0f} MiB"
    if shm.total_bytes < SHM_FAIL_BELOW and len(facts.gpus) > 1:
        return Check("shm", "fail", f"{size}, under {SHM_FAIL_BELOW // 1024**2} MiB",
                     "NCCL fails with 'unhandled system error' on tiny /dev/shm: remount it larger "
                     "(`mount -o remount,size=16G /dev/shm`) or start the container with --shm-size / --ipc=host")
    if shm.total_bytes < SHM_WARN_BELOW:
        return Check("shm", "warn", f"{size}, under 1 GiB", "multi-GPU runs may fail to set up NCCL")
    return Check("shm", "pass", size, NO_TIME)


def check_docker(facts: HostFacts, record: Record, runtime: str) -> Check:
    docker, rt = facts.docker, facts.runtime
    if runtime != "docker":
        state = f"daemon {docker.server_version}" if docker else "no daemon"
        return Check("docker", "skip", f"not used with --runtime {runtime} ({state})", NO_TIME)
    if docker is None:
        return Check("docker", "fail", f"no Docker daemon ({facts.missing_reason('docker') or 'not read'})",
                     "the docker runtime cannot start: start the daemon or use --runtime host")
    if rt is not None and rt.gpu_access_error:
        return Check("docker", "fail", f"containers get no GPU: {rt.gpu_access_error}",
                     "install the NVIDIA container toolkit (`nvidia-ctk runtime configure --runtime=docker`) "
                     "and restart the daemon")
    if rt is not None and rt.cuda_available:
        return Check("docker", "pass", f"Docker {docker.server_version}; the image ran with {rt.device_count} GPU(s)",
                     SAME)
    if docker.nvidia_runtime:
        return Check("docker", "pass", f"Docker {docker.server_version} with the NVIDIA runtime "
                     f"({', '.join(docker.runtimes)}); not exercised: no image ran", SAME)
    return Check("docker", "warn", f"Docker {docker.server_version} has no 'nvidia' runtime or CDI spec "
                 f"(runtimes: {', '.join(docker.runtimes) or 'none'})",
                 "containers may get no GPU unless the NVIDIA container toolkit's hook is installed")


NODE_CHECKS = (check_runtime, check_software, check_cpu, check_disk_data, check_disk_runs, check_disk_image, check_shm,
               check_docker)
