"""env stage: the pinned environment: manifests, locks, the choice among them, images and venvs.

PUBLIC lists the modules other packages may import (tests/test_layers.py holds every import to it);
the others are this stage's own. Names, not imports: importing the package loads nothing.
"""

PUBLIC = ("manifest", "lock", "choose", "build", "image", "venv", "verify", "compare", "dockerfile_policy")
