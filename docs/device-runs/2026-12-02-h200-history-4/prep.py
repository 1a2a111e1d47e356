"""Here, before the lease: copy the registry REGISTRY (a fresh `repro records import` of upstream's history, both
tracks, into a registry holding only the committed datasets and environments) into .devcarry/registry, and each
chosen record's selected logs (the runs its manifest pins) from an upstream checkout into
.devcarry/history/<record>/, which the lease carries and `run.sh` puts in each workspace's log cache (what `repro
records fetch-logs NAME --from DIR` leaves on an offline node).

    python3 docs/device-runs/2026-12-02-h200-history-3/prep.py REGISTRY /path/to/modded-nanogpt RECORD...
"""
import shutil
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]


def main(registry: Path, upstream: Path, names: list[str]) -> None:
    out = REPO / ".devcarry" / "history"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(REPO / ".devcarry" / "registry", ignore_errors=True)
    shutil.copytree(registry, REPO / ".devcarry" / "registry")
    for name in names:
        m = yaml.safe_load((registry / "records" / f"{name}.yaml").read_text())
        folder = upstream / m["upstream"]["folder"]
        logs = [e["file"] for e in m["logs"]]  # the manifest's runs (left-out logs are listed elsewhere)
        dest = out / name
        dest.mkdir(parents=True)
        for f in logs[:2]:  # the program is in every selected log; two keep the carried tree small
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(folder / f, dest / f)
        print(name, logs[:2])


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:])
