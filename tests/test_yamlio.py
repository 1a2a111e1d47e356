"""pipeline/yamlio.py: one strict YAML reader (no aliases, no duplicate keys, size limits, type checks)."""

from __future__ import annotations

import pytest

from pipeline.errors import InputError, ManifestError
from pipeline.manifest_io import load_yaml
from pipeline.yamlio import LIMITS, YamlRefused, load_bytes, load_file, load_mapping

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b]\n"


def test_plain_yaml_loads_as_safe_load_would():
    assert load_bytes(b"a: 1\nb: [x, {c: 2.5}]\nd: null\n", "t") == {"a": 1, "b": ["x", {"c": 2.5}], "d": None}


def test_anchors_and_aliases_are_refused_with_the_line():
    with pytest.raises(YamlRefused) as caught:
        load_bytes(BOMB, "bomb.yaml")
    assert caught.value.line == 1 and "anchor (&a)" in caught.value.what and "bomb.yaml, line 1" in str(caught.value)
    with pytest.raises(YamlRefused, match=r"line 2: an alias \(\*x\)"):
        load_bytes("a: 1\nb: *x\n", "t")


def test_duplicate_keys_are_refused_naming_both_lines():
    with pytest.raises(YamlRefused, match=r"t, line 3: duplicate key 'target' \(first at line 1\)"):
        load_bytes("target: 3.28\nother: 1\ntarget: 9.0\n", "t")
    with pytest.raises(YamlRefused, match="duplicate key 'b'"):
        load_bytes("a:\n  b: 1\n  b: 2\n", "t")


def test_each_kind_has_a_size_limit_and_the_error_names_it(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"# padding\n" * (LIMITS["manifest"] // 10 + 1))
    with pytest.raises(YamlRefused, match=r"over the 1,048,576-byte limit for a manifest"):
        load_file(big, "manifest")
    with pytest.raises(YamlRefused, match="limit for a bundle member"):
        load_bytes(b" " * (LIMITS["bundle_member"] + 1), "m", "bundle_member")


def test_deep_nesting_and_bad_syntax_are_input_errors():
    with pytest.raises(YamlRefused, match="nested too deeply|not valid YAML"):
        load_bytes("[" * 100_000 + "]" * 100_000, "deep")
    with pytest.raises(YamlRefused, match=r"t, line 3: not valid YAML at column 1"):
        load_bytes("a: 1\nb: [\n", "t")


def test_top_level_type_is_checked(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(InputError, match="top level of this run.yaml must be a mapping of fields, but it is a list"):
        load_mapping(path, "run", "run.yaml")


def test_manifest_io_keeps_its_field_path_style(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("schema_version: 1\nname: x\nname: y\n")
    with pytest.raises(ManifestError, match=r"x.yaml: line 3: duplicate key 'name'"):
        load_yaml(path)


@pytest.mark.parametrize("value, why", [("9" * 5000, "an integer of more than 4,300 digits"),
                                        ("2026-13-45", "month must be in 1..12")])
def test_a_value_its_type_cannot_hold_is_refused_by_name(value, why):
    """int('9' * 5000) raises ValueError (Python's 4,300-digit limit), as does a 13th month: it came out of the
    loader as a traceback from every command that reads YAML."""
    with pytest.raises(YamlRefused) as exc:
        load_bytes(f"a: {value}\n".encode(), "x.yaml")
    assert why in str(exc.value)
