"""The record's program as text, and the patches applied to that text: no torch here, so a process that only
writes the patched program (benchmarks/sidebyside.py, before it starts its runs) does not pay torch's import.

    from benchmarks.record_patch import program_text, sidebyside_patch
    text, changes = sidebyside_patch(program_text(), train_files=..., val_files=..., steps=80, val_tokens=...)

benchmarks/record_program.py loads the same text as a Python module (the CPU tests, device_diff).
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "record-program" / "2025-09-23_MuonCustomSizing" / "train_gpt.py"
STANDIN_DIR = REPO / "pipeline" / "runs" / "fa3_standin"  # the product's stand-in (repro reproduce --smoke uses it)
PROGRAM_SHA256 = "47e4c12714522bc682968795479c6a89102a2b62656e2f00ba3a887fb770e010"  # the log's pinned program
MAIN_MARKER = "args = Hyperparameters()\n"


class PatchError(ValueError):
    """A text substitution did not find its target exactly once: the program is not the one expected."""


def substitute(text: str, changes: list[tuple[str, str, str]]) -> str:
    """Apply (old, new, why) substitutions; each `old` must occur exactly once."""
    for old, new, why in changes:
        hits = text.count(old)
        if hits != 1:
            raise PatchError(f"expected exactly one {old!r} in the program ({why}); found {hits}")
        text = text.replace(old, new)
    return text


def program_text(path: Path = FIXTURE) -> str:
    return Path(path).read_text(encoding="utf-8")


def split_program(text: str) -> tuple[str, str]:
    """(top, main): the definitions above `args = Hyperparameters()` and the main section from it on."""
    if text.count(MAIN_MARKER) != 1:
        raise PatchError(f"expected one line {MAIN_MARKER.strip()!r} starting the record's main section")
    cut = text.index(MAIN_MARKER)
    return text[:cut], text[cut:]


# ---- the world-size-8 Muon patch: the rule for comparing with the record below 8 ranks ----------------------------
#
# The record's Muon cuts its matrices into groups [1, 10, 16, 16] and gives each rank a contiguous chunk of each
# group; it reshapes a whole chunk by the kind of its first parameter. At 8 ranks every chunk holds one kind. At 1,
# 2 or 4 ranks the third group's chunk holds attention and MLP matrices, and the MLP ones are orthogonalized as
# four D x D blocks: other math (trainer.md section 3; on one H200, 80 steps, it ended 0.1 lower in loss). train/
# does the 8-rank math at every world size, so below 8 ranks loss parity is judged against the record's program
# with this one line added after its Muon is built: each group cut where the parameter kind changes ([1, 10, 10,
# 6, 16]), so that every chunk holds one kind, as at 8 ranks. Per-parameter arithmetic does not depend on the
# grouping (momentum, Newton-Schulz per matrix, lr by shape). This is the only place the patch is written:
# sidebyside_patch adds it to the program text, record_program.split_mixed_muon_groups executes it on a built Muon
# (device_diff, the CPU tests), and tests/test_train_vs_record.py checks that the patched program at world size 1
# updates every parameter exactly as the unpatched program does at world size 8.
MUON_LINE = "optimizer2 = Muon(hidden_matrix_params+gate_params, lr=0.05, momentum=0.95, weight_decay=0.0)\n"
MUON_SPLIT = ("optimizer2.param_groups = [dict(g, params=list(run)) for g in optimizer2.param_groups "
              "for _, run in __import__('itertools').groupby(g['params'], key=lambda p: p.module)]\n")

SEED_ANCHOR = "model: nn.Module = GPT(\n"
SEED_LINE = 'if "SBS_SEED" in os.environ: torch.manual_seed(int(os.environ["SBS_SEED"]))  # sidebyside --seed\n'


def sidebyside_patch(text: str, *, train_files: str, val_files: str, steps: int, val_tokens: int,
                     cycle_train: bool = True, warmup_steps: int | None = None,
                     split_muon_groups: bool = True, seed_from_env: bool = False) -> tuple[str, list[dict]]:
    """The record's program pointed at other shards with a shorter schedule; returns (text, listed changes).

    steps: scheduled iterations, no extension. val_tokens: validated tokens and validation batch (one batch).
    cycle_train: restart the training files when they run out (the program's own comment suggests
    itertools.cycle for multi-epoch training), needed for small data such as docs-v1 (~11 steps per pass).
    split_muon_groups: the world-size-8 Muon patch (MUON_SPLIT): below 8 ranks it is what makes the record's
    program compute what train/ computes.
    seed_from_env: seed torch before the model is built when the environment sets SBS_SEED. The record seeds
    nothing (its weights come from the CPU generator's per-process seed), so its runs cannot be repeated or
    paired with train/'s; one text for every seed keeps the compile caches.
    """
    changes = [
        ('    train_files: str = "data/fineweb10B/fineweb_train_*.bin"',
         f"    train_files: str = {train_files!r}", "training shards"),
        ('    val_files: str = "data/fineweb10B/fineweb_val_*.bin"',
         f"    val_files: str = {val_files!r}", "validation shards"),
        ("    val_tokens: int = 10485760", f"    val_tokens: int = {val_tokens}",
         "validation tokens (the record's 10,485,760 exceed a small val shard)"),
        ("    val_batch_size: int = 4 * 64 * 1024 * 8", f"    val_batch_size: int = {val_tokens}",
         "one validation batch of val_tokens (val_tokens must be a multiple of it)"),
        ("    num_iterations: int = 1640", f"    num_iterations: int = {steps}", "scheduled steps"),
        ("    iteration_extension = 40", "    iteration_extension = 0", "no extension steps"),
    ]
    if cycle_train:
        changes.append(("    file_iter = iter(files)  #", "    file_iter = __import__('itertools').cycle(files)  #",
                        "restart the training files when they run out (small data)"))
    if warmup_steps is not None:
        changes.append(("warmup_steps = 30\n", f"warmup_steps = {warmup_steps}\n", "compile warm-up steps"))
    if split_muon_groups:
        changes.append((MUON_LINE, MUON_LINE + MUON_SPLIT,
                        "Muon groups cut where attention meets MLP: the math of 8 ranks at 1, 2 or 4"))
    if seed_from_env:
        changes.append((SEED_ANCHOR, SEED_LINE + SEED_ANCHOR, "torch seeded from SBS_SEED when set (repeated runs)"))
    patched = substitute(text, changes)
    return patched, [dict(old=old, new=new, why=why) for old, new, why in changes]
