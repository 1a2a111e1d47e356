"""repro: reproduce GPU training speed records and archive verified record bundles.

Paths are not global: the CLI resolves one Workspace (pipeline/workspace.py) and passes it down.
"""

__version__ = "0.1.0"
