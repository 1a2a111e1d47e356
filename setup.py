"""Packaging hook: ship manifests/ and docker/ inside the wheel as pipeline/_resources/ (pyproject.toml has
the rest). An installed `repro` then finds its record registry and Dockerfiles without a checkout
(pipeline/workspace.py looks in the checkout first, then here)."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SHIPPED = ("manifests", "docker")


class BuildWithResources(build_py):
    def run(self):
        super().run()
        root = Path(__file__).resolve().parent
        target = Path(self.build_lib) / "pipeline" / "_resources"
        for name in SHIPPED:
            shutil.rmtree(target / name, ignore_errors=True)
            shutil.copytree(root / name, target / name, ignore=shutil.ignore_patterns("__pycache__", "*.partial"))


setup(cmdclass={"build_py": BuildWithResources})
