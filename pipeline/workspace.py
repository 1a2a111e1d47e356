"""Where everything lives: one object, resolved once by the CLI and passed down.

    ws = Workspace.resolve()                      # root = $REPRO_HOME or the current directory
    ws = Workspace.resolve(root="/scratch/me")    # tests and `repro --root DIR ...`
    ws.record_manifest("2025-09-23_MuonCustomSizing"), ws.runs / record, ws.bundles, ws.cache / "record-logs"

One rule for paths: every folder the tool writes (data, runs, work, bundles, state, cache) is under `root`.
What the tool only reads ships with it: the registry (manifests/) and the Dockerfiles (docker/). In a
checkout they are the checkout's own folders; in an installed wheel they are the package data copied from
them (pyproject maps both into `pipeline/_resources`). `--registry DIR` points at another registry, for
example one written by `repro records import`.

This is the only module that reads environment variables for paths.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from pipeline.errors import InputError, ReproError
from pipeline.regular_file import read_text_bounded

PACKAGE_DIR = Path(__file__).resolve().parent
CHECKOUT_ROOT = PACKAGE_DIR.parent  # the clone, when running from one (manifests/ and docker/ beside pipeline/)
PROJECT_NAME = 'name = "repro-speedrun"'  # the line of pyproject.toml that marks this project's clone


def checkout_root() -> Path | None:
    """The git clone the tool runs from, or None for an installed wheel. The folder above the package is
    site-packages in an installed wheel, where other distributions' folders (the Docker SDK's `docker/`)
    stand beside ours: only this project's pyproject.toml makes it a checkout."""
    pyproject = CHECKOUT_ROOT / "pyproject.toml"
    try:
        ours = PROJECT_NAME in read_text_bounded(pyproject, 1 << 20, "pyproject.toml", "")
    except (OSError, ReproError):
        return None
    return CHECKOUT_ROOT if ours and (CHECKOUT_ROOT / "train").is_dir() else None


def shipped(name: str) -> Path:
    """A read-only folder the tool ships: the checkout's copy in a clone, else the package's own data
    (pipeline/_resources, found through importlib.resources, so never another package's folder)."""
    root = checkout_root()
    candidate = root / name if root is not None else Path(str(resources.files("pipeline").joinpath("_resources", name)))
    if candidate.is_dir():
        return candidate
    raise InputError(f"the tool's {name}/ folder is missing (looked in {candidate})",
                     "reinstall repro (`pip install .` from a clone ships manifests/ and docker/ inside the package)")


@dataclass(frozen=True)
class Workspace:
    root: Path  # every folder the tool writes lives under here
    registry: Path  # manifests: records/, datasets/, environments/
    docker_dir: Path  # Dockerfiles and .dockerignore

    @classmethod
    def resolve(cls, root: str | Path | None = None, registry: str | Path | None = None) -> Workspace:
        root = Path(root or os.environ.get("REPRO_HOME") or Path.cwd()).expanduser().resolve()
        reg = registry or os.environ.get("REPRO_REGISTRY")
        reg_path = Path(reg).expanduser().resolve() if reg else shipped("manifests")
        if not reg_path.is_dir():
            raise InputError(f"registry folder {reg_path} does not exist",
                             "pass --registry DIR pointing at a folder with records/, datasets/ and environments/")
        return cls(root=root, registry=reg_path, docker_dir=shipped("docker"))

    # Folders the tool writes: all under root.
    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def bundles(self) -> Path:
        return self.root / "bundles"

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    # The registry, read-only.
    @property
    def records_dir(self) -> Path:
        return self.registry / "records"

    @property
    def datasets_dir(self) -> Path:
        return self.registry / "datasets"

    @property
    def environments_dir(self) -> Path:
        return self.registry / "environments"

    @property
    def train_dir(self) -> Path:
        """The native trainer's source folder (a package: present in a checkout and in the wheel)."""
        import train

        return Path(train.__file__).resolve().parent

    def with_registry(self, registry: Path) -> Workspace:
        """The same workspace reading another registry (a bundle's own manifests, an imported history)."""
        return Workspace(root=self.root, registry=Path(registry), docker_dir=self.docker_dir)
