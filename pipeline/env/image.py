"""The built image as later stages see it: the engine connection, state/image.json, save and load.

    repro env save [--image ID] OUT.tar[.gz]      writes OUT and OUT.sha256
    repro env load IN.tar[.gz] [--sha256 HEX]    checks the sha256, loads, records state/image.json

A node without registry access gets the image as a tarball: `save` streams `docker save` through
sha256 into the file, `load` refuses a tarball whose bytes do not match before the engine sees it.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from pipeline.atomic import atomic_open, write_text
from pipeline.clock import utc_now
from pipeline.errors import CheckFailed, InputError, RunFailed
from pipeline.findings import Finding, deviations_from_list
from pipeline.hashing import sha256_file
from pipeline.regular_file import open_regular, read_text_bounded
from pipeline.sha256sums import format_sums, parse_sums

LABEL_PREFIX = "io.repro."
CHUNK = 1 << 20


def connect(timeout: int = 600):
    """The low-level API of the one Docker client (pipeline/docker_engine.py)."""
    from pipeline.docker_engine import connect as engine

    return engine(timeout).api


def state_dir(directory: Path | None = None) -> Path:
    """Where image.json lives: the workspace's state/ folder (Workspace.state), which every caller passes."""
    if directory is None:
        raise InputError("no state folder given for the image record",
                         "pass the workspace's state folder (Workspace.state); this is a bug in the caller")
    return Path(directory)


@dataclass(frozen=True, kw_only=True)
class ImageState:
    image_id: str
    tags: tuple[str, ...]
    environment: str
    record: str
    lock_sha256: str
    labels: dict
    layers: tuple[str, ...]  # rootfs diff ids: the content of each layer
    content_sha256: str  # see content_digest: equal for rebuilds from the same inputs, unlike image_id
    deviations: tuple[Finding, ...]  # the lock's, from the image's label
    source: str  # "build" or "load"
    recorded_at: str
    build_seconds: float | None = None
    tarball_sha256: str = ""


def content_digest(info: dict) -> str:
    """sha256 of what a container sees: layer diff ids and the runtime config, without build times.

    The classic builder writes the build time and its build containers' ids into the image config, so
    two builds from the same inputs never share an image id; they do share this digest.
    """
    config = info.get("Config") or {}
    seen = {"layers": info.get("RootFS", {}).get("Layers") or [], "os": info.get("Os"),
            "architecture": info.get("Architecture"),
            **{key: config.get(key) for key in ("Env", "Cmd", "Entrypoint", "WorkingDir", "User", "Labels",
                                                "ExposedPorts", "Volumes")}}
    return hashlib.sha256(json.dumps(seen, sort_keys=True).encode()).hexdigest()


def state_from_image(client, image: str, source: str, **extra) -> ImageState:
    info = client.inspect_image(image)
    labels = info.get("Config", {}).get("Labels") or {}
    try:
        deviations = deviations_from_list(json.loads(labels.get(LABEL_PREFIX + "deviations", "[]")),
                                          f"image {image}: label {LABEL_PREFIX}deviations")
    except ValueError:
        raise InputError(f"image {image}: label {LABEL_PREFIX}deviations is not JSON",
                         "build the image again with `repro env build`") from None
    return ImageState(image_id=info["Id"], tags=tuple(info.get("RepoTags") or ()),
                      environment=labels.get(LABEL_PREFIX + "environment", ""),
                      record=labels.get(LABEL_PREFIX + "record", ""),
                      lock_sha256=labels.get(LABEL_PREFIX + "environment-lock.sha256", ""), labels=labels,
                      layers=tuple(info.get("RootFS", {}).get("Layers") or ()), content_sha256=content_digest(info),
                      deviations=deviations,
                      source=source, recorded_at=utc_now(), **extra)


def save_image_state(state: ImageState, directory: Path | None = None) -> Path:
    path = state_dir(directory) / "image.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, json.dumps(asdict(state), indent=2, sort_keys=True) + "\n")
    return path


def load_image_state(directory: Path | None = None) -> ImageState:
    """What `repro env build` or `repro env load` recorded last; later stages run this image."""
    path = state_dir(directory) / "image.json"
    if not path.is_file():
        raise InputError(f"no image recorded ({path} is absent)",
                         "build it with `repro env build` or load a tarball with `repro env load FILE`")
    try:
        data = json.loads(read_text_bounded(path, 1 << 20, "image state", "build or load the image again"))
        data["tags"], data["layers"] = tuple(data["tags"]), tuple(data["layers"])
        data["deviations"] = deviations_from_list(data["deviations"], f"{path}: deviations")
        return ImageState(**data)
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path} is not a valid image record ({exc})",
                         "delete it and run `repro env build` or `repro env load` again") from None


@dataclass(frozen=True)
class SavedImage:
    path: str
    sha256: str
    bytes: int
    image_id: str


def _sha_sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def save_image(out: Path, image: str | None = None, client=None, state_directory: Path | None = None) -> SavedImage:
    """docker save into out (gzip when out ends in .gz), hashing the bytes as they are written."""
    client = client or connect()
    image = image or load_image_state(state_directory).image_id
    import docker

    try:
        image_id = client.inspect_image(image)["Id"]
    except docker.errors.ImageNotFound:
        raise InputError(f"image {image} is not on this engine", "build it with `repro env build` first") from None
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0

    class _Hashing:  # a file object that hashes what passes through it
        def __init__(self, fh):
            self.fh = fh

        def write(self, data):
            nonlocal size
            digest.update(data)
            size += len(data)
            return self.fh.write(data)

        def flush(self):
            self.fh.flush()

    with atomic_open(out) as raw:  # renamed into place only when the whole image is written
        sink = _Hashing(raw)
        # mtime=0 and no file name: the gzip header carries nothing about when or where it was made
        stream = gzip.GzipFile(fileobj=sink, mode="wb", compresslevel=1, mtime=0, filename="") \
            if out.name.endswith(".gz") else sink
        for chunk in client.get_image(image_id, chunk_size=CHUNK):
            stream.write(chunk)
        if stream is not sink:
            stream.close()
    sha = digest.hexdigest()
    write_text(_sha_sidecar(out), format_sums({out.name: sha}))
    return SavedImage(path=str(out), sha256=sha, bytes=size, image_id=image_id)


def _file_sha256(path: Path) -> str:
    return sha256_file(path)  # a FIFO or a device: InputError (pipeline/regular_file.py)


def load_image(tarball: Path, sha256: str | None = None, client=None,
               state_directory: Path | None = None) -> ImageState:
    """Check the tarball's sha256 (given, or from its .sha256 file), load it, record the image."""
    tarball = Path(tarball)
    if not tarball.is_file():
        raise InputError(f"no image tarball at {tarball}", "give the file `repro env save` wrote")
    expected = sha256
    if expected is None:
        sidecar = _sha_sidecar(tarball)
        if not sidecar.is_file():
            raise InputError(f"{tarball} has no {sidecar.name} and no --sha256 was given",
                             "pass --sha256 <hex> from the machine that saved it (refusing unverified images)")
        listed = parse_sums(read_text_bounded(sidecar, 4096, "sha256 file", "pass --sha256 <hex> instead")).digests
        if len(listed) != 1:
            raise InputError(f"{sidecar} is not one '<sha256>  <name>' line", "pass --sha256 <hex> instead")
        (expected,) = listed.values()
    actual = _file_sha256(tarball)
    if actual != expected:
        raise CheckFailed(f"{tarball}: sha256 is {actual}, expected {expected}",
                          "the tarball is corrupt or not the one saved; copy it again")
    client = client or connect()
    loaded = []
    # the engine itself unpacks gzip
    with open_regular(tarball, "image tarball", "give the file `repro env save` wrote") as fh:
        for message in client.load_image(fh):
            if "error" in message:
                raise RunFailed(f"docker load of {tarball} failed: {message['error']}",
                                "check the engine's disk space and that the file is a `docker save` tarball")
            text = message.get("stream", "")
            for prefix in ("Loaded image ID: ", "Loaded image: "):
                if text.startswith(prefix):
                    loaded.append(text[len(prefix):].strip())
    if not loaded:
        raise RunFailed(f"docker load of {tarball} reported no image", "check that the file is a `docker save` tarball")
    state = state_from_image(client, loaded[0], "load", tarball_sha256=actual)
    save_image_state(state, state_directory)
    return state
