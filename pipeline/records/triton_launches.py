"""The Triton kernels of a record's program and the argument types its launches pass, read from the syntax tree.

    launches = kernel_launches(program)     # one KernelLaunch per `kernel[grid](...)` of a @triton.jit kernel

A launch's types are what Triton's own launcher would see: a tensor is a pointer of its dtype (where the source
states it: `torch.empty(..., dtype=torch.float32)`, `.to(torch.bfloat16)`, `out_dtype=`; else fp32, named in
`assumed`), an int (`.stride(i)`, `.shape[i]`, `triton.cdiv`, a literal) is i32, and a Python float (a literal,
or a parameter whose default is one: `A=23.0`) is kept as "float", because who launches decides its type:
Triton's launcher and torch <= 2.10's inductor make it fp32, torch >= 2.11's inductor fp64
(`_use_fp64_for_unbacked_floats`, docs/triton-kernels.md). A constexpr needs a value the source states (a
literal at the call, in the launching function, as the parameter's default or in the first autotune config, read
by the compile from the imported kernel where its configs are built by code);
a launch whose types cannot be read is kept with `skipped` saying why, never guessed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from pipeline.records.identity import parse_program
from pipeline.records.program_files import split_program

AUTOTUNED = "<first autotune config>"  # a constexpr the compile takes from the kernel's first autotune config
FLOAT = "float"  # a Python float: fp32 or fp64 by who launches (see the module docstring)
TORCH_TO_TRITON = {"float32": "fp32", "float": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16",
                   "float64": "fp64", "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5", "int64": "i64",
                   "long": "i64", "int32": "i32", "int": "i32", "int16": "i16", "int8": "i8", "uint8": "u8",
                   "bool": "i1"}
_INT_METHODS = {"stride", "size", "numel", "dim", "element_size", "cdiv", "next_power_of_2"}
_INT_FUNCS = {"int", "len", "min", "max", "cdiv", "next_power_of_2"}
_SAME_TENSOR = {"contiguous", "view", "reshape", "flatten", "T", "mT", "t", "transpose", "detach", "unsqueeze",
                "squeeze", "expand", "clone"}
_DEPTH = 12


@dataclass(frozen=True, kw_only=True)
class KernelLaunch:
    file: str  # the program file defining the kernel
    kernel: str
    line: int  # of the launch, in the file that launches it
    signature: dict = field(default_factory=dict)  # param -> Triton type ("*bf16", "i32", "float", "constexpr")
    constexprs: dict = field(default_factory=dict)  # param -> value
    assumed: tuple[str, ...] = ()  # tensor params whose dtype the source does not state (typed *fp32)
    skipped: str | None = None  # why this launch cannot be compiled from the source alone

    @property
    def floats(self) -> tuple[str, ...]:
        return tuple(name for name, typ in self.signature.items() if typ == FLOAT)


@dataclass(frozen=True, kw_only=True)
class _Kernel:
    file: str
    params: tuple[str, ...]
    constexpr: frozenset[str]
    defaults: dict  # param -> ast default
    tuned: dict  # constexpr values of the first autotune config, where the source lists it literally
    autotuned: bool  # under @triton.autotune: its configs give the constexprs a launch leaves out


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def _first_config(decorators: list[ast.expr]) -> dict:
    for deco in decorators:
        if isinstance(deco, ast.Call) and _dotted(deco.func).endswith("autotune"):
            for kw in deco.keywords:
                if kw.arg == "configs" and isinstance(kw.value, ast.List) and kw.value.elts:
                    first = kw.value.elts[0]
                    if isinstance(first, ast.Call) and first.args and isinstance(first.args[0], ast.Dict):
                        try:
                            return {ast.literal_eval(k): ast.literal_eval(v)
                                    for k, v in zip(first.args[0].keys, first.args[0].values)}
                        except ValueError:
                            return {}
    return {}


def _kernels(tree: ast.Module, file: str) -> dict[str, _Kernel]:
    found = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        names = [_dotted(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list]
        if not any(n in ("triton.jit", "jit") for n in names):
            continue
        args = node.args.args
        defaults = dict(zip([a.arg for a in args[len(args) - len(node.args.defaults):]], node.args.defaults))
        constexpr = frozenset(a.arg for a in args
                              if a.annotation is not None and "constexpr" in ast.unparse(a.annotation))
        found[node.name] = _Kernel(file=file, params=tuple(a.arg for a in args), constexpr=constexpr, defaults=defaults,
                                   tuned=_first_config(node.decorator_list),
                                   autotuned=any("autotune" in n for n in names))
    return found


def _bindings(func: ast.FunctionDef | ast.Module, before: int) -> dict[str, ast.expr]:
    """Names bound in `func` before line `before`: parameter defaults, then assignments in source order (the
    first branch of an if wins over a later one: it is what the source states first)."""
    bound: dict[str, ast.expr] = {}
    if isinstance(func, ast.FunctionDef):
        args = func.args.args + func.args.kwonlyargs
        defaults = list(func.args.defaults) + [d for d in func.args.kw_defaults if d is not None]
        # a parameter annotated `float` or `int` is a Python number of that kind (ba_plus_cAA(A, alpha: float, ...))
        bound.update({a.arg: ast.Constant(1.0 if a.annotation.id == "float" else 1) for a in args
                      if isinstance(a.annotation, ast.Name) and a.annotation.id in ("float", "int")})
        bound.update(zip([a.arg for a in args][len(args) - len(defaults):], defaults))
    assigns = [n for n in ast.walk(func) if isinstance(n, ast.Assign) and n.lineno < before]
    for node in sorted(assigns, key=lambda n: n.lineno, reverse=True):
        for target in node.targets:
            if isinstance(target, ast.Name):
                bound[target.id] = node.value
            elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple) \
                    and len(target.elts) == len(node.value.elts):
                bound.update({t.id: v for t, v in zip(target.elts, node.value.elts) if isinstance(t, ast.Name)})
            elif isinstance(target, ast.Tuple):  # `M, K = a.shape[-2:]`: ints of a shape; else not read
                shape = "shape" in ast.unparse(node.value)
                bound.update({t.id: ast.Subscript(node.value, ast.Constant(0)) if shape else ast.Constant(...)
                              for t in target.elts if isinstance(t, ast.Name)})
    return bound


def _dtype(node: ast.expr | None) -> str | None:
    name = _dotted(node) if node is not None else ""
    return TORCH_TO_TRITON.get(name.removeprefix("torch."))


def _type(node: ast.expr, bound: dict[str, ast.expr], depth: int = 0) -> tuple[str, object]:
    """(kind, detail) of an argument expression: ("float"|"i32"|"i1", value or None), ("ptr", dtype or None),
    ("desc", None) for a TensorDescriptor, ("unknown", None)."""
    if depth > _DEPTH:
        return "ptr", None
    if isinstance(node, ast.Constant):
        value = node.value
        kind = "i1" if isinstance(value, bool) else FLOAT if isinstance(value, float) else \
            "i32" if isinstance(value, int) else "none" if value is None else "unknown"
        return kind, value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        kind, value = _type(node.operand, bound, depth + 1)
        return kind, -value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if isinstance(node, ast.Name):
        return _type(bound[node.id], bound, depth + 1) if node.id in bound else ("ptr", None)
    if isinstance(node, ast.BinOp):
        kinds = {_type(node.left, bound, depth + 1)[0], _type(node.right, bound, depth + 1)[0]}
        return (FLOAT, None) if FLOAT in kinds else ("i32", None) if kinds <= {"i32"} else ("unknown", None)
    if isinstance(node, ast.IfExp):
        return _type(node.body, bound, depth + 1)
    if isinstance(node, ast.Subscript):
        return ("i32", None) if "shape" in ast.unparse(node.value) else ("ptr", None)
    if isinstance(node, ast.Attribute):
        return _type(node.value, bound, depth + 1) if node.attr in _SAME_TENSOR else ("unknown", None)
    return _call_type(node, bound, depth) if isinstance(node, ast.Call) else ("unknown", None)


def _call_type(node: ast.Call, bound: dict[str, ast.expr], depth: int) -> tuple[str, object]:
    name = _dotted(node.func)
    last = name.rsplit(".", 1)[-1]
    if name == "float":
        return FLOAT, None
    if last in _INT_FUNCS or last in _INT_METHODS:
        return "i32", None
    if last == "from_tensor":
        return "desc", None
    stated = next((_dtype(kw.value) for kw in node.keywords if kw.arg in ("dtype", "out_dtype")), None)
    if stated:
        return "ptr", stated
    if last in ("to", "view") and node.args and _dtype(node.args[0]):
        return "ptr", _dtype(node.args[0])
    if isinstance(node.func, ast.Attribute) and last in _SAME_TENSOR | {"to", "div", "mul", "add", "sub"}:
        return _type(node.func.value, bound, depth + 1)
    return "ptr", None


def _constexpr(param: str, given: ast.expr | None, kernel: _Kernel, bound: dict[str, ast.expr]) -> tuple[bool, object]:
    """(found, value) of a constexpr: the call's argument (a literal, or a name bound to one), else the kernel's
    default, else the first autotune config."""
    for node in (given, kernel.defaults.get(param)):
        seen = 0
        while isinstance(node, ast.Name) and node.id in bound and seen < _DEPTH:
            node, seen = bound[node.id], seen + 1
        if node is not None:
            try:
                return True, ast.literal_eval(node)
            except ValueError:
                return False, ast.unparse(given if given is not None else node)
    if param in kernel.tuned:
        return True, kernel.tuned[param]
    return (True, AUTOTUNED) if kernel.autotuned else (False, "not given")


def _launch(call: ast.Call, name: str, kernel: _Kernel, bound: dict[str, ast.expr]) -> KernelLaunch:
    if any(isinstance(a, ast.Starred) for a in call.args) or any(kw.arg is None for kw in call.keywords):
        return KernelLaunch(file=kernel.file, kernel=name, line=call.lineno, skipped="launched with *args/**kwargs")
    given = dict(zip(kernel.params, call.args)) | {kw.arg: kw.value for kw in call.keywords}
    signature, constexprs, assumed = {}, {}, []
    for param in kernel.params:
        if param in kernel.constexpr:
            found, value = _constexpr(param, given.get(param), kernel, bound)
            if not found:
                return KernelLaunch(file=kernel.file, kernel=name, line=call.lineno,
                                    skipped=f"constexpr {param} is {value}, not a value the source states")
            signature[param], constexprs[param] = "constexpr", value
            continue
        if param not in given:
            return KernelLaunch(file=kernel.file, kernel=name, line=call.lineno, skipped=f"{param} is not passed")
        kind, detail = _type(given[param], bound)
        if kind in ("desc", "unknown", "none"):
            what = "a TensorDescriptor" if kind == "desc" else f"`{ast.unparse(given[param])}`"
            return KernelLaunch(file=kernel.file, kernel=name, line=call.lineno,
                                skipped=f"{param} is {what}, whose Triton type is not read from the source")
        if kind == "ptr":
            assumed += [] if detail else [param]
            signature[param] = "*" + (detail or "fp32")
        else:
            signature[param] = kind
    return KernelLaunch(file=kernel.file, kernel=name, line=call.lineno, signature=signature, constexprs=constexprs,
                        assumed=tuple(assumed))


def kernel_launches(program: bytes) -> tuple[KernelLaunch, ...]:
    """Every launch `kernel[grid](...)` of a @triton.jit kernel of any of the program's files, in file order."""
    trees, unread = [], []
    for file in split_program(program):
        try:
            trees.append((file.name, parse_program(file.text)))
        except SyntaxError as exc:  # not Python (3.12 f-strings parse: identity.parse_program): named, not guessed
            if b"triton.jit" in file.text:
                unread.append(KernelLaunch(file=file.name, kernel="*", line=exc.lineno or 0,
                                           skipped=f"{file.name} is not parsed by this Python: {exc.msg}"))
    kernels: dict[str, _Kernel] = {}
    for name, tree in trees:
        kernels.update(_kernels(tree, name))
    out = []
    for _, tree in trees:
        scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)] + [tree]
        seen: set[int] = set()
        for scope in scopes:
            for node in ast.walk(scope):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript) and id(node) not in seen \
                        and isinstance(node.func.value, ast.Name) and node.func.value.id in kernels:
                    seen.add(id(node))
                    kernel = kernels[node.func.value.id]
                    out.append(_launch(node, node.func.value.id, kernel, _bindings(scope, node.lineno)))
    return tuple(out + unread)
