"""A re-import where nothing changed reads and hashes, and stops there.

    key = import_key(ImportInputs(clone=..., records_dir=..., environments_dir=..., track=1, commit=None, ...))
    result = recall(ws.cache / "import-memo", key)          # the ImportResult of that very import, or None
    remember(ws.cache / "import-memo", key, result)          # only for an import that wrote nothing

An import (pipeline/records/importer.py) is a function of what it reads: the clone's top-level files and every
file under its records/, the registry's manifests, environments and datasets, its arguments, today's date
(a nightly's availability) and the tool's own code. The key hashes all of them, the files by content, so an import whose
inputs hash the same as an earlier one that wrote nothing would write nothing again and say the same: its result
is replayed. Anything that differs (a log, a manifest edited by hand, a new version of the tool) is a new key,
and the import runs. A memo that is unreadable or malformed is ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass, fields
from datetime import date
from pathlib import Path

from pipeline.hashing import HASH_BUFFER, sha256_file
from pipeline.records.import_result import ImportResult, upstream_commit

MAX_MEMO_BYTES = 16 << 20  # an import's result (names, warnings) is ~100 KB for the whole history
READ_SUFFIXES = (".txt", ".log", ".md")  # what the importer reads in a record's folder: logs and the README
PACKAGE = Path(__file__).resolve().parents[1]  # pipeline/: the tool's code is an input too


@dataclass(frozen=True, kw_only=True)
class ImportInputs:
    clone: Path
    records_dir: Path
    environments_dir: Path
    track: int
    commit: str | None
    repository: str
    dry_run: bool
    shard_tokens: int | None = None  # the dataset's shard size: dataset.derived counts shards of it
    datasets_dir: Path | None = None  # the registry's dataset manifests, where the shard size is read (as files)


def _tree(digest, root: Path, label: str, recursive: bool, suffix: str = "") -> None:
    """Every entry under `root` (whose name ends with `suffix`) into `digest`: a regular file by its sha256, a link
    by its target, the rest by kind (never opened: a FIFO must not block the key)."""
    if not root.is_dir():
        digest.update(f"{label}: absent\n".encode())
        return
    walk = os.walk(root) if recursive else [(str(root), [], [e.name for e in os.scandir(root)])]
    prefix = os.path.join(str(root), "")
    for folder, dirs, files in walk:
        dirs.sort()
        for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]):
            if not name.endswith(suffix):
                continue
            path = os.path.join(folder, name)
            rel = path[len(prefix):]  # os.path.relpath's answer (os.walk's paths all start with the prefix)
            st = os.lstat(path)
            mode = st.st_mode
            if stat.S_ISLNK(mode):
                what = "link " + os.readlink(path)
            elif stat.S_ISREG(mode) and (label != "records" or name.endswith(READ_SUFFIXES)):
                # a buffer the file's size, not sha256_file's 1 MiB: zeroing 1 MiB per small file cost a third
                # of the key's time (a file that grew since is still read whole, in more reads)
                what = "file " + sha256_file(Path(path), buffer_bytes=max(1, min(HASH_BUFFER, st.st_size + 1)))
            elif stat.S_ISREG(mode):  # a folder's other files (programs, images): listed, and any edit moves mtime
                what = f"file of {st.st_size} bytes at {st.st_mtime_ns}"
            elif stat.S_ISDIR(mode):
                continue
            else:
                what = f"other {stat.S_IFMT(mode)}"
            digest.update(f"{label}/{rel}\0{what}\n".encode())


def import_key(inputs: ImportInputs) -> str:
    """The digest of everything the import reads; raises what the import would (a clone that is not one)."""
    commit = upstream_commit(inputs.clone, inputs.commit)  # the clone's HEAD is an input too
    digest = hashlib.sha256(json.dumps({
        "track": inputs.track, "commit": commit, "repository": inputs.repository, "dry_run": inputs.dry_run,
        "shard_tokens": inputs.shard_tokens, "today": date.today().isoformat()}).encode())
    _tree(digest, inputs.clone, "clone", recursive=False)
    _tree(digest, inputs.clone / "records", "records", recursive=True)
    _tree(digest, inputs.records_dir, "registry/records", recursive=False)
    _tree(digest, inputs.environments_dir, "registry/environments", recursive=False)
    if inputs.datasets_dir is not None:
        _tree(digest, inputs.datasets_dir, "registry/datasets", recursive=False)
    _tree(digest, PACKAGE, "tool", recursive=True, suffix=".py")  # the sources, not their __pycache__
    return digest.hexdigest()


def recall(folder: Path, key: str) -> ImportResult | None:
    from pipeline.errors import ReproError
    from pipeline.regular_file import read_bounded

    try:  # absent, too large, not a file: no memo (read_bounded never blocks on a FIFO)
        doc = json.loads(read_bounded(Path(folder) / f"{key}.json", MAX_MEMO_BYTES, "import memo", ""))
    except (ReproError, ValueError):
        return None
    names = {f.name for f in fields(ImportResult)}
    if not isinstance(doc, dict) or set(doc) != names or not _well_formed(doc):
        return None
    return ImportResult(**doc)


def _well_formed(doc: dict) -> bool:
    strings = all(isinstance(doc[k], list) and all(isinstance(v, str) for v in doc[k])
                  for k in ("written", "unchanged", "warnings", "skipped_rows"))
    maps = all(isinstance(doc[k], dict) and all(isinstance(v, list) and all(isinstance(x, str) for x in v)
                                                 for v in doc[k].values()) for k in ("changes", "flags"))
    return strings and maps and isinstance(doc["commit"], str) and type(doc["track"]) is int and not doc["written"]


def remember(folder: Path, key: str, result: ImportResult) -> None:
    """Keep the result of an import that wrote nothing (one that wrote changed its own inputs: a new key)."""
    if result.written:
        return
    from pipeline.atomic import write_json
    from pipeline.errors import ReproError

    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
        for old in Path(folder).glob("*.json"):  # one registry's steady state is what is worth keeping
            old.unlink(missing_ok=True)
        write_json(Path(folder) / f"{key}.json", result.to_dict())
    except (OSError, ReproError, ValueError):
        pass  # a memo that cannot be written costs time, never a result
