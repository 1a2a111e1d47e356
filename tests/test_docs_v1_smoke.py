"""docs-v1-smoke (manifests/datasets/docs-v1-smoke.yaml) and the tool that lays it out (tools/docs_v1_smoke.py):
docs-v1's validation text twenty times in one shard, its train shard under four names. Checked on small shards
of the same format (docs-v1 itself is 24 MB and stays out of the repository), and the manifest's lock against
docs-v1-x4's, which pins docs-v1's own files."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import yaml

from pipeline.data.shards import HEADER_BYTES, read_tokens, write_shard
from tests.paths import REPO_ROOT

TOOL = REPO_ROOT / "tools" / "docs_v1_smoke.py"
DATASETS = REPO_ROOT / "manifests" / "datasets"


def test_the_tool_repeats_the_validation_text_and_links_the_train_shard(tmp_path):
    docs, out = tmp_path / "docs-v1", tmp_path / "smoke"
    docs.mkdir()
    val = np.arange(1000, 1300, dtype=np.uint16)
    write_shard(docs / "fineweb_val_000000.bin", val)
    write_shard(docs / "fineweb_train_000001.bin", np.arange(5000, dtype=np.uint16))
    done = subprocess.run([sys.executable, str(TOOL), str(docs), str(out)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert np.array_equal(read_tokens(out / "fineweb_val_000000.bin"), np.tile(val, 20))
    train = sorted(p.name for p in out.glob("fineweb_train_*.bin"))
    assert train == [f"fineweb_train_00000{i}.bin" for i in (1, 2, 3, 4)]
    assert all((out / n).read_bytes() == (docs / "fineweb_train_000001.bin").read_bytes() for n in train)


def test_the_lock_is_docs_v1_with_its_validation_twenty_times():
    smoke = yaml.safe_load((DATASETS / "docs-v1-smoke.yaml").read_text())
    x4 = yaml.safe_load((DATASETS / "docs-v1-x4.yaml").read_text())
    val_tokens = (x4["lock"]["fineweb_val_000000.bin"]["size"] - HEADER_BYTES) // 2
    assert smoke["lock"]["fineweb_val_000000.bin"]["size"] == HEADER_BYTES + 2 * 20 * val_tokens
    assert 20 * val_tokens >= 10_485_760 + 1  # the records' val_tokens, read once through one shard
    train = {k: v for k, v in smoke["lock"].items() if "_train_" in k}
    assert train == {k: v for k, v in x4["lock"].items() if "_train_" in k}
