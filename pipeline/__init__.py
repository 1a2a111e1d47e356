"""repro: reproduce GPU training speed records and archive verified record bundles.

Paths are not global: the CLI resolves one Workspace (pipeline/workspace.py), builds one Registry over it
(pipeline/registry.py) and passes them down.

Layers, lowest first. The shared modules (every module directly under pipeline/ that is not named in
STAGES: errors, outcome, atomic, findings, clock, workspace, ...) import no stage. A stage imports the
shared modules and the stages before it in STAGES, never one after it or beside it (a tuple is one
layer of siblings), and of another stage package only the modules its __init__ lists in PUBLIC.
tests/test_layers.py checks all of it, and that `train/` never imports `pipeline`; `make lint` runs it.
"""

__version__ = "0.1.0"

STAGES = ("records", ("data", "env"), "registry", "preflight", "runs", "verdict", "report", "bundle", "pages",
          "reproduce", "campaign", "cli")
