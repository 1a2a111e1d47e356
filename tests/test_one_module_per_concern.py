"""Issue 12, "one module per concern": YAML reading, HTTP, atomic replacement and the list of secret names
each live in one module.

A new copy elsewhere would again behave differently (no alias refusal, no retries, no fsync); this test
names the file and line so the copy can be replaced by a call.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PIPELINE = Path(__file__).resolve().parent.parent / "pipeline"

CONCERNS = {
    "yamlio.py": re.compile(r"\byaml\.(safe_load|load|full_load|unsafe_load|load_all|safe_load_all)\("),
    "http.py": re.compile(r"\burllib\.request\b|\burlopen\(|\bhttp\.client\b|^\s*import requests\b|\bhttpx\b"),
    "atomic.py": re.compile(r"\bos\.replace\("),
    # a second list of secret names: a string literal naming one
    "redact.py": re.compile(r"[\"'][^\"']*(SECRET|PASSWORD|PASSWD|CREDENTIAL)[^\"']*[\"']"),
}


@pytest.mark.parametrize("home", sorted(CONCERNS))
def test_only_its_module_does_it(home):
    pattern = CONCERNS[home]
    copies = [f"{path.relative_to(PIPELINE.parent)}:{number}: {line.strip()}"
              for path in sorted(PIPELINE.rglob("*.py")) if path.name != home or path.parent != PIPELINE
              for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
              if pattern.search(line) and not line.lstrip().startswith("#")]
    assert not copies, f"use pipeline/{home} instead:\n" + "\n".join(copies)
