"""Write requirements-torch.lock: torch 2.13.0 and the packages it needs beside requirements.lock, every file's
sha256 as PyPI publishes it (its JSON API), plus the PyTorch CPU index's builds whose files were checked here.

Run from the repository root: `python3 tools/torch_lock.py cpu > requirements-torch-cpu.lock` (the CPU-only
build, `torch==2.13.0+cpu`) and `python3 tools/torch_lock.py pypi > requirements-torch-pypi.lock` (PyPI's files).
The pins (name, version, marker) are chosen by hand from torch's own Requires-Dist; this script only collects
hashes, so the lock never holds a file that no one chose.
"""
import json
import sys
import urllib.request

TORCH = "2.13.0"
# torch's Requires-Dist that requirements.lock does not already pin (filelock, fsspec, typing-extensions are
# there): versions pip's resolver chose against requirements.lock, per Python where Requires-Python differs.
PINS = [
    ("networkx", "3.4.2", "python_full_version < '3.11'"),
    ("networkx", "3.6.1", "python_full_version >= '3.11'"),
    ("setuptools", "84.2.1", ""),
    ("sympy", "1.14.0", ""),
    ("mpmath", "1.3.0", ""),
    ("jinja2", "3.1.6", ""),
    ("markupsafe", "3.0.4", ""),
]
# The CPU-only build on https://download.pytorch.org/whl/cpu, checked here against the file itself (its
# sha256sum); the index is unreachable from this project's machines, so only files that lie on disk are pinned.
CPU_INDEX = {
    "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl":
        "6746dbcbeb526eb61330b76b41ff1b4eb848951103a892eeb080dfa2b264667b",
}

CPU_SIZES = {"torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl": 191794682}


def _files(name: str, version: str) -> list[dict]:
    with urllib.request.urlopen(f"https://pypi.org/pypi/{name}/json", timeout=60) as answer:
        releases = json.load(answer)["releases"]
    files = releases.get(version) or []
    if not files:
        sys.exit(f"{name} {version}: PyPI lists no files")
    return sorted(files, key=lambda f: f["filename"])


def _entry(name: str, version: str, marker: str, files: list[dict], extra: dict[str, str]) -> str:
    # pip ends a continued line at a comment, so the files are named above their requirement, in hash order
    notes = [f"# {f['filename']}: {f['size']} bytes (PyPI)" for f in files]
    notes += [f"# {filename}: {CPU_SIZES[filename]} bytes (PyTorch CPU index)" for filename in extra]
    digests = [f["digests"]["sha256"] for f in files] + list(extra.values())
    head = f"{name}=={version}" + (f" ; {marker}" if marker else "")
    return "\n".join(notes + [" \\\n".join([head] + [f"    --hash=sha256:{d}" for d in digests])])


def main(source: str) -> None:
    print(f"# torch for CPU environments (make setup TORCH={source}, installed with --require-hashes --no-deps): "
          f"written by tools/torch_lock.py {source}; do not edit.")
    if source == "cpu":
        print(_entry("torch", f"{TORCH}+cpu", "", [], CPU_INDEX))
    else:
        print(_entry("torch", TORCH, "", _files("torch", TORCH), {}))
    for name, version, marker in PINS:
        print(_entry(name, version, marker, _files(name, version), {}))


if __name__ == "__main__":
    if sys.argv[1:] not in (["cpu"], ["pypi"]):
        sys.exit("usage: python3 tools/torch_lock.py cpu|pypi")
    main(sys.argv[1])
