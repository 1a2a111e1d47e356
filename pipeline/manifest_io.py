"""Reading YAML manifests into frozen types: validated once, at the edge.

`Fields` walks a parsed mapping and hands out typed values; the first wrong field raises a
ManifestError naming the file, the dotted field path and the fix. Unknown keys are errors too
(a typo must not be silently ignored), so every manifest type lists what it reads.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipeline.errors import ManifestError
from pipeline.yamlio import YamlRefused, load_file

SHA256_RE = re.compile(r"^[0-9a-f]{64}$")  # a sha256 as manifests and locks pin it; data/fetch.py reads ETags by it
_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
               list: "a list", dict: "a mapping"}


def load_yaml(path: Path, kind: str = "manifest", schema_version: int = 1) -> Mapping[str, Any]:
    """Parse one YAML file (pipeline/yamlio.py: no aliases, no duplicate keys, size-limited) whose top
    level must be a mapping. `kind` picks the size limit: "manifest", "lock", "run" or "bundle_member";
    `schema_version`, the version this file is written at, names the fix when the top level is no mapping."""
    path = Path(path)
    if not path.exists():  # a folder or a FIFO under the name is refused by load_file, naming what it is
        raise ManifestError(path, "", "file not found", "check the name; list what exists with `repro records list`"
                            if kind == "manifest" else "check the path")
    try:
        data = load_file(path, kind)
    except YamlRefused as exc:
        where = f"line {exc.line}: " if exc.line else ""
        raise ManifestError(path, "", f"{where}{exc.problem}", exc.fix) from None
    if not isinstance(data, dict):
        raise ManifestError(path, "", "the top level must be a mapping of fields",
                            f"start the file with `schema_version: {schema_version}` and its fields")
    return data


class Fields:
    """Typed access to one mapping inside a manifest, remembering where it came from."""

    def __init__(self, data: Mapping[str, Any], path: Path, prefix: str = ""):
        self.data, self.path, self.prefix = data, Path(path), prefix

    def name(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def fail(self, key: str, problem: str, fix: str) -> ManifestError:
        return ManifestError(self.path, self.name(key), problem, fix)

    def _typed(self, key: str, value: Any, kind: type, fix: str | None) -> Any:
        ok = isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool))
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if not ok:
            raise self.fail(key, f"must be {_TYPE_NAMES.get(kind, kind.__name__)}, got {value!r}",
                            fix or f"write {self.name(key)} as {_TYPE_NAMES.get(kind, kind.__name__)}")
        return value

    def req(self, key: str, kind: type, fix: str | None = None) -> Any:
        if key not in self.data or self.data[key] is None:
            raise self.fail(key, "is missing", fix or f"add `{key}:` to {self.prefix or 'the top level'}")
        return self._typed(key, self.data[key], kind, fix)

    def opt(self, key: str, kind: type, default: Any = None) -> Any:
        if self.data.get(key) is None:
            return default
        return self._typed(key, self.data[key], kind, None)

    def sha256(self, key: str, required: bool = True) -> str | None:
        value = self.req(key, str) if required else self.opt(key, str, "")
        if value and not SHA256_RE.match(value):
            raise self.fail(key, f"is not a sha256 (64 lowercase hex digits): {value!r}",
                            "copy the full hash printed by `sha256sum`")
        return value or None

    def sub(self, key: str, required: bool = True) -> Fields:
        value = self.req(key, dict) if required else self.opt(key, dict, {})
        return Fields(value, self.path, f"{self.name(key)}.")

    def list_of(self, key: str, kind: type, required: bool = True) -> tuple:
        values = self.req(key, list) if required else self.opt(key, list, [])
        return tuple(self._typed(f"{key}[{i}]", v, kind, None) for i, v in enumerate(values))

    def items(self, key: str, required: bool = True) -> list[Fields]:
        values = self.req(key, list) if required else self.opt(key, list, [])
        out = []
        for i, v in enumerate(values):
            if not isinstance(v, dict):
                raise self.fail(f"{key}[{i}]", f"must be a mapping, got {v!r}", "write each entry as `- field: value`")
            out.append(Fields(v, self.path, f"{self.name(key)}[{i}]."))
        return out

    def only(self, *allowed: str) -> None:
        """Reject keys this manifest type does not know (typos would otherwise vanish)."""
        unknown = sorted(set(self.data) - set(allowed))
        if unknown:
            raise self.fail(unknown[0], "is not a known field",
                            f"remove it or fix its spelling; known here: {', '.join(sorted(allowed))}")


def check_schema_version(fields: Fields, supported: int, older: tuple[int, ...] = ()) -> int:
    """The file's schema version: `supported` (what this tool writes) or one of the `older` it still reads."""
    version = fields.req("schema_version", int, f"add `schema_version: {supported}`")
    if version != supported and version not in older:
        raise fields.fail("schema_version", f"is {version}, this tool reads version {supported}",
                          "upgrade the tool or rewrite the manifest for this schema version")
    return version
