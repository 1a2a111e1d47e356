"""Figures of the code's shape that tests hold and benchmarks/code_figures.py prints (issue 40): the import
graph and its circles, and the wide dataclasses (5 or more fields) with how each is built.

    imports_of(path)                     # [Import(line, module, typing_only)]: the one import walker
    graph = import_graph(REPO_ROOT, ("pipeline", "train"))
    circles(graph)                       # [] when no module reaches itself through its imports
    wide_dataclasses(REPO_ROOT)          # [WideClass(path, name, fields, keyword_only)]
    positional_constructions(REPO_ROOT)  # ["path:line Name(3 positional)"] for wide dataclasses

Every import counts, the ones inside functions too: a lazy import still makes the two modules one unit. Only
an import under `if TYPE_CHECKING:` does not: it never runs, and names a type for the reader and the checker.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

WIDE = 5  # fields from which a dataclass is built with names only (torchtitan's kw_only configs)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def python_files(root: Path, trees: tuple[str, ...]) -> list[Path]:
    return sorted(p for tree in trees for p in (root / tree).rglob("*.py") if "fixtures" not in p.parts)


@dataclass(frozen=True)
class Import:
    line: int
    module: str  # `from a import b` yields a and a.b (b may be a submodule)
    typing_only: bool  # under `if TYPE_CHECKING:`


def imports_of(path: Path, package: str | None = None) -> list[Import]:
    """Every import statement of the file, the ones inside functions too. A relative import is resolved from
    `package` (the file's own package); without one, only absolute imports are listed."""
    tree = ast.parse(path.read_text(), filename=str(path))
    typing_only = {id(n) for block in ast.walk(tree) if _is_type_checking(block) for stmt in block.body
                   for n in ast.walk(stmt)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and (node.level == 0 or package is not None):
            base = node.module or ""
            if node.level:  # relative: climb from this module's package
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        found += [Import(node.lineno, target, id(node) in typing_only) for target in targets]
    return found


def import_graph(root: Path, trees: tuple[str, ...]) -> dict[str, set[str]]:
    """module -> the modules of the same trees it imports (a `from a import b` of submodule b counts as a.b)."""
    files = {module_name(p, root): p for p in python_files(root, trees)}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        graph[name] = {i.module for i in imports_of(path, package)
                       if not i.typing_only and i.module in files and i.module != name}
    return graph


def _is_type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


@dataclass(frozen=True)
class WideClass:
    path: Path
    name: str
    fields: tuple[str, ...]
    keyword_only: bool


def _is_dataclass_decorator(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    return (isinstance(target, ast.Name) and target.id == "dataclass") or \
        (isinstance(target, ast.Attribute) and target.attr == "dataclass")


def _init_fields(cls: ast.ClassDef) -> tuple[str, ...]:
    names = []
    for stmt in cls.body:
        if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
            continue
        if "ClassVar" in ast.unparse(stmt.annotation):
            continue
        value = stmt.value
        if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "field" and any(
                k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False
                for k in value.keywords):
            continue
        names.append(stmt.target.id)
    return tuple(names)


def wide_dataclasses(root: Path, trees: tuple[str, ...] = ("pipeline", "train")) -> list[WideClass]:
    found = []
    for path in python_files(root, trees):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.ClassDef):
                continue
            decorators = [d for d in node.decorator_list if _is_dataclass_decorator(d)]
            fields = _init_fields(node)
            if not decorators or len(fields) < WIDE:
                continue
            keyword_only = any(isinstance(d, ast.Call) and any(
                k.arg == "kw_only" and isinstance(k.value, ast.Constant) and k.value.value is True
                for k in d.keywords) for d in decorators)
            found.append(WideClass(path=path, name=node.name, fields=fields, keyword_only=keyword_only))
    return found


def dataclass_count(root: Path, trees: tuple[str, ...] = ("pipeline",)) -> int:
    return sum(1 for path in python_files(root, trees)
               for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
               if isinstance(node, ast.ClassDef) and any(_is_dataclass_decorator(d) for d in node.decorator_list))


def positional_constructions(root: Path, trees: tuple[str, ...] = ("pipeline", "train", "tests", "benchmarks"),
                             ) -> list[str]:
    """Calls that pass positional arguments to a wide dataclass, resolved by name the way Python would: a class
    of the calling file first, then the module it imports the name from."""
    wide: dict[str, dict[str, WideClass]] = {}
    for cls in wide_dataclasses(root):
        wide.setdefault(cls.name, {})[module_name(cls.path, root)] = cls
    found = []
    for path in python_files(root, trees):
        tree = ast.parse(path.read_text(), filename=str(path))
        here = module_name(path, root)
        local = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        imported = {alias.asname or alias.name: n.module for n in ast.walk(tree)
                    if isinstance(n, ast.ImportFrom) and n.module and not n.level for alias in n.names}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else \
                node.func.attr if isinstance(node.func, ast.Attribute) else None
            home = here if name in local else _defined_in(root, imported.get(name), name)
            if name in wide and home in wide[name]:
                found.append(f"{path.relative_to(root)}:{node.lineno} {name}({len(node.args)} positional)")
    return found


def _defined_in(root: Path, module: str | None, name: str, hops: int = 3) -> str | None:
    """The module that defines `name` when `module` only imports it from another (a re-export), else `module`."""
    if not module or hops == 0:
        return module
    path = root / Path(*module.split(".")).with_suffix(".py")
    if not path.is_file():
        return module
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level and \
                any((alias.asname or alias.name) == name for alias in node.names):
            return _defined_in(root, node.module, name, hops - 1)
    return module


def long_files(root: Path, trees: tuple[str, ...] = ("pipeline", "train"), limit: int = 450) -> list[str]:
    return [f"{p.relative_to(root)} ({n} lines)" for p in python_files(root, trees)
            if (n := len(p.read_text().splitlines())) > limit]
