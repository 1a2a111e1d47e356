"""The one YAML reader: every YAML file the tool reads (manifests, locks, run.yaml, bundle members) comes here.

    from pipeline.yamlio import load_file, load_bytes, require_mapping
    doc = require_mapping(load_file(path, "run"), path, "run.yaml")
    doc = load_bytes(member_bytes, "bundle member manifest.yaml", "bundle_member")

YAML as written by hand or by someone handing a user a file is untrusted input, so this loader is
stricter than yaml.safe_load:
- anchors and aliases are refused: alias expansion ("billion laughs") turns a few hundred bytes
  into gigabytes of objects; no file this tool reads needs them;
- duplicate keys are refused (safe_load silently keeps the last one, so a typo can hide a value);
- each kind of file has a size limit, checked before parsing, and the error names the limit;
- nesting deeper than the parser's recursion can follow is reported, not a RecursionError.
Every error is an InputError naming the file and the line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, ScalarNode
from yaml.resolver import Resolver

from pipeline.errors import InputError, os_error

MiB = 1 << 20
# Largest file of each kind the tool will parse. Real ones are far smaller (a record manifest is
# ~10 KB, the fineweb data lock ~25 KB, an environment lock ~60 KB, a run.yaml ~3 KB).
LIMITS = {
    "manifest": 1 * MiB,  # records/, datasets/, environments/
    "lock": 8 * MiB,  # data.lock.yaml, environment locks
    "run": 1 * MiB,  # run.yaml, reproduce state
    "bundle_member": 4 * MiB,  # a YAML file inside a bundle
    "value": 64 << 10,  # a single scalar read back to check how YAML types it
}


class YamlRefused(InputError):
    """A YAML file this tool will not parse; `line` is 1-based (0 when not tied to a line)."""

    def __init__(self, source: str, line: int, problem: str, fix: str):
        where = f"{source}, line {line}" if line else source
        super().__init__(f"{where}: {problem}", fix)
        self.source, self.line, self.problem = source, line, problem


class _NoDuplicateKeys:
    """Duplicate keys refused, in the constructor (Python in every loader below)."""

    source = "<yaml>"

    def construct_mapping(self, node, deep=False):
        if isinstance(node, MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, ScalarNode):
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise YamlRefused(self.source, line, f"duplicate key {key!r} (first at line {seen[key]})",
                                      "keep one of the two entries: YAML would silently use the last")
                seen[key] = line
        return super().construct_mapping(node, deep)


class _StrictRules(_NoDuplicateKeys):
    """Anchors and aliases refused too, in the composer (Python in the two loaders that use this)."""

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            kind = "an alias (*" if isinstance(event, yaml.AliasEvent) else "an anchor (&"
            raise YamlRefused(self.source, event.start_mark.line + 1,
                              f"{kind}{event.anchor}): anchors and aliases are not accepted",
                              "write the value out in full (aliases can expand into gigabytes: 'billion laughs')")
        return super().compose_node(parent, index)


class _StrictLoader(_StrictRules, yaml.SafeLoader):
    """The pure-Python loader: the reference, and the one whose error messages are reported."""


# libyaml's scanner and parser (the slow part of a load, ~10x faster in C) under the same Python composer and
# constructor, so the same rules hold and the same objects come out. Its error texts differ from the pure
# parser's, so a document it refuses is parsed again by _StrictLoader, whose error is the one reported.
try:
    from yaml.cyaml import CParser as _CParser
except ImportError:  # PyYAML built without libyaml
    _CParser = None
if _CParser is not None:
    class _FastLoader(_StrictRules, Composer, _CParser, SafeConstructor, Resolver):
        def __init__(self, stream):
            _CParser.__init__(self, stream)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            Composer.__init__(self)

    class _CLoader(_NoDuplicateKeys, yaml.cyaml.CSafeLoader):
        """libyaml's composer too, for a text with no '&' and no '*': then it can hold no anchor or alias."""
else:
    _FastLoader = _CLoader = _StrictLoader

# The same holds for writing: libyaml's emitter where PyYAML has it (the bytes are the pure emitter's for what
# this tool dumps: tests/test_yaml_speed.py compares them on every committed manifest).
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def dump(data: Any, **options: Any) -> str:
    """yaml.safe_dump's text, through libyaml's emitter when PyYAML has it. The two differ only where libyaml
    escapes a character the pure emitter writes as it is (one outside the BMP, such as an emoji; NEL): libyaml's
    text then holds a backslash, and the pure emitter writes the text instead."""
    text = yaml.dump(data, Dumper=_Dumper, **options)
    return text if "\\" not in text or _Dumper is yaml.SafeDumper else yaml.safe_dump(data, **options)


def load_bytes(data: bytes | str, source: str, kind: str = "manifest") -> Any:
    """Parse one YAML document held in memory; `source` names it in errors (a path or a bundle member)."""
    limit = LIMITS[kind]
    size = len(data)
    if size > limit:
        raise YamlRefused(source, 0, f"is {size:,} bytes, over the {limit:,}-byte limit for a {kind.replace('_', ' ')}",
                          "this is not a file the tool wrote; check where it came from")
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise YamlRefused(source, 0, f"is not UTF-8 text (byte {exc.start})", "save the file as UTF-8") from None
    if _FastLoader is not _StrictLoader:
        try:
            return _parse(_FastLoader if "&" in data or "*" in data else _CLoader, data, source)
        except (yaml.YAMLError, RecursionError, ValueError):
            pass  # refused by libyaml: the pure parser says why below, in the words this tool has always used
    try:
        return _parse(_StrictLoader, data, source)
    except YamlRefused:
        raise
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        where = f" at column {mark.column + 1}" if mark else ""
        raise YamlRefused(source, mark.line + 1 if mark else 0, f"not valid YAML{where}: {problem}",
                          "fix the YAML syntax (indentation, quotes, colons) at that line") from None
    except RecursionError:
        raise YamlRefused(source, 0, "is nested too deeply to parse",
                          "this is not a file the tool wrote; check where it came from") from None
    except ValueError as exc:  # a scalar its type cannot hold: an integer of 5,000 digits, a 13th month
        why = "an integer of more than 4,300 digits" if "4300 digits" in str(exc) else str(exc)[:120]
        raise YamlRefused(source, 0, f"has a value that cannot be read ({why})",
                          "this is not a file the tool wrote; check where it came from") from None


def _parse(loader_class: type, data: str, source: str) -> Any:
    loader = loader_class(data)
    loader.source = source
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def load_file(path: Path, kind: str = "manifest") -> Any:
    """Parse a YAML file, reading no more than its kind's limit (+1 byte, to tell that it is over)."""
    from pipeline.regular_file import open_regular

    path = Path(path)
    try:
        with open_regular(path, kind, f"check that {path} exists") as f:
            data = f.read(LIMITS[kind] + 1)
    except OSError as exc:
        raise os_error(path, exc, f"check that {path} exists") from None
    return load_bytes(data, str(path), kind)


def require_mapping(data: Any, source: str | Path, what: str = "file") -> dict:
    """The top level of a document must be a mapping (a run.yaml that is a list is not a run.yaml)."""
    if not isinstance(data, dict):
        found = "empty" if data is None else f"a {type(data).__name__}"
        raise InputError(f"{source}: the top level of this {what} must be a mapping of fields, but it is {found}",
                         f"check that {source} is the {what} it claims to be")
    return data


def load_mapping(path: Path, kind: str = "manifest", what: str = "file") -> dict:
    return require_mapping(load_file(path, kind), path, what)
