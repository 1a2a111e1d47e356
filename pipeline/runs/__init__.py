"""runs stage: one training run and its run directory.

PUBLIC lists the modules other packages may import (tests/test_layers.py holds every import to it);
the others are this stage's own. Names, not imports: importing the package loads nothing.
"""

PUBLIC = ("train_plan", "train_run", "rundir", "launch", "runtime_docker", "hub_use", "progress", "float_args",
          "fp8_scales", "failure")
