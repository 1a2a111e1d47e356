"""How many shards a record's program reads, worked out from its own hyperparameters (its syntax tree).

    need = data_need(program, world_size=8, tokens_per_shard=100_000_000)
    need.train_shards, need.val_shards        # what to fetch (with the margin below)
    need.train_tokens                         # what the program's steps read, before the margin
    need.derivation                           # one line saying how, for `--plan` and the manifest
    need_for_steps(program, steps=20, ...)    # the same for a smoke run cut to 20 steps (and 2 of extension)

The programs have said their batch in several ways over the speedrun's history; each is read where it is
written, in this order, from the class-level fields of train_gpt.py (the Hyperparameters dataclass) and the
calls that build a training schedule:
  staged      TrainingStage(duration=..., batch_size=...) calls (2026): each stage's share of the scheduled steps
              at its batch; the stage without a duration runs the extension
  schedule    train_bs_schedule = (b1, b2, ...) (2025-11 on): the scheduled steps split evenly among them;
              the extension at train_bs_extension when written, else the last
  tokens      train_batch_size (2025-09): tokens per step
  sequences   batch_size x sequence_length (2024): sequences per step of that many tokens (grad accumulation
              only splits them)
  tokens      batch_size alone (2025-01): tokens per step
  per GPU     train_seq_len | seq_len alone (2025-01-26 on): one sequence per GPU per step, x the world size
Steps: num_scheduled_iterations | num_iterations (a field computed from others is evaluated), plus the
extension (num_extension_iterations | iteration_extension) unless num_iterations already adds it.

The margin: a loader that starts every sequence at a document's first token (BOS-aligned: `align_to_bos`, a
BOS finder) skips the tails it cuts; upstream's own README of 2025-09-05 fetched 9 shards (900M tokens) for
1705 steps of 393,216 tokens (670M), so those loaders waste at most a third: BOS_MARGIN covers it. A fixed-
stride loader skips at most one step's tokens at the end of each shard: STRIDE_MARGIN.
"""

from __future__ import annotations

import ast
import math
import operator
from dataclasses import dataclass

from pipeline.errors import CheckFailed
from pipeline.records.identity import shared_tree, walk
from pipeline.records.program_files import split_program
from pipeline.records.smoke_cut import SMOKE_EXTENSION

BOS_MARGIN = 0.35
STRIDE_MARGIN = 0.02
STEPS = ("num_scheduled_iterations", "num_iterations")
EXTENSION = ("num_extension_iterations", "iteration_extension")
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Div: operator.truediv, ast.Pow: operator.pow}


@dataclass(frozen=True, kw_only=True)
class DataNeed:
    train_shards: int
    val_shards: int
    steps: int  # the run's steps, extension included
    train_tokens: int  # what those steps read, before the margin
    tokens_per_step: int  # the largest batch of the schedule
    val_tokens: int
    margin: float
    derivation: str

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class _Schedule:
    phases: tuple[tuple[float, int], ...]  # (share of the scheduled steps, tokens per step)
    extension_batch: int
    how: str


def _fields(tree: ast.Module) -> dict[str, ast.expr]:
    """Class-level `name[: type] = value` of every class, first one wins (the Hyperparameters dataclass)."""
    out: dict[str, ast.expr] = {}
    for cls in (n for n in walk(tree) if isinstance(n, ast.ClassDef)):
        for stmt in cls.body:
            target = stmt.target if isinstance(stmt, ast.AnnAssign) else \
                stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
            if isinstance(target, ast.Name) and stmt.value is not None:
                out.setdefault(target.id, stmt.value)
    return out


class _Eval:
    """Arithmetic over constants and other class fields, evaluated without running any code."""

    def __init__(self, fields: dict[str, ast.expr]):
        self.fields, self.busy = fields, set()

    def field(self, name: str):
        node = self.fields.get(name)
        if node is None or name in self.busy:
            return None
        self.busy.add(name)
        try:
            return self.value(node)
        finally:
            self.busy.discard(name)

    def value(self, node: ast.expr):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value,
                                                                                                     bool):
            return node.value
        if isinstance(node, ast.Name):
            return self.field(node.id)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = self.value(node.left), self.value(node.right)
            if left is None or right is None or (isinstance(node.op, (ast.Div, ast.FloorDiv)) and not right):
                return None
            return _OPS[type(node.op)](left, right) if not isinstance(node.op, ast.Pow) or abs(right) < 64 else None
        if isinstance(node, (ast.Tuple, ast.List)):
            items = [self.value(e) for e in node.elts]
            return tuple(items) if items and None not in items else None
        return None


def _names(node: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _steps(fields: dict[str, ast.expr], ev: _Eval, steps: int | None) -> tuple[int, int, str]:
    """(scheduled steps, extension steps, how); `steps` given: a smoke run's count and the extension it keeps."""
    name = next((n for n in STEPS if n in fields), None)
    if name is None:
        raise CheckFailed(f"train_gpt.py has no class-level step count ({' or '.join(STEPS)})",
                          "give the data by hand: --dataset NAME, or write dataset.train_shards in the manifest")
    ext_name = next((n for n in EXTENSION if n in fields), None)
    extension = int(ev.field(ext_name) or 0) if ext_name else 0
    if steps is not None:
        kept = min(extension, SMOKE_EXTENSION)
        return steps, kept, f"{steps} + {kept} steps (the smoke cut)" if kept else f"{steps} steps (the smoke cut)"
    total = ev.field(name)
    if total is None:
        raise CheckFailed(f"train_gpt.py's {name} is not a number this tool can evaluate",
                          "give the data by hand: --dataset NAME, or write dataset.train_shards in the manifest")
    if name == "num_iterations" and ext_name and ext_name in _names(fields[name]):  # a total derived from both
        scheduled = int(ev.field("num_scheduled_iterations") or total - extension)
        return scheduled, extension, f"{int(total)} steps ({name} = {ast.unparse(fields[name])})"
    how = f"{int(total)} + {extension} steps ({name} + {ext_name})" if extension else f"{int(total)} steps ({name})"
    return int(total), extension, how


def _stages(tree: ast.Module, ev: _Eval) -> _Schedule | None:
    phases, extension = [], None
    for call in (n for n in walk(tree) if isinstance(n, ast.Call)):
        kw = {k.arg: k.value for k in call.keywords if k.arg}
        if "batch_size" not in kw or getattr(call.func, "id", getattr(call.func, "attr", "")) != "TrainingStage":
            continue
        batch = ev.value(kw["batch_size"])
        share = ev.value(kw["duration"]) if "duration" in kw else None
        if batch is None:
            return None
        if share is None:
            extension = int(batch)
        else:
            phases.append((float(share), int(batch)))
    if not phases:
        return None
    return _Schedule(tuple(phases), extension or phases[-1][1],
                     f"{len(phases)} TrainingStage batches " + ", ".join(f"{b:,}" for _, b in phases)
                     + (f", extension {extension:,}" if extension else ""))


def _schedule(tree: ast.Module, fields: dict[str, ast.expr], ev: _Eval, world_size: int) -> _Schedule:
    staged = _stages(tree, ev)
    if staged is not None:
        return staged
    if (bs := ev.field("train_bs_schedule")) is not None and isinstance(bs, tuple):
        ext = ev.field("train_bs_extension")
        return _Schedule(tuple((1 / len(bs), int(b)) for b in bs), int(ext or bs[-1]),
                         f"train_bs_schedule of {len(bs)} even parts, largest {max(bs):,} tokens"
                         + (f", extension {int(ext):,}" if ext else ""))
    if (v := ev.field("train_batch_size")) is not None:
        return _Schedule(((1.0, int(v)),), int(v), f"train_batch_size = {int(v):,} tokens per step")
    batch, seq = ev.field("batch_size"), ev.field("sequence_length")
    if batch is not None and seq is not None:
        return _Schedule(((1.0, int(batch * seq)),), int(batch * seq),
                         f"batch_size {int(batch)} x sequence_length {int(seq)} = {int(batch * seq):,} tokens per step")
    if batch is not None:
        return _Schedule(((1.0, int(batch)),), int(batch), f"batch_size = {int(batch):,} tokens per step")
    name = next((n for n in ("train_seq_len", "seq_len") if ev.field(n) is not None), None)
    if name is not None:
        per = int(ev.field(name)) * world_size
        return _Schedule(((1.0, per),), per, f"{name} {int(ev.field(name))} per GPU x {world_size} GPUs = "
                         f"{per:,} tokens per step")
    raise CheckFailed("train_gpt.py names no batch this tool can read (TrainingStage batch_size, train_bs_schedule, "
                      "train_batch_size, batch_size, train_seq_len or seq_len)",
                      "give the data by hand: --dataset NAME, or write dataset.train_shards in the manifest")


def _bos_aligned(tree: ast.Module) -> bool:
    names = {n.id for n in walk(tree) if isinstance(n, ast.Name)} | \
        {a.arg for n in walk(tree) if isinstance(n, ast.arguments) for a in n.args}
    return bool(names & {"align_to_bos", "BOS_ID", "train_align_to_bos"}) or \
        any(isinstance(n, ast.ClassDef) and n.name == "BOSFinder" for n in walk(tree))


def _parse(program: bytes) -> ast.Module:
    try:
        return shared_tree(split_program(program)[0].text)  # read only: the fingerprint's tree, when recent
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise CheckFailed(f"train_gpt.py cannot be parsed to read its batch and steps: {exc}",
                          "give the data by hand: --dataset NAME, or write dataset.train_shards in the manifest") \
            from None


def remembered_data_need(program: bytes, *, world_size: int, tokens_per_shard: int) -> DataNeed:
    """data_need(...), kept in the log reader's memo (pipeline/records/log_cache.py) like a log's facts, so that a
    re-import parses and walks no program for it (a pure function of its arguments). The importer's; a plan or a
    refused run writes no memo."""
    from pipeline.records.log_cache import data_need as remembered

    args = {"world_size": world_size, "tokens_per_shard": tokens_per_shard}
    return remembered(program, args, lambda: data_need(program, **args), DataNeed)


def data_need(program: bytes, *, world_size: int, tokens_per_shard: int, steps: int | None = None) -> DataNeed:
    """The shards a program reads at its record's world size (`steps`: a smoke run's cut, with the extension it keeps).
    CheckFailed naming what cannot be read."""
    tree = _parse(program)
    fields = _fields(tree)
    ev = _Eval(fields)
    scheduled, extension, steps_how = _steps(fields, ev, steps)
    sched = _schedule(tree, fields, ev, max(1, world_size))
    train = sum(share * scheduled * batch for share, batch in sched.phases) + extension * sched.extension_batch
    val = int(ev.field("val_tokens") or 0)
    bos = _bos_aligned(tree)
    margin = BOS_MARGIN if bos else STRIDE_MARGIN
    shards = max(1, math.ceil(train * (1 + margin) / tokens_per_shard))
    val_shards = max(1, math.ceil(val / tokens_per_shard))
    why = "a BOS-aligned loader skips the document tails it cuts" if bos else \
        "a shard tail shorter than a step is skipped"
    text = (f"{steps_how} x {sched.how}: {int(train):,} train tokens, + {margin:.0%} ({why})"
            f" = {shards} shard(s) of {tokens_per_shard:,} tokens; val_tokens {val:,} = {val_shards} val shard(s)")
    return DataNeed(train_shards=shards, val_shards=val_shards, steps=scheduled + extension, train_tokens=int(train),
                    tokens_per_step=max(b for _, b in sched.phases + ((0, sched.extension_batch),)),
                    val_tokens=val, margin=margin, derivation=text)


def shards_read(need: DataNeed, tokens_per_shard: int) -> int:
    """The shards the steps read before any margin: fewer given and the run stops at a step, not at the start."""
    return max(1, math.ceil(need.train_tokens / tokens_per_shard))


def record_need(record, program: bytes | None, steps: int | None, tokens_per_shard: int | None) -> DataNeed | None:
    """What this run of the record reads: from the program when it is here (a smoke cut's steps, or the record's),
    else the importer's derivation in the manifest (full runs only); None when neither can say. `record` is a
    pipeline.records.model.Record (not imported here: the model imports this module)."""
    if program is not None and tokens_per_shard:
        try:
            return data_need(program, world_size=record.hardware.gpu_count or 8, tokens_per_shard=tokens_per_shard,
                             steps=steps)
        except CheckFailed:
            pass  # a program whose batch this tool cannot read: the manifest's count stands, unchecked
    derived = record.dataset.derived
    return derived if steps is None and derived is not None and derived.train_shards else None


def shortfall(need: DataNeed | None, given: int, dataset: str, tokens_per_shard: int | None) -> str:
    """Why `given` train shards of `dataset` are too few for the run ("" when they suffice or nothing can say)."""
    if need is None or not tokens_per_shard:
        return ""
    read = shards_read(need, tokens_per_shard)
    if given >= read:
        return ""
    return (f"{given} train shard(s) of {dataset} ({given * tokens_per_shard:,} tokens) are fewer than the "
            f"{need.train_tokens:,} tokens its {need.steps} steps read ({need.derivation}): it would stop at a "
            f"step with no data left")
