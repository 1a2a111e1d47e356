"""File names that come from manifests and locks, checked before any path is built from them.

    from pipeline.data.paths import check_file_name, file_in
    name = check_file_name(key, "lock key in toy.yaml", "name the file as it is in the dataset")
    final = file_in(data_dir, name)      # data_dir / name, proven to stay inside data_dir

A dataset manifest's split pattern, its lock keys and a data folder's data.lock.yaml all name files
that the tool then opens or writes under a data folder. A name such as `../../evil.bin`, `/etc/x`
or a pattern that formats to `a/b` must never leave that folder, so every such name is one plain
path component and every joined path is checked lexically to sit directly inside its folder.
"""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.errors import InputError

NAME_MAX = 255  # bytes, the limit of common Linux file systems


def name_problem(name: object) -> str | None:
    """Why `name` is not a plain file name, or None when it is one."""
    if not isinstance(name, str) or not name:
        return "is empty or not a string"
    if "/" in name or "\\" in name:
        return "contains a path separator"
    if name in (".", "..") or name.startswith(".."):
        return "refers to a parent or the current folder"
    if "\x00" in name or any(ord(c) < 32 for c in name):
        return "contains control characters"
    if len(name.encode("utf-8", "surrogateescape")) > NAME_MAX:
        return f"is longer than {NAME_MAX} bytes"
    if name.startswith("."):
        return "is hidden (starts with '.'), where the tool keeps its own staging"
    return None


def check_file_name(name: object, where: str, fix: str) -> str:
    problem = name_problem(name)
    if problem is not None:
        raise InputError(f"{where}: file name {str(name)[:80]!r} {problem}: it must be one plain file name",
                         fix)
    return name


def file_in(folder: Path, name: str, where: str = "file name") -> Path:
    """folder / name, after proving that name is a plain name and the joined path stays directly inside."""
    check_file_name(name, where, "use a plain file name such as fineweb_train_000001.bin")
    folder = Path(folder)
    path = folder / name
    if Path(os.path.normpath(path)).parent != Path(os.path.normpath(folder)):
        raise InputError(f"{where}: {name!r} resolves outside {folder}", "use a plain file name")
    return path
