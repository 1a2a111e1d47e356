"""The sha256sum list format, one module for a bundle's SHA256SUMS and an image tarball's .sha256 sidecar."""

import hashlib
import shutil
import subprocess

import pytest

from pipeline.sha256sums import format_sums, parse_sums


def test_written_lists_read_back_sorted_and_complete():
    digests = {"runs/b/log.txt": "b" * 64, "manifest.yaml": "a" * 64}
    text = format_sums(digests)
    assert text.splitlines()[0] == f"{'a' * 64}  manifest.yaml"
    assert parse_sums(text).digests == digests and parse_sums(text).problems == ()


def test_every_bad_line_and_every_repeat_is_named():
    text = f"{'a' * 64}  x\nnot a line\n{'b' * 64}  x\n{'C' * 64}  upper-case hex\n"
    sums = parse_sums(text)
    assert sums.digests == {"x": "a" * 64}
    assert sums.problems == ("line 2 is not '<sha256>  <name>': 'not a line'", "lists x twice",
                             f"line 4 is not '<sha256>  <name>': '{'C' * 64}  upper-case hex'")


@pytest.mark.skipif(shutil.which("sha256sum") is None, reason="no sha256sum tool here")
def test_the_coreutils_tool_reads_what_is_written(tmp_path):
    (tmp_path / "image.tar").write_bytes(b"layers")
    digest = hashlib.sha256(b"layers").hexdigest()
    (tmp_path / "image.tar.sha256").write_text(format_sums({"image.tar": digest}))
    done = subprocess.run(["sha256sum", "-c", "image.tar.sha256"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0 and "image.tar: OK" in done.stdout
