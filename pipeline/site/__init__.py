"""`repro records site`: a static site of the record registry (pipeline/site/build.py)."""
