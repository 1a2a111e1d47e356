"""Dataset manifests (manifests/datasets/<name>.yaml) read into frozen types, validated once.

    from pipeline.data.manifest import load_dataset
    ds = load_dataset("fineweb10B-gpt2", ws.registry)
    ds.file_names(train_shards=9, val_shards=1)   # ['fineweb_val_000000.bin', 'fineweb_train_000001.bin', ...]

A manifest pins where the shards come from (hub repo + revision, mirrors), their format, the
file names of each split and a lock of per-file size and sha256. `record_lock` fills empty lock
entries in place, editing only those lines so the file's comments survive.

Every file name a manifest yields (each split's names, each lock key) is checked to be one plain
file name when the manifest is loaded (pipeline/data/paths.py): nothing is opened or written yet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.atomic import write_text
from pipeline.data.paths import name_problem
from pipeline.data.shards import HEADER_BYTES
from pipeline.errors import InputError, ManifestError
from pipeline.manifest_io import Fields, check_schema_version, load_yaml
from pipeline.regular_file import read_text_bounded
from pipeline.yamlio import LIMITS, load_bytes

SCHEMA_VERSION = 1
SPLITS = ("val", "train")
MAX_SPLIT_FILES = 1_000_000  # every name of a split is checked at load time; real datasets have ~100


@dataclass(frozen=True)
class HubSource:
    repo_id: str
    repo_type: str
    revision: str


@dataclass(frozen=True, kw_only=True)
class ShardFormat:
    magic: int
    version: int
    header_ints: int
    token_dtype: str
    tokens_per_shard: int | None  # every shard but the last of a split; None = not fixed
    bos: int


@dataclass(frozen=True)
class Split:
    name: str
    pattern: str  # str.format pattern with {index}
    first: int
    count: int

    def file_name(self, index: int) -> str:
        return self.pattern.format(index=index)

    def file_names(self, count: int | None = None) -> list[str]:
        return [self.file_name(self.first + i) for i in range(self.count if count is None else count)]


@dataclass(frozen=True)
class LockedFile:
    name: str
    size: int | None
    sha256: str | None


@dataclass(frozen=True, kw_only=True)
class DatasetManifest:
    name: str
    path: Path
    description: str
    hub: HubSource | None
    mirrors: tuple[str, ...]
    format: ShardFormat
    splits: dict[str, Split]
    lock: dict[str, LockedFile] = field(default_factory=dict)

    def file_names(self, train_shards: int, val_shards: int) -> list[str]:
        """Val shards first (the trainer validates before it trains far), then train shards."""
        names = []
        for split, count in (("val", val_shards), ("train", train_shards)):
            available = self.splits[split].count
            if count > available:
                raise ManifestError(self.path, f"splits.{split}.count", f"has {available} shards, {count} asked for",
                                    f"ask for at most {available} {split} shards")
            names += self.splits[split].file_names(count)
        return names

    def split_of(self, name: str) -> Split | None:
        for split in self.splits.values():
            if name in split.file_names():
                return split
        return None

    def tokens_locked(self, name: str) -> int | None:
        """The token count the lock's size for this file gives (uint16 tokens after the header), None unlocked."""
        locked = self.lock.get(name)
        return None if locked is None or locked.size is None else (locked.size - HEADER_BYTES) // 2

    def tokens_expected(self, name: str) -> int | None:
        """The exact token count a file must hold, when the format fixes it (not the last of a split)."""
        split = self.split_of(name)
        if split is None or self.format.tokens_per_shard is None:
            return None
        return None if name == split.file_name(split.first + split.count - 1) else self.format.tokens_per_shard


def dataset_path(name: str, registry: Path) -> Path:
    """registry/datasets/<name>.yaml, for a dataset name that is one plain file name."""
    problem = name_problem(f"{name}.yaml")
    if problem is not None or not isinstance(name, str) or name.startswith("."):
        raise InputError(f"dataset name {str(name)[:80]!r} {problem or 'is not a plain name'}",
                         "give a dataset name from the registry's datasets/ folder (one name, no '/' or '..')")
    return Path(registry) / "datasets" / f"{name}.yaml"


def load_dataset(name_or_path: str | Path, registry: Path | None = None) -> DatasetManifest:
    """A dataset by name from `registry` (Workspace.registry), or a manifest file given by its path."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        if registry is None:
            raise InputError(f"no registry to look dataset {name_or_path!r} up in",
                             "pass the workspace's registry (repro --registry DIR)")
        path = dataset_path(str(name_or_path), registry)
    if not path.is_file():
        known = sorted(p.stem for p in path.parent.glob("*.yaml")) if path.parent.is_dir() else []
        raise ManifestError(path, "", "no such dataset manifest",
                            f"use one of: {', '.join(known) or '(none found)'}, or write {path.name}")
    return parse_dataset(load_yaml(path), path)


def parse_dataset(data: dict, path: Path) -> DatasetManifest:
    top = Fields(data, path)
    top.only("schema_version", "name", "description", "source", "format", "splits", "lock")
    check_schema_version(top, SCHEMA_VERSION)
    name = top.req("name", str)
    if name != path.stem:
        raise top.fail("name", f"is {name!r} but the file is {path.name}", f"name the file {name}.yaml or fix `name:`")
    # sections in file order, so a manifest with several mistakes is told about the first one first
    hub, mirrors = _source(top.sub("source"))
    shard_format = _shard_format(top.sub("format"))
    splits = _splits(top.sub("splits"))
    lock = _lock(top)
    return DatasetManifest(name=name, path=path, description=top.opt("description", str, ""), hub=hub, mirrors=mirrors,
                           format=shard_format, splits=splits, lock=lock)


def _source(source: Fields) -> tuple[HubSource | None, tuple[str, ...]]:
    """Where the files come from: a pinned hub revision and/or mirror URL templates."""
    source.only("hub", "mirrors")
    hub = None
    if source.opt("hub", dict) is not None:
        h = source.sub("hub")
        h.only("repo_id", "repo_type", "revision")
        repo_type = h.opt("repo_type", str, "dataset")
        if repo_type not in ("dataset", "model"):
            raise h.fail("repo_type", f"is {repo_type!r}", "write `repo_type: dataset` (or model)")
        hub = HubSource(h.req("repo_id", str), repo_type, h.req("revision", str, "pin a commit: `revision: <40 hex>`"))
    mirrors = source.list_of("mirrors", str, required=False)
    for i, template in enumerate(mirrors):
        if "{filename}" not in template or not template.startswith(("http://", "https://")):
            raise source.fail(f"mirrors[{i}]", f"is not an http(s) URL template with {{filename}}: {template!r}",
                              "write e.g. https://host/path/{filename}")
    return hub, mirrors


def _shard_format(fmt: Fields) -> ShardFormat:
    fmt.only("magic", "version", "header_ints", "token_dtype", "tokens_per_shard", "bos")
    shard_format = ShardFormat(magic=fmt.req("magic", int), version=fmt.req("version", int),
                               header_ints=fmt.req("header_ints", int),
                               token_dtype=fmt.req("token_dtype", str),
                               tokens_per_shard=fmt.opt("tokens_per_shard", int), bos=fmt.req("bos", int))
    if (shard_format.header_ints, shard_format.token_dtype) != (256, "uint16"):
        raise fmt.fail("header_ints", "this tool reads 256-int32 headers with uint16 tokens only",
                       "write `header_ints: 256` and `token_dtype: uint16`")
    return shard_format


def _splits(splits_fields: Fields) -> dict[str, Split]:
    splits_fields.only(*SPLITS)
    return {split_name: _split(splits_fields.sub(split_name), split_name) for split_name in SPLITS}


def _split(s: Fields, split_name: str) -> Split:
    """One split's file name pattern and index range; every name it formats to must be a plain file name."""
    s.only("pattern", "first", "count")
    pattern = s.req("pattern", str)
    try:
        example = pattern.format(index=0)
    except (KeyError, IndexError, ValueError):
        example = ""
    if "{index" not in pattern or not example:
        raise s.fail("pattern", f"is not a file name pattern with {{index}}: {pattern!r}",
                     'write e.g. "fineweb_train_{index:06d}.bin"')
    split = Split(split_name, pattern, s.req("first", int), s.req("count", int))
    if split.first < 0 or not 0 <= split.count <= MAX_SPLIT_FILES:
        raise s.fail("count", f"first {split.first}, count {split.count}: need first >= 0 and "
                              f"0 <= count <= {MAX_SPLIT_FILES}", "write the split's real first index and count")
    for file_name in split.file_names():  # every name, not one example: "{index:c}" is '/' at index 47
        problem = name_problem(file_name)
        if problem is not None:
            raise s.fail("pattern", f"formats to {file_name[:80]!r}, which {problem}",
                         'write a pattern that yields plain file names, e.g. "fineweb_train_{index:06d}.bin"')
    return split


def _lock(top: Fields) -> dict[str, LockedFile]:
    """The lock's entries by file name; a name that is not a plain file name is refused before it is read."""
    lock = {}
    lock_data = top.opt("lock", dict, {})
    for file_name in lock_data:
        problem = name_problem(file_name)
        if problem is not None:
            raise top.fail(f"lock.{str(file_name)[:80]}", f"is not a plain file name: it {problem}",
                           "lock only the dataset's own files, by their plain names")
        entry = top.sub("lock").sub(file_name)
        entry.only("size", "sha256")
        size = entry.opt("size", int)
        if size is not None and size < HEADER_BYTES:  # downloads stop at this size: it must be a real one
            raise entry.fail("size", f"is {size}, smaller than a shard header ({HEADER_BYTES} bytes)",
                             "write the file's size in bytes as `ls -l` shows it, or leave it empty")
        lock[file_name] = LockedFile(file_name, size, entry.sha256("sha256", required=False))
    return lock


_LOCK_LINE = re.compile(r"^(?P<indent>[ \t]+)(?P<name>[^\s:#]+):\s*\{[^}]*\}\s*(?P<comment>#.*)?$")


def _yaml_scalar(value: str) -> str:
    """A hash as a plain scalar when YAML reads it back as a string, quoted otherwise (e.g. all digits)."""
    return value if isinstance(load_bytes(value, "a hash", "value"), str) else f'"{value}"'


def record_lock(manifest: DatasetManifest, entries: dict[str, tuple[int, str]]) -> list[str]:
    """Fill empty lock entries (size, sha256) in the manifest file; returns the names it recorded.

    A value already in the lock is never overwritten: a different one is an error the caller reports.
    """
    text = read_text_bounded(manifest.path, LIMITS["manifest"], "dataset manifest", "restore it from the registry"
                     ).splitlines(keepends=True)
    in_lock, recorded, seen = False, [], set()
    for i, line in enumerate(text):
        if re.match(r"^lock:\s*(#.*)?$", line):
            in_lock = True
            continue
        if in_lock and line.strip() and not line[0].isspace() and not line.startswith("#"):
            in_lock = False
        match = _LOCK_LINE.match(line.rstrip("\n")) if in_lock else None
        if not match or match["name"] not in entries:
            continue
        name = match["name"]
        seen.add(name)
        size, sha256 = entries[name]
        old = manifest.lock.get(name)
        if old is not None and old.sha256 and old.size is not None:
            continue
        comment = f"  {match['comment']}" if match["comment"] else ""
        text[i] = f"{match['indent']}{name}: {{size: {size}, sha256: {_yaml_scalar(sha256)}}}{comment}\n"
        recorded.append(name)
    missing = sorted(set(entries) - seen)
    if missing:
        raise ManifestError(manifest.path, f"lock.{missing[0]}", "has no line to record its hash in",
                            f"add `  {missing[0]}: {{size: , sha256: }}` under `lock:` and run again")
    write_text(manifest.path, "".join(text))
    return recorded
