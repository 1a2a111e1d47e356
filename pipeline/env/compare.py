"""What differs between two images built from the same inputs: config fields and file by file.

    repro env compare IMAGE_A IMAGE_B [--json]

An image id is the sha256 of the image's config, so it changes with anything in the config: the
build time, the build containers' ids, and the diff id of each layer (the sha256 of the layer's
uncompressed tar, which covers every file's bytes *and* mtime, mode and owner). This reads both
configs and, for layers whose diff ids differ, every tar entry of both, and sorts what it finds into
config fields, files only in one, files whose bytes differ, and files that differ only in metadata.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from dataclasses import dataclass

from pipeline.env.image import connect, content_digest

# Config fields worth comparing; anything else in inspect output is engine bookkeeping.
CONFIG_FIELDS = ("Created", "Container", "ContainerConfig.Hostname", "DockerVersion", "Config.Env", "Config.Cmd",
                 "Config.Entrypoint", "Config.WorkingDir", "Config.Labels", "Os", "Architecture")
SAMPLE = 8  # paths shown per category


@dataclass(frozen=True, kw_only=True)
class LayerDiff:
    index: int
    diff_id_a: str
    diff_id_b: str
    created_by: str
    only_in_a: tuple[str, ...]
    only_in_b: tuple[str, ...]
    content_differs: tuple[str, ...]
    metadata_differs: tuple[str, ...]  # same bytes; mtime, mode or owner differ
    metadata_fields: tuple[str, ...]  # which of mtime/mode/uid/gid/link differ among those

    @property
    def same(self) -> bool:
        return self.diff_id_a == self.diff_id_b


@dataclass(frozen=True, kw_only=True)
class ImageDiff:
    image_a: str
    image_b: str
    config_differences: tuple[tuple[str, str, str], ...]  # (field, a, b)
    history_created_differs: int  # how many history entries carry different build times
    layers: tuple[LayerDiff, ...]
    content_a: str  # env_image.content_digest of each
    content_b: str

    @property
    def identical(self) -> bool:
        return self.image_a == self.image_b

    @property
    def layers_identical(self) -> bool:
        return all(layer.same for layer in self.layers)


class _ChunkReader:
    """A file object over docker-py's chunk generator, for tarfile's stream mode."""

    def __init__(self, chunks):
        self.chunks, self.buffer = iter(chunks), b""

    def read(self, size=-1):
        while size < 0 or len(self.buffer) < size:
            try:
                self.buffer += next(self.chunks)
            except StopIteration:
                break
        if size < 0:
            size = len(self.buffer)
        out, self.buffer = self.buffer[:size], self.buffer[size:]
        return out


class _Hashing:
    def __init__(self, fh):
        self.fh, self.digest = fh, hashlib.sha256()

    def read(self, size=-1):
        data = self.fh.read(size)
        self.digest.update(data)
        return data


def _entries(layer_stream) -> dict:
    """path -> (kind, sha256 of bytes, mode, uid, gid, mtime, link target) for one layer tar."""
    out = {}
    with tarfile.open(fileobj=layer_stream, mode="r|") as layer:
        for member in layer:
            digest = ""
            if member.isfile():
                fh = layer.extractfile(member)
                digest = hashlib.sha256(fh.read()).hexdigest()
            out[member.name] = (member.type, digest, member.mode, member.uid, member.gid, int(member.mtime),
                                member.linkname)
    return out


def read_saved(client, image: str, wanted: set[str]) -> tuple[dict, list[str]]:
    """One `docker save` pass: (diff id -> entries for the wanted layers, the step that made each layer)."""
    found, steps = {}, []
    with tarfile.open(fileobj=_ChunkReader(client.get_image(image)), mode="r|") as saved:
        for member in saved:
            name = member.name
            if member.isfile() and name.endswith(".json") and "/" not in name and name != "manifest.json":
                history = json.loads(saved.extractfile(member).read()).get("history", [])
                steps = [h.get("created_by", "") for h in history if not h.get("empty_layer")]
                continue
            if not (member.isfile() and name.endswith("layer.tar")):
                continue
            hashing = _Hashing(saved.extractfile(member))
            entries = _entries(hashing)
            while hashing.read(1 << 20):  # the tar's zero padding counts towards the diff id too
                pass
            diff_id = "sha256:" + hashing.digest.hexdigest()
            if diff_id in wanted:
                found[diff_id] = entries
    return found, steps


def _field(info: dict, dotted: str):
    value = info
    for part in dotted.split("."):
        value = (value or {}).get(part)
    return value


def _diff_entries(a: dict, b: dict) -> tuple:
    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    content, metadata, fields = [], [], set()
    names = ("kind", "bytes", "mode", "uid", "gid", "mtime", "link")
    for path in sorted(set(a) & set(b)):
        if a[path] == b[path]:
            continue
        if a[path][:2] != b[path][:2]:
            content.append(path)
        else:
            metadata.append(path)
            fields.update(n for n, x, y in zip(names, a[path], b[path]) if x != y)
    return tuple(only_a), tuple(only_b), tuple(content), tuple(metadata), tuple(sorted(fields))


def compare_images(image_a: str, image_b: str, client=None) -> ImageDiff:
    client = client or connect()
    info_a, info_b = client.inspect_image(image_a), client.inspect_image(image_b)
    config = tuple((name, str(_field(info_a, name)), str(_field(info_b, name))) for name in CONFIG_FIELDS
                   if _field(info_a, name) != _field(info_b, name))
    history_a = [h for h in client.history(image_a)]
    history_b = [h for h in client.history(image_b)]
    created_differs = sum(1 for x, y in zip(history_a, history_b) if x.get("Created") != y.get("Created"))
    layers_a, layers_b = info_a["RootFS"]["Layers"], info_b["RootFS"]["Layers"]
    differing = {(x, y) for x, y in zip(layers_a, layers_b) if x != y}
    entries_a, entries_b, layer_steps = {}, {}, []
    if differing:
        entries_a, layer_steps = read_saved(client, info_a["Id"], {x for x, _ in differing})
        entries_b, _ = read_saved(client, info_b["Id"], {y for _, y in differing})
    layers = []
    for i, (x, y) in enumerate(zip(layers_a, layers_b)):
        created_by = layer_steps[i] if i < len(layer_steps) else ""
        if x == y:
            layers.append(LayerDiff(index=i, diff_id_a=x, diff_id_b=y, created_by=created_by, only_in_a=(),
                                    only_in_b=(), content_differs=(), metadata_differs=(), metadata_fields=()))
            continue
        only_a, only_b, differs, meta_differs, meta_fields = _diff_entries(entries_a.get(x, {}), entries_b.get(y, {}))
        layers.append(LayerDiff(index=i, diff_id_a=x, diff_id_b=y, created_by=created_by, only_in_a=only_a,
                                only_in_b=only_b, content_differs=differs, metadata_differs=meta_differs,
                                metadata_fields=meta_fields))
    return ImageDiff(image_a=info_a["Id"], image_b=info_b["Id"], config_differences=config,
                     history_created_differs=created_differs, layers=tuple(layers),
                     content_a=content_digest(info_a), content_b=content_digest(info_b))


def describe(diff: ImageDiff) -> list[str]:
    """The finding in words: one line per difference, with a few example paths."""
    if diff.identical:
        return [f"identical image id {diff.image_a}"]
    lines = [f"image ids differ: {diff.image_a[:19]} vs {diff.image_b[:19]}",
             "content digests (layers + runtime config) " + ("are equal: " + diff.content_a[:12]
                                                             if diff.content_a == diff.content_b else
                                                             f"differ: {diff.content_a[:12]} vs {diff.content_b[:12]}")]
    for name, a, b in diff.config_differences:
        lines.append(f"config {name}: {a[:60]} | {b[:60]}")
    if diff.history_created_differs:
        lines.append(f"history: {diff.history_created_differs} entries carry different build times")
    for layer in diff.layers:
        if layer.same:
            lines.append(f"layer {layer.index} identical ({layer.diff_id_a[:19]})")
            continue
        lines.append(f"layer {layer.index} differs ({layer.created_by[:70]})")
        for label, paths in (("only in A", layer.only_in_a), ("only in B", layer.only_in_b),
                             ("bytes differ", layer.content_differs),
                             (f"same bytes, {'/'.join(layer.metadata_fields)} differ", layer.metadata_differs)):
            if paths:
                shown = ", ".join(paths[:SAMPLE]) + (f" … (+{len(paths) - SAMPLE})" if len(paths) > SAMPLE else "")
                lines.append(f"  {label}: {len(paths)}: {shown}")
    return lines
