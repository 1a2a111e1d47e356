"""Archiving docker-runtime runs: the package list comes from inside the image the runs name (real engine)."""

from __future__ import annotations

import io
import tarfile

import pytest
import yaml

from pipeline.bundle.archive import ArchiveSources, archive
from pipeline.records.model import load_record
from tests.conftest import docker_client_or_skip
from tests.test_bundle import RECORD, RECORDS, make_data_dir, make_run, verify_bundle

pytestmark = pytest.mark.docker


def image_with_a_known_distribution(client) -> str:
    """The test base plus one installed distribution (its metadata only), built offline from a Dockerfile."""
    from tests.docker_base import ensure_test_base

    base = ensure_test_base(client)
    dockerfile = (f"FROM {base}\n"
                  "RUN mkdir -p /usr/lib/python3/dist-packages/demo_pkg-1.2.3.dist-info && printf "
                  "'Metadata-Version: 2.1\\nName: demo-pkg\\nVersion: 1.2.3\\n' > "
                  "/usr/lib/python3/dist-packages/demo_pkg-1.2.3.dist-info/METADATA\n")
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile.encode()))
    context.seek(0)
    image, _ = client.images.build(fileobj=context, custom_context=True, tag="repro-test-bundle-freeze:1",
                                   rm=True, pull=False)
    return image.id


def test_docker_runs_get_the_images_package_list(tmp_path):
    client = docker_client_or_skip()
    image_id = image_with_a_known_distribution(client)
    data = make_data_dir(tmp_path)
    runs = [make_run(tmp_path, "20261129T105700Z-aaaa", loss=3.2790, data_dir=data),
            make_run(tmp_path, "20261129T110500Z-bbbb", loss=3.2799, data_dir=data)]
    for run in runs:
        meta = yaml.safe_load((run / "run.yaml").read_text())
        meta["image_id"] = image_id
        (run / "run.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    result = archive(load_record(RECORD, RECORDS), runs, tmp_path / "bundles", sources=ArchiveSources(), environ={},
                     work_dir=tmp_path)
    with tarfile.open(result.path) as tar:
        manifest = yaml.safe_load(tar.extractfile(f"{result.name}/manifest.yaml").read())
        freeze = tar.extractfile(f"{result.name}/environment/pip-freeze.txt").read().decode()
    assert "demo-pkg==1.2.3" in freeze.splitlines()
    assert manifest["environment"]["image_ids"] == [image_id]
    assert manifest["environment"]["pip_freeze_source"].startswith(f"installed distributions inside image {image_id}")
    assert verify_bundle(result.path).ok
    again = archive(load_record(RECORD, RECORDS), runs, tmp_path / "again", sources=ArchiveSources(), environ={},
                    work_dir=tmp_path)
    assert again.path.read_bytes() == result.path.read_bytes()  # the listing is deterministic too
