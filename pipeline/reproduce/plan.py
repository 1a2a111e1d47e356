"""`repro reproduce --record NAME --plan`: what a reproduction would do and cost, with nothing run or fetched.

    plan = plan_reproduce(ws, request)        # ReproducePlan: environment, program, stand-ins, patch, data, cost
    plan.refusals                             # empty when it can run; else each reason, named

Everything comes from the registry and from files already here: the record manifest, the environment
manifests and locks, the dataset manifest, and the program text only where it is local (--program-source
PATH, or the record's log in the cache from `repro records fetch-logs`); nothing is downloaded or started.
The environment follows the rule of pipeline/records/environment_choice.py over the record's own environment
and its declared fallbacks, judged offline (a nightly's index date, a wheelhouse); `repro reproduce` then
checks each locked file is still served.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field
from datetime import date

from pipeline.errors import ReproError
from pipeline.records.model import Record, load_record
from pipeline.reproduce.request import ReproduceRequest
from pipeline.workspace import Workspace


@dataclass(kw_only=True)
class ReproducePlan:
    record: str
    runs: int
    environment: dict = field(default_factory=dict)
    program: dict = field(default_factory=dict)
    stand_ins: list[dict] = field(default_factory=list)
    needs: list[str] = field(default_factory=list)  # of the node's software: FP8, Triton (program_needs.py)
    patch: dict | None = None
    data: dict = field(default_factory=dict)
    cost: dict = field(default_factory=dict)
    refusals: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {**asdict(self), "plans": not self.refusals}


def _record_torch(record: Record) -> str:
    return record.software.torch or next((log.torch for log in record.logs if log.torch), "")


def _environment(ws: Workspace, record: Record, req: ReproduceRequest, today: date) -> tuple[dict, str]:
    """(the environment it would use, or a refusal) by the rule, over the record's own and its fallbacks."""
    from pipeline.env.manifest import load_environment
    from pipeline.records.environment_choice import nightly_available, parse_torch, registry_environments

    if req.runtime == "host" and req.python_env == "system" or record.environment == "host":
        return {"name": "system", "kind": "unpinned", "reason": "the Python found on the node, recorded as "
                "unpinned (--python-env system)"}, ""
    try:
        names = [record.environment, *load_environment(ws, record.environment).fallbacks]
    except ReproError as exc:
        return {}, f"environment: {exc.what}"
    pins = {pin.name: pin for pin in registry_environments(ws.environments_dir)}
    wanted, passed = _record_torch(record), []
    for name in names:
        pin, version = pins.get(name), parse_torch(pins[name].torch) if name in pins else None
        if pin is None or version is None:
            passed.append(f"{name}: pins no PyTorch build")
            continue
        available, why = nightly_available(pin, version, today, req.wheelhouse)
        if not available:
            passed.append(f"{name}: {why}")
            continue
        exact = pin.torch == wanted
        reason = (f"{name} pins PyTorch {pin.torch}, the build the record's log prints; {why}" if exact else
                  f"{name} pins PyTorch {pin.torch}, the nearest stable release, for the record's "
                  f"{wanted or 'unnamed version'}")
        lock = "locked" if pin.locked and pin.torch_sha256 else "lock resolved on the node (trust on first use)"
        return {"name": name, "kind": "exact" if exact else "deviation", "reason": reason, "lock": lock,
                "passed_over": passed}, ""
    return {"passed_over": passed}, "environment: none of " + ", ".join(names) + " can be had: " + "; ".join(passed)


def local_program(ws: Workspace, record: Record, source: str | None):
    """The program (a RecordProgram) when it is here: a local --program-source, or a selected run's log in the
    cache; never fetched."""
    from pipeline.records.program import resolve_program
    from pipeline.records.published import cache_dir

    if not any(log.program_sha256 for log in record.logs):
        return None  # no selected run carries a program: _program below says so
    if source and not source.startswith(("http://", "https://")):
        return resolve_program(record, source)
    if any((cache_dir(record, ws.cache) / log.file).is_file() for log in record.logs if log.program_sha256):
        return resolve_program(record, None, ws.cache)
    return None


def _program(record: Record, text: bytes | None, source: str | None, native: bool) -> tuple[dict, str]:
    if native:
        return {"trainer": "native", "files": []}, ""
    from pipeline.reproduce.program_needs import pinned_files

    pinned = next((log for log in record.logs if log.program_sha256), None)
    if pinned is None:
        return {}, "program: the record's logs carry no program text, so no program can be verified or run"
    files = pinned_files(record, pinned)
    programs = {log.fingerprint for log in record.logs if log.fingerprint}
    return {"trainer": "record", "sha256": pinned.program_sha256, "fingerprint": pinned.fingerprint,
            "log": pinned.file, "source": source or record.upstream.log_url(pinned.file),
            "here": text is not None, "files": files,
            "note": f"its logs ran {len(programs)} different programs; the first log's runs" if len(programs) > 1
            else ""}, ""


def _stand_ins(text: bytes | None) -> tuple[list[dict], list[str]]:
    from pipeline.runs.hub_standin.kernels import FA3_REPOSITORIES
    from pipeline.runs.hub_use import hub_use

    if text is None:
        return [{"name": "decided from the program", "why": "the program is not here yet: the run reads its "
                 "imports (kernels hub, FA3) and declares each stand-in"}], []
    out, refusals = [], []
    use = hub_use(text)
    if use.imports or use.repositories or use.refusals:
        out.append({"name": "kernels hub", "why": "get_kernel(" + ", ".join(use.repositories) + ") answered by "
                    "repro's local module (pipeline/runs/hub_standin), never the hub: a hub kernel is not pinned "
                    "by any lock"})
        refusals += [f"stand-ins: the program asks the kernels hub for {name}, which repro's stand-in does not "
                     "serve" for name in use.repositories if name not in FA3_REPOSITORIES]
        refusals += [f"stand-ins: the program reaches the kernels hub in a way repro cannot check: {why}"
                     for why in use.refusals]
    if b"flash_attn_interface" in text:
        out.append({"name": "FA3", "why": "FA3 where the training Python imports it, else the FlexAttention "
                    "stand-in (pipeline/runs/fa3_standin), probed on the node at run time"})
    return out, refusals


def _world_size_refusal(text: bytes | None, nproc: int | None) -> list[str]:
    """A process count the program's own `assert world_size == N` would stop at: --nproc, else the GPUs of this
    node where it has a GPU driver (a run without --nproc starts one process per GPU, and a plan with nvidia-smi
    here is made on the node; elsewhere the runs stage checks the node's count before it launches)."""
    from pipeline.records.world_size import world_size_refusal

    if text is None:
        return []
    counted = ""
    if nproc is None:
        nproc = _gpus_here()
        counted = f" (this node's {nproc} GPU(s), by nvidia-smi -L; --nproc plans another count)" if nproc else ""
    why = world_size_refusal(text, nproc) if nproc is not None else None
    return [f"world size: {why[0]}{counted}; {why[1]}"] if why else []


@functools.cache  # asked once per process: `--plan --all` plans every record on the same node
def _gpus_here() -> int | None:
    """The GPUs nvidia-smi lists on this machine; None without a driver that answers."""
    import shutil

    from pipeline.errors import MissingDependency
    from pipeline.runs.train_plan import count_gpus

    if shutil.which("nvidia-smi") is None:
        return None
    try:
        return count_gpus() or None
    except MissingDependency:
        return None


def _patch(text: bytes | None, req: ReproduceRequest) -> tuple[dict | None, str]:
    from pipeline.records.smoke_cut import planned_smoke_cut

    if req.smoke_steps is None:
        return None, ""
    if text is None:
        return {"name": "smoke", "changes": [], "note": "computed from the program once it is here (give "
                "--program-source PATH, or `repro records fetch-logs NAME`); a program without the fields is "
                "refused before any stage runs"}, ""
    try:
        cut = planned_smoke_cut(text, req.smoke_steps, req.smoke_val_tokens)
    except ReproError as exc:
        return None, f"patch: {exc.what}; {exc.fix}"
    return {"name": "smoke", "sha256": cut.sha256, "changes": cut.listing, "left": list(cut.left)}, ""


def plan_data(ws: Workspace, record: Record, req: ReproduceRequest, text: bytes | None) -> tuple[dict, str]:
    """The shards to fetch: --dataset's, else the record's pin, else the count derived from its program
    (pipeline/records/data_need.py); refused when they hold fewer tokens than the program's steps read."""
    from pipeline.data.fetch import plan as data_plan
    from pipeline.records.data_need import record_need, shortfall

    if req.synth is not None:
        return {"dataset": "generated", "shards": [], "source": "repro data synth"}, ""
    derived = record.dataset.derived
    if req.dataset is None and record.dataset.shards_to_fetch < 1:
        why = derived.derivation if derived else "the manifest has no dataset.derived (imported before it existed)"
        return {"dataset": record.dataset.name}, (
            f"data: {record.name} pins no train shard count and none could be derived from its program ({why}); "
            "write dataset.train_shards in the manifest, or give --dataset for a smoke run")
    try:
        manifest, names = data_plan(req.dataset, None if req.dataset else record, None, None, registry=ws.registry)
        need = record_need(record, text, req.smoke_steps, manifest.format.tokens_per_shard)
    except ReproError as exc:
        return {}, f"data: {exc.what}"
    train = sum("_train_" in n for n in names)
    out = {"dataset": manifest.name, "shards": names, "train": train, "val": sum("_val_" in n for n in names),
           "source": req.data_source, "folder": str(req.data_dir or ws.data / manifest.name),
           "count_from": "--dataset" if req.dataset else "dataset.train_shards" if record.dataset.train_shards
           else "dataset.derived",
           "derivation": derived.derivation if derived and not req.dataset else "",
           "reads": need.derivation if need else ""}  # what this run's steps read (a smoke cut's, or the record's)
    short = shortfall(need, train, manifest.name, manifest.format.tokens_per_shard)
    if short:
        return out, f"data: {short}; give more shards (dataset.train_shards)"
    return out, _val_window_refusal(manifest, names, text, req)


def _val_window_refusal(manifest, names: list[str], text: bytes | None, req: ReproduceRequest) -> str:
    """Refused when the program's validation reads more tokens at once, or in all, than the validation shards hold:
    its val loader would stop (StopIteration) after the whole run's training was paid for."""
    from pipeline.records.val_window import validation_total, validation_window

    counts = [manifest.tokens_locked(n) for n in names if "_val_" in n]
    if text is None or req.trainer != "record" or not counts or None in counts:
        return ""
    given, cut = sum(counts), req.smoke_val_tokens if req.smoke_steps is not None else None
    try:
        window, total = validation_window(text, cut), validation_total(text, cut)
    except (ReproError, SyntaxError):
        return ""  # a program that cannot be read is refused by the smoke cut or the run, with its own reason
    fix = "give a dataset whose validation shards hold that many tokens"
    if window is not None and window[0] > given:
        return (f"data: the program's validation reads {window[0]:,} tokens at once ({window[1]}), but "
                f"{manifest.name}'s validation shard(s) hold {given:,}: its val loader would run out; {fix}")
    if total is not None and total[0] > given:
        return (f"data: the program validates on {total[0]:,} tokens ({total[1]}), but {manifest.name}'s "
                f"validation shard(s) hold {given:,}: its val loader would run out; {fix}"
                + (", or a smaller --smoke-val-tokens" if req.smoke_steps is not None else ""))
    return ""


# Launch to first timed step (compile, warm-up, data), measured on an H200 on 2026-12-01 (README, runs table):
# the record's program on the FlexAttention stand-in, and the native trainer; cold = the first run, warm = later
# runs with the compile cache. A CPU run of the native trainer starts in seconds.
STARTUP_S = {"record": (706.9, 88.0), "native": (166.1, 44.6)}
# One FineWeb shard: a 256-int32 header and 100M uint16 tokens (pipeline/preflight/checks_node.py SHARD_BYTES).
SHARD_BYTES = 256 * 4 + 100_000_000 * 2


def _cost(record: Record, req: ReproduceRequest, data: dict) -> dict:
    """What the node pays: training (the record's own time), each run's startup, the download, the build."""
    p = record.published
    per_run = p.mean_time_s * (req.smoke_steps / p.steps if req.smoke_steps else 1)
    gpu = record.hardware.gpu_count > 0 or not record.hardware.known  # unknown: a GPU record whose logs hid it
    cold, warm = STARTUP_S.get(req.trainer, STARTUP_S["record"]) if gpu else (0.0, 0.0)
    startup = cold + warm * (req.runs - 1)
    shards = data.get("train", 0) + data.get("val", 0)
    build = ("none: the Python found here" if req.python_env == "system" and req.runtime == "host" else
             "the environment's image or venv: ~3 GB of locked wheels, plus FA3's CUDA compile for an image "
             "(not measured here); skipped once built")
    return {"runs": req.runs, "gpus": record.hardware.gpu_count, "gpu_model": record.hardware.gpu_model,
            "hardware_known": record.hardware.known,
            "train_s_per_run": round(per_run, 1), "startup_s": round(startup, 1),
            "startup_basis": (f"{cold} s for the first run, {warm} s each later (launch to first timed step, "
                              "measured on an H200 on 2026-12-01)") if gpu else "seconds on a CPU",
            "download_bytes": shards * SHARD_BYTES, "build": build,
            "known_s": round(per_run * req.runs + startup, 1),
            "basis": (f"the record's mean train time {p.mean_time_s} s over {p.steps} steps"
                      + (f", scaled to {req.smoke_steps} steps" if req.smoke_steps else ""))}


def plan_reproduce(ws: Workspace, req: ReproduceRequest, today: date | None = None) -> ReproducePlan:
    record = load_record(req.record, ws.records_dir)
    if record.program.trainer == "native" and req.synth is None:  # a CPU record of the native trainer: its demo
        from pipeline.reproduce.request import demo_request

        req = demo_request(req.runs, record=record.name)
    # the native trainer (a CPU record's, or --trainer native) runs train/: no program of the record is fetched
    native = record.program.trainer == "native" or req.trainer == "native"
    plan = ReproducePlan(record=record.name, runs=req.runs)
    plan.environment, env_refusal = _environment(ws, record, req, today or date.today())
    try:
        found = local_program(ws, record, req.program_source) if not native else None
    except ReproError as exc:
        found, plan.refusals = None, [f"program: {exc.what}"]
    text = found.text if found is not None else None
    plan.program, program_refusal = _program(record, text, found.source if found is not None else req.program_source,
                                             native)
    plan.stand_ins, stand_in_refusals = _stand_ins(text) if not native else ([], [])
    if not native:
        from pipeline.reproduce.program_needs import (
            program_needs,
            system_float_args,
            system_fp8_refusal,
            system_fp8_scales,
            system_refusal,
        )

        plan.needs = program_needs(plan.program.get("files", []), text)
        plan.refusals += _world_size_refusal(text, req.nproc)
        if plan.environment.get("name") == "system":  # the Python running repro trains: its torch and Triton
            floats = system_float_args(text, record.software.torch)
            plan.stand_ins += [{"name": "float arguments", "why": floats}] if floats else []
            scales = system_fp8_scales(text)
            plan.stand_ins += [{"name": "FP8 scales", "why": scales}] if scales else []
            why = system_refusal(plan.program.get("files", []), record.software.torch)
            plan.refusals += [r for r in (why, system_fp8_refusal(text)) if r]
    plan.patch, patch_refusal = _patch(text, req) if not native else (None, "")
    plan.data, data_refusal = plan_data(ws, record, req, text)
    plan.cost = _cost(record, req, plan.data)
    plan.refusals += [r for r in (env_refusal, program_refusal, *stand_in_refusals, patch_refusal, data_refusal) if r]
    return plan


def render_plan(plan: ReproducePlan) -> list[str]:
    env, prog, data, cost = plan.environment, plan.program, plan.data, plan.cost
    lines = [f"plan for {plan.record}: {'runs as below' if not plan.refusals else 'CANNOT RUN'}"]
    lines += [f"  cannot: {reason}" for reason in plan.refusals]
    if env.get("name"):
        lines.append(f"  environment {env['name']} ({env['kind']}): {env['reason']}")
    lines += [f"    passed over {line}" for line in env.get("passed_over", [])]
    if prog.get("trainer") == "record":
        lines.append(f"  program     {prog['sha256'][:12]}… from {prog['source']}"
                     + ("" if prog["here"] else " (fetched at run time)"))
        lines += [f"    file      {f['name']}  sha256 {f['sha256']}  {f['bytes']:,} bytes" for f in prog["files"]]
        lines += [f"    note      {prog['note']}"] if prog.get("note") else []
    elif prog:
        lines.append("  program     the native trainer (train/)")
    lines += [f"  stand-in    {s['name']}: {s['why']}" for s in plan.stand_ins]
    lines += [f"  needs       {need}" for need in plan.needs]
    if plan.patch:
        lines.append(f"  patch       smoke {plan.patch.get('sha256', '')[:12]}" + (f" {plan.patch['note']}"
                                                                                 if plan.patch.get("note") else ""))
        lines += [f"    cut   {c['field']}: {c['was']} -> {c['now']}  ({c['why']})" for c in plan.patch["changes"]]
        lines += [f"    left  {c['field']} = {c['expression']}  ({c['why']})" for c in plan.patch.get("left", [])]
    if data.get("dataset") == "generated":
        lines.append("  data        generated on this machine (repro data synth)")
    elif "train" in data:
        lines.append(f"  data        {data['dataset']}: {data['train']} train + {data['val']} val shard(s) from "
                     f"{data['source']} into {data['folder']}")
        lines.append(f"    count     from {data['count_from']}"
                     + (f": {data['derivation']}" if data["derivation"] else ""))
        lines += [f"    reads     {data['reads']}"] if data["reads"] and data["reads"] != data["derivation"] else []
    where = f"{cost['gpus']} x {cost['gpu_model']}" if cost["gpus"] else \
        "CPU" if cost["hardware_known"] else "GPUs (their model and count are not in the record's logs)"
    lines.append(f"  cost        {cost['runs']} run(s) on {where}, about "
                 f"{cost['train_s_per_run']} s of training each ({cost['basis']})")
    lines.append(f"              + startup {cost['startup_s']} s in all ({cost['startup_basis']})" if cost["startup_s"]
                 else f"              + startup: {cost['startup_basis']}")
    if cost["download_bytes"]:
        lines.append(f"              + download {cost['download_bytes'] / 1e9:.1f} GB of shards (a few minutes at "
                     "datacenter bandwidth; skipped where they verify)")
    lines.append(f"              + build: {cost['build']}")
    lines.append(f"              = at least {cost['known_s']:.0f} s ({cost['known_s'] / 60:.0f} min) of node time "
                 "besides the download and the build")
    return lines
