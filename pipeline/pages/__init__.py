"""pages stage: the pages a person looks at, made from what the stages before it wrote.

`repro report --html` (report.py, from a bundle, a work folder or run folders) and `repro records site`
(site.py, the registry with each record's check and plan). It reads bundles, so it comes after the bundle
stage; `reproduce` writes the bundle's page as its report stage's last step.

PUBLIC lists the modules other packages may import (tests/test_layers.py holds every import to it);
the others are this stage's own. Names, not imports: importing the package loads nothing.
"""

PUBLIC = ("write", "site", "site_inputs", "page", "report_input")
