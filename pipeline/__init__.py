"""repro: reproduce GPU training speed records and archive verified record bundles."""

from pathlib import Path

__version__ = "0.1.0"

# The repository root: manifests/ and the default work folders live beside the package.
REPO_ROOT = Path(__file__).resolve().parent.parent
