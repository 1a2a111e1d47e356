"""bundle stage: the record bundle: archive, verify, show.

PUBLIC lists the modules other packages may import (tests/test_layers.py holds every import to it);
the others are this stage's own. Names, not imports: importing the package loads nothing.
"""

PUBLIC = ("archive", "verify", "judging", "trust", "manifest")
