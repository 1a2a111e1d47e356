"""The native program's identity covers the declared files that run (train/program.py), and train/ holds no others.

    .venv/bin/python -m pytest -q tests/test_train_program.py
"""

from __future__ import annotations

import ast
import subprocess
import sys

from tests.paths import REPO_ROOT
from train.program import FILES, program_text

TRAIN = REPO_ROOT / "train"


def train_imports(path) -> set[str]:
    """The train/ files a file imports anywhere in it (top level or inside functions: kernels load lazily)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "train":
            names |= {f"{a.name}.py" for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("train."):
            names.add(node.module.split(".")[1] + ".py")
        elif isinstance(node, ast.Import):
            names |= {a.name.split(".")[1] + ".py" for a in node.names if a.name.startswith("train.")}
    return names


def import_closure(start: str) -> set[str]:
    """Every train/ file a run of `python -m train` can import, the package's __init__ included."""
    seen, todo = set(), ["__init__.py", start]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += sorted(train_imports(TRAIN / name))
    return seen


def test_the_declared_files_are_what_the_trainer_imports_and_all_of_train():
    assert import_closure("__main__.py") == set(FILES)
    assert {p.name for p in TRAIN.glob("*.py")} == set(FILES)  # a file nothing imports would not run: none left
    assert not any(TRAIN.glob("*/*.py"))  # and no subpackage the glob would miss


def test_the_log_starts_with_the_declared_files_and_the_identity_hashes_them():
    from pipeline.runs.train_plan import native_program_text
    from train.log import program_text as logged

    text = program_text()
    markers = [line[len("# ---- train/"):-len(" ----")] for line in text.decode().splitlines()
               if line.startswith("# ---- train/")]
    assert markers == list(FILES)
    assert native_program_text() == text == logged().encode()


def test_the_orchestrator_reads_it_without_torch():
    """pipeline/runs/train_plan.py imports train.program in a process that may have no torch: it must import none."""
    code = ("import sys; sys.modules['torch'] = None; from train.program import program_text; "
            "print(len(program_text()))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == len(program_text())


def test_a_file_outside_the_list_is_not_part_of_the_identity(tmp_path):
    """A stray module beside the trainer (a scratch copy, an experiment) changes neither the log nor the hash."""
    import shutil

    from pipeline.runs.train_plan import native_program_text

    copy = tmp_path / "train"
    shutil.copytree(TRAIN, copy)
    (copy / "aaa_experiment.py").write_text("SPEED = 'unmeasured'\n")
    assert native_program_text(copy) == program_text(copy) == program_text()


def _circles() -> list[list[str]]:
    """Import circles among train/'s files (imports anywhere in a file, lazy ones too), each as a path a -> ... -> a."""
    graph = {name: sorted(train_imports(TRAIN / name) - {"__init__.py"}) for name in FILES}
    found, done = [], set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            found.append(path[path.index(name):] + [name])
            return
        if name in done:
            return
        for target in graph[name]:
            visit(target, path + [name])
        done.add(name)

    for name in FILES:
        visit(name, [])
    return found


def test_no_train_file_imports_back_into_its_importer():
    """newton_schulz.py once imported ns_triton.py, which imported its coefficients back (issue 40): the
    coefficients are passed in now, and no circle of imports may come back anywhere in train/."""
    assert _circles() == []
    assert train_imports(TRAIN / "ns_triton.py") == set()
