"""The import contract (issue 28): stage order, public faces, and the trainer's independence.

Every import statement counts, the ones inside functions too (a lazy import is still a dependency).
The layers are declared in pipeline/__init__.py (STAGES) and each stage's __init__ (PUBLIC); this test
only reads them. `make lint` runs it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pipeline
from tests.code_shape import imports_of
from tests.paths import REPO_ROOT

PIPELINE = REPO_ROOT / "pipeline"
CORE_TRAINER = ("model", "loop", "muon", "adam", "data", "config")
# each a prefix: the experiments the lean trainer deleted or moved to benchmarks/. The trainer's own --profile
# (train/profile.py, a user's option) is not one, nor is train/qk_rope.py since issue 41 (a triton_op form of the
# fusion issue 28 deleted, measured 4.0 ms per step faster and always on).
EXPERIMENTS = ("relu2_mlp", "xent_sass", "bench", "timing", "ns_check", "xent_check")


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every absolute import in the file, a TYPE_CHECKING one too (tests/code_shape.py's
    walker); `from a import b` yields a.b as well as a."""
    return [(i.line, i.module) for i in imports_of(path)]


def layer_of() -> dict[str, int]:
    layers = {}
    for index, entry in enumerate(pipeline.STAGES):
        for name in (entry,) if isinstance(entry, str) else entry:
            layers[name] = index
    return layers


def unit(module: str) -> str | None:
    """The stage or shared module `pipeline.x.y` belongs to (x), None outside pipeline."""
    parts = module.split(".")
    return parts[1] if parts[0] == "pipeline" and len(parts) > 1 else None


def pipeline_files() -> list[Path]:
    return sorted(p for p in PIPELINE.rglob("*.py") if p.name != "__main__.py" and "fa3_standin" not in p.parts)


def test_every_stage_is_declared_and_every_package_has_a_public_face():
    layers = layer_of()
    packages = {p.parent.name for p in PIPELINE.glob("*/__init__.py")}
    assert packages - {"cli"} <= set(layers), "a stage package missing from pipeline.STAGES"
    for name in packages - {"cli"}:
        public = __import__(f"pipeline.{name}", fromlist=["PUBLIC"]).PUBLIC
        assert all((PIPELINE / name / f"{module}.py").is_file() for module in public), name


def violations_of_stage_order() -> list[str]:
    layers = layer_of()
    found = []
    for path in pipeline_files():
        here = path.relative_to(PIPELINE).parts[0].removesuffix(".py")
        for line, module in imports(path):
            there = unit(module)
            if there is None or there == here or there in ("__version__",):
                continue
            if here not in layers and there in layers:
                found.append(f"{path.relative_to(REPO_ROOT)}:{line}: shared module imports stage {module}")
            elif here in layers and there in layers and layers[there] >= layers[here]:
                found.append(f"{path.relative_to(REPO_ROOT)}:{line}: {here} imports {module}, a later or sibling stage")
    return found


def test_stages_import_only_earlier_stages_and_shared_modules():
    assert violations_of_stage_order() == []


def test_other_stages_import_only_a_packages_public_modules():
    found = []
    for path in pipeline_files():
        here = path.relative_to(PIPELINE).parts[0]
        for line, module in imports(path):
            parts = module.split(".")
            if len(parts) < 3 or parts[0] != "pipeline" or parts[1] == here:
                continue
            package = PIPELINE / parts[1]
            if not (package / "__init__.py").is_file() or not (package / f"{parts[2]}.py").is_file():
                continue
            public = __import__(f"pipeline.{parts[1]}", fromlist=["PUBLIC"]).PUBLIC
            if parts[2] not in public:
                found.append(f"{path.relative_to(REPO_ROOT)}:{line}: {module} is not in pipeline.{parts[1]}.PUBLIC")
    assert found == []


def test_only_the_cli_group_resolves_the_workspace():
    """No stage falls back to Workspace.resolve() (the current folder, environment variables): the CLI
    resolves it once and passes it down, so --root and --registry reach every read."""
    def resolves(path: Path) -> bool:
        return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "resolve"
                   and isinstance(node.func.value, ast.Name) and node.func.value.id == "Workspace"
                   for node in ast.walk(ast.parse(path.read_text())))

    callers = sorted(str(p.relative_to(REPO_ROOT)) for p in pipeline_files() if resolves(p))
    assert callers == ["pipeline/cli/__init__.py"]


def test_train_never_imports_pipeline():
    found = [f"{p.relative_to(REPO_ROOT)}:{line}: {module}" for p in sorted((REPO_ROOT / "train").rglob("*.py"))
             for line, module in imports(p) if module.split(".")[0] == "pipeline"]
    assert found == []


def experiment_imports_of_the_core_trainer() -> list[str]:
    found = []
    for name in CORE_TRAINER:
        path = REPO_ROOT / "train" / f"{name}.py"
        for line, module in imports(path):
            parts = module.split(".")
            if parts[0] == "train" and len(parts) > 1 and parts[1].startswith(EXPERIMENTS):
                found.append(f"train/{name}.py:{line}: {module}")
    return sorted(set(found))


def test_the_core_trainer_never_imports_an_experiment():
    assert experiment_imports_of_the_core_trainer() == []


def test_the_trainer_writes_the_separator_the_pipeline_reads():
    """train/ cannot import pipeline/, so the log separator stands in both; they must be the same line."""
    from pipeline.records.logparse import SEPARATOR
    from train.log import SEPARATOR as WRITTEN

    assert WRITTEN.encode() == SEPARATOR


def test_no_module_reaches_itself_through_its_imports():
    """Issue 40: no import circle anywhere in the tree (a lazy import counts; one under TYPE_CHECKING does not)."""
    from tests.code_shape import circles, import_graph

    assert circles(import_graph(REPO_ROOT, ("pipeline", "train", "benchmarks", "tests"))) == []


def test_every_wide_dataclass_is_built_with_names():
    """Issue 40: a dataclass of 5+ fields is keyword-only, and no call site passes one positional arguments."""
    from tests.code_shape import positional_constructions, wide_dataclasses

    loose = [f"{c.path.relative_to(REPO_ROOT)} {c.name}" for c in wide_dataclasses(REPO_ROOT) if not c.keyword_only]
    assert loose == []
    assert positional_constructions(REPO_ROOT) == []


def test_the_default_record_is_named_only_inside_the_registry():
    """Issue 40: which record a command takes when none is given is the Registry's (Registry.DEFAULT_RECORD);
    no other module holds or imports a name of its own for it."""
    found = []
    for path in pipeline_files():
        if path == PIPELINE / "registry.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            named = node.id if isinstance(node, ast.Name) else node.name if isinstance(node, ast.alias) else None
            if named == "DEFAULT_RECORD":
                found.append(f"{path.relative_to(REPO_ROOT)}:{getattr(node, 'lineno', '?')}")
    assert found == []
