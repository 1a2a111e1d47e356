"""Lay docs-v1's two shards out as the dataset docs-v1-smoke (manifests/datasets/docs-v1-smoke.yaml), for smoke runs
of record programs on a machine without FineWeb:

    python3 tools/docs_v1_smoke.py DOCS_V1_DIR OUT_DIR      # DOCS_V1_DIR holds fineweb_{train_000001,val_000000}.bin
    repro reproduce --record NAME --smoke 20 --dataset docs-v1-smoke --data-source OUT_DIR

Why a layout of its own: every program from 2025-01 on reads its validation through `iter(files)` and stops at the
last shard, and from 2025-07 on reads up to 2,097,152 validation tokens at once (a batch that sizes the model from
2025-10 on, which a smoke cut must not change). docs-v1's validation text is 541,192 tokens; repeated twenty times in
one shard it holds 10,823,840, more than the records' val_tokens of 10,485,760, so a smoke run validates as the
record does, with no --smoke-val-tokens. The train shard is linked under four names (a run reads 30 warm-up steps
and its own from fresh loaders). `repro data fetch` copies the files and checks each against the manifest's lock.
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pipeline.data.shards import read_tokens, write_shard  # noqa: E402

VAL_REPEATS = 20
TRAIN_NAMES = 4


def main(docs: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    val = read_tokens(docs / "fineweb_val_000000.bin", mmap=False)
    size = write_shard(out / "fineweb_val_000000.bin", np.tile(val, VAL_REPEATS))
    print(f"fineweb_val_000000.bin: {VAL_REPEATS} x {len(val):,} tokens, {size:,} bytes")
    train = (docs / "fineweb_train_000001.bin").resolve(strict=True)
    for i in range(1, TRAIN_NAMES + 1):
        link = out / f"fineweb_train_{i:06d}.bin"
        link.unlink(missing_ok=True)
        link.symlink_to(train)
        print(f"{link.name} -> {train}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]))
