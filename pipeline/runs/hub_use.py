"""How a record's program reaches the Hugging Face kernels hub, read from its syntax tree (never run).

    use = hub_use(program_bytes)
    use.imports      # True: the program imports `kernels` (import, from-import or importlib): the stand-in is put first
    use.repositories # the repositories its get_kernel calls name, each a literal
    use.refusals     # what repro cannot vouch for, each naming the call and its line

Every way the tree can name the hub is looked at: `import kernels [as k]`, `from kernels import get_kernel
[as gk]`, `importlib.import_module("kernels")` and `__import__("kernels")` (with what they are assigned to), and
every call of a `get_kernel` attribute or alias. A call whose repository is not a literal string, a use of
`get_kernel` other than a direct call, an import whose module name is computed, or a star import from
`kernels` cannot be told from here, so the program is refused with what it does rather than run with a guess.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from pipeline.records.identity import parse_program
from pipeline.records.program_files import split_program

HUB = "kernels"
_IMPORTERS = ("import_module", "__import__")


@dataclass
class HubUse:
    imports: bool = False
    repositories: list[str] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)


def _callee_name(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _imported_module(node: ast.Call) -> str | None:
    """The module an import_module / __import__ call names: its literal, "?" when computed, None if no such call."""
    if _callee_name(node.func) not in _IMPORTERS:
        return None
    arg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "name"), None)
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else "?"


class _Reader(ast.NodeVisitor):
    def __init__(self, where: str):
        self.where, self.use = where, HubUse()
        self.modules: set[str] = set()  # names bound to the kernels module
        self.getters: set[str] = {"get_kernel"}  # names bound to get_kernel
        self.called: set[int] = set()  # ids of the nodes that are a get_kernel call's callee

    def refuse(self, node: ast.AST, what: str) -> None:
        self.use.refusals.append(f"{self.where} line {getattr(node, 'lineno', '?')}: {what}")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] == HUB:
                self.use.imports = True
                self.modules.add((alias.asname or alias.name).split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or (node.module or "").split(".")[0] != HUB:
            return
        self.use.imports = True
        for alias in node.names:
            if alias.name == "*":
                self.refuse(node, "`from kernels import *` (which names it uses cannot be read)")
            elif alias.name == "get_kernel":
                self.getters.add(alias.asname or alias.name)

    def visit_Assign(self, node: ast.Assign) -> None:
        value = node.value
        if isinstance(value, ast.Call) and (_imported_module(value) or "").split(".")[0] == HUB:
            self.modules.update(t.id for t in node.targets if isinstance(t, ast.Name))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        module = _imported_module(node)
        if module == "?":
            self.refuse(node, f"{_callee_name(node.func)}() of a module name that is not a literal string "
                              "(it could be the kernels hub)")
        elif module is not None and module.split(".")[0] == HUB:
            self.use.imports = True
        func = node.func
        if (isinstance(func, ast.Attribute) and func.attr == "get_kernel") or \
                (isinstance(func, ast.Name) and func.id in self.getters):
            self.called.add(id(func))
            arg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "repo_id"), None)
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                self.use.repositories.append(arg.value)
            else:
                self.refuse(node, "get_kernel() with a repository that is not a literal string")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr == "get_kernel" and id(node) not in self.called:
            self.refuse(node, "get_kernel used other than by calling it (an alias or a reference)")
        elif isinstance(node.value, ast.Name) and node.value.id in self.modules and node.attr != "get_kernel":
            self.refuse(node, f"kernels.{node.attr} (repro's stand-in serves get_kernel only)")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.getters and id(node) not in self.called and isinstance(node.ctx, ast.Load):
            self.refuse(node, f"{node.id} (get_kernel) used other than by calling it (an alias or a reference)")


def _module_refs(reader: _Reader, tree: ast.AST) -> None:
    """A kernels module name used other than as `name.get_kernel` (getattr(k, ...), passed along...)."""
    parents = {id(child): parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in reader.modules and isinstance(node.ctx, ast.Load) \
                and not isinstance(parents.get(id(node)), ast.Attribute):
            reader.refuse(node, f"the kernels module {node.id!r} used other than as {node.id}.get_kernel(...)")


def hub_use(program: bytes) -> HubUse:
    """What every file of the program does with the kernels hub."""
    use = HubUse()
    for file in split_program(program):
        try:
            tree = parse_program(file.text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # a program that does not parse is refused where it is parsed for the run
        reader = _Reader(file.name)
        reader.visit(tree)
        _module_refs(reader, tree)
        use.imports |= reader.use.imports
        use.repositories += reader.use.repositories
        use.refusals += reader.use.refusals
    use.repositories = sorted(set(use.repositories))
    return use
