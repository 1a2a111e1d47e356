"""Where the tests find the checkout they test (the product itself resolves paths through pipeline/workspace.py)."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = REPO_ROOT / "tests" / "fixtures"
