"""pipeline/atomic.py: whole file or old file, never half; a full disk is named as one, and its temp removed."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import pytest

from pipeline.atomic import DiskFull, atomic_open, write_bytes, write_json, write_text, write_yaml
from pipeline.errors import InputError
from pipeline.yamlio import load_file


def test_writes_replace_the_file_whole_and_leave_no_temp(tmp_path):
    path = tmp_path / "a.yaml"
    write_text(path, "old\n")
    write_yaml(path, {"b": 1, "a": [1, 2]})
    assert load_file(path) == {"b": 1, "a": [1, 2]} and path.read_text().startswith("b: 1")
    write_json(tmp_path / "a.json", {"x": 1})
    write_bytes(tmp_path / "a.bin", b"\x00" * 10)
    assert (tmp_path / "a.bin").read_bytes() == b"\x00" * 10
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin", "a.json", "a.yaml"]


def test_a_failed_write_keeps_the_old_file_and_removes_the_temp(tmp_path):
    path = tmp_path / "state.json"
    write_text(path, "old")
    with pytest.raises(RuntimeError), atomic_open(path) as f:
        f.write(b"half")
        raise RuntimeError("killed mid-write")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_non_finite_json_is_refused_rather_than_written_invalid(tmp_path):
    with pytest.raises(ValueError):
        write_json(tmp_path / "x.json", {"loss": float("nan")})
    assert not list(tmp_path.iterdir())


def test_directory_in_the_way_and_unwritable_folder_are_input_errors(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(InputError, match="is a directory"):
        write_text(tmp_path / "d", "x")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    code = ("import sys\nfrom pipeline.atomic import write_text\nfrom pipeline.errors import InputError\n"
            "try:\n    write_text(sys.argv[1], 'x')\nexcept InputError as exc:\n    print(exc)\n")
    # as root, drop the capabilities that override file permissions (else the folder's mode is not enforced)
    proc = subprocess.run([sys.executable, "-c", code, str(locked / "x")], capture_output=True, text=True,
                          preexec_fn=_without_permission_override if os.geteuid() == 0 else None)
    locked.chmod(0o700)
    assert "permission denied" in proc.stdout and str(locked / "x") in proc.stdout, proc.stderr
    assert list(locked.iterdir()) == []


def _without_permission_override() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


@pytest.fixture
def tiny_fs(tmp_path):
    """A real 1 MiB tmpfs (root only): ENOSPC for real, no mocks."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tiny tmpfs needs root")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


def test_enospc_is_a_full_disk_naming_the_path_and_the_temp_is_removed(tiny_fs):
    path = tiny_fs / "big.bin"
    with pytest.raises(DiskFull) as caught:
        write_bytes(path, b"\x01" * (4 << 20))
    assert "disk is full" in caught.value.what and str(path) in caught.value.what
    assert caught.value.exit_code == 4
    assert list(tiny_fs.iterdir()) == []
