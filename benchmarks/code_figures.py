"""The code's figures (issues 28 and 40): functions over 60 lines, functions with more than 5 arguments,
`duplicates` pairs, lines per package, and the shape figures of tests/code_shape.py (dataclasses, wide ones not
keyword-only, positional constructions of them, files over 450 lines, import circles), so that a new type is
counted, not rewarded. Run from the repository root:

    python benchmarks/code_figures.py [--json]

Functions are counted in every tracked .py file under pipeline/, train/, tests/ and benchmarks/;
lines per package count every line of the package's .py files.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import subprocess
from pathlib import Path

LONG_FUNCTION = 60
MANY_ARGUMENTS = 5
TREES = ("pipeline", "train", "tests", "benchmarks")


def tracked_python_files(root: Path) -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "*.py"], cwd=root, capture_output=True, text=True, check=True)
    return [root / name for name in listed.stdout.split() if name.split("/")[0] in TREES]


def argument_count(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    args = node.args
    names = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    count = sum(1 for a in names if a.arg not in ("self", "cls"))
    return count + (args.vararg is not None) + (args.kwarg is not None)


def function_figures(files: list[Path], root: Path) -> dict:
    long, many = [], []
    for path in files:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            where = f"{path.relative_to(root)}:{node.lineno} {node.name}"
            if node.end_lineno - node.lineno + 1 > LONG_FUNCTION:
                long.append(where)
            if argument_count(node) > MANY_ARGUMENTS:
                many.append(where)
    return {"long": long, "many_arguments": many}


def lines_per_package(files: list[Path], root: Path) -> dict[str, int]:
    lines: dict[str, int] = {}
    for path in files:
        parts = path.relative_to(root).parts
        package = "/".join(parts[:2]) if parts[0] == "pipeline" and len(parts) > 2 else parts[0]
        lines[package] = lines.get(package, 0) + len(path.read_text().splitlines())
    return dict(sorted(lines.items()))


def duplicate_pairs(root: Path) -> int | None:
    if shutil.which("duplicates") is None:
        return None
    found = subprocess.run(["duplicates", "--seconds", "120"], cwd=root, capture_output=True, text=True)
    first = found.stdout.splitlines()[0] if found.stdout else ""
    if first.startswith("no duplicates"):
        return 0
    number = re.match(r"\D*(\d+)", first)
    return int(number.group(1)) if number else None


def shape_figures(root: Path) -> dict:
    import sys

    sys.path.insert(0, str(root))  # run as `python benchmarks/code_figures.py` from the root: tests/ is beside it
    from tests.code_shape import (
        circles,
        dataclass_count,
        import_graph,
        long_files,
        positional_constructions,
        wide_dataclasses,
    )

    return {"dataclasses": dataclass_count(root),
            "wide_not_keyword_only": sum(not c.keyword_only for c in wide_dataclasses(root)),
            "positional_constructions": len(positional_constructions(root)),
            "long_files": len(long_files(root)),
            "import_circles": len(circles(import_graph(root, ("pipeline", "train", "benchmarks", "tests"))))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--list", action="store_true", help="name each long or many-argument function")
    options = parser.parse_args()
    root = Path.cwd()
    files = tracked_python_files(root)
    pipeline_files = [p for p in files if p.relative_to(root).parts[0] == "pipeline"]
    figures = {
        "all": {k: len(v) for k, v in function_figures(files, root).items()},
        "pipeline": {k: len(v) for k, v in function_figures(pipeline_files, root).items()},
        "duplicate_pairs": duplicate_pairs(root),
        "lines_per_package": lines_per_package(files, root),
        **shape_figures(root),
    }
    if options.json:
        print(json.dumps(figures, indent=1))
        return
    for scope in ("all", "pipeline"):
        f = figures[scope]
        print(f"{scope}: functions over {LONG_FUNCTION} lines {f['long']}, "
              f"with more than {MANY_ARGUMENTS} arguments {f['many_arguments']}")
    print(f"duplicates pairs: {figures['duplicate_pairs']}")
    print(f"pipeline dataclasses {figures['dataclasses']}; of 5+ fields not keyword-only "
          f"{figures['wide_not_keyword_only']}; positional constructions of them "
          f"{figures['positional_constructions']}; "
          f"files over 450 lines {figures['long_files']}; import circles {figures['import_circles']}")
    for package, count in figures["lines_per_package"].items():
        print(f"  {package:24s} {count:6d}")
    if options.list:
        for kind, where in function_figures(pipeline_files, root).items():
            print(kind, *where, sep="\n  ")


if __name__ == "__main__":
    main()
