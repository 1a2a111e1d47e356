"""The native program: the declared list of train/'s files that a run executes, and their text.

    from train.program import FILES, program_text
    text = program_text()      # bytes: what the native log starts with; its sha256 is the native program's identity

The log (train/log.py) prints these files, in this order, each after a `# ---- train/<name> ----` line, and the
orchestrator (pipeline/runs/stage.py) hashes the same bytes without importing torch: this module imports
nothing of train/ and no third-party package. tests/test_train_program.py checks that the list is exactly the
import closure of train/__main__.py (a run imports nothing of train/ outside it) and that train/ holds no other
Python file (everything in train/ runs; measuring tools live in benchmarks/).
"""

from __future__ import annotations

from pathlib import Path

TRAIN_DIR = Path(__file__).resolve().parent

FILES = (
    "__init__.py", "__main__.py", "adam.py", "attention.py", "config.py", "data.py", "fp8.py", "kernels.py",
    "log.py", "loop.py", "loss.py", "model.py", "muon.py", "newton_schulz.py", "ns_triton.py", "profile.py",
    "program.py", "qk_rope.py", "qk_rope_kernel.py", "relu2_grad.py", "relu2_grad_kernel.py", "schedule.py",
    "step_weights.py", "xent_kernels.py", "xent_triton.py",
)


def program_text(root: Path = TRAIN_DIR) -> bytes:
    parts = []
    for name in FILES:
        source = (root / name).read_bytes()
        parts.append(f"# ---- train/{name} ----\n".encode() + source + (b"" if source.endswith(b"\n") else b"\n"))
    return b"".join(parts)
