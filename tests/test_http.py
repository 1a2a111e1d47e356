"""pipeline/http.py against real servers on 127.0.0.1: resume, bounded retries, broken ranges, endless bodies."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import time

import numpy as np
import pytest

from pipeline.atomic import DiskFull
from pipeline.data.shards import shard_bytes, size_from_header, write_shard
from pipeline.errors import CheckFailed
from pipeline.http import HttpRefused, Policy, ProtocolViolation, Unreachable, download, fetch_bytes
from tests.helpers_http import Fault, FileServer

DATA = bytes(range(256)) * 1200  # 307,200 bytes


def quick(**kw) -> Policy:
    return Policy(**{"retries": 5, "backoff_s": 0.01, "timeout_s": 5, **kw})


def test_a_dropped_connection_is_resumed_with_range_and_hashed_in_one_pass(tmp_path):
    with FileServer({"/f": DATA}) as server:
        server.fault("/f", Fault("drop", after=100_000, times=2))
        got = download(server.url("/f"), tmp_path / "f.part", policy=quick())
        ranges = [r.range for r in server.requests]
    assert ranges == [None, "bytes=100000-", "bytes=200000-"]
    assert server.bytes_served == len(DATA) and (tmp_path / "f.part").read_bytes() == DATA
    assert got.size == len(DATA) and got.sha256 == hashlib.sha256(DATA).hexdigest() and not got.cut_at_limit


@pytest.mark.parametrize("broken", ["wrong", "missing"])
def test_malformed_206_restarts_once_then_fails(tmp_path, broken):
    with FileServer({"/f": DATA}) as server:
        server.fault("/f", Fault("drop", after=50_000, times=-1))  # every answer breaks off: only ranges can help
        server.broken_ranges["/f"] = broken
        start = time.monotonic()
        with pytest.raises(ProtocolViolation) as caught:
            download(server.url("/f"), tmp_path / "f.part", policy=quick())
        seconds = time.monotonic() - start
        deadline = time.monotonic() + 2
        while len(server.requests) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)  # the server logs a request when its handler ends, after the client hung up
        requests = [(r.range, r.status) for r in server.requests]
    # asked to resume, got a bad 206, restarted from zero once, got a bad 206 again: stop, naming the server
    assert requests == [(None, 200), ("bytes=50000-", 206), (None, 200), ("bytes=50000-", 206)]
    assert server.base in caught.value.what and "again after starting the file over" in caught.value.what
    assert caught.value.exit_code == 1 and seconds < 5
    assert not (tmp_path / "f.part").exists() or (tmp_path / "f.part").stat().st_size <= 50_000


def test_malformed_206_once_restarts_from_zero_and_completes(tmp_path):
    with FileServer({"/f": DATA}) as server:
        server.fault("/f", Fault("drop", after=50_000, times=1))
        server.broken_ranges["/f"] = "wrong"
        got = download(server.url("/f"), tmp_path / "f.part", policy=quick())
    assert (tmp_path / "f.part").read_bytes() == DATA and got.sha256 == hashlib.sha256(DATA).hexdigest()


def test_endless_body_stops_at_expected_size(tmp_path):
    with FileServer({"/f": DATA[:3072]}) as server:
        server.fault("/f", Fault("endless", seconds=20))
        start = time.monotonic()
        got = download(server.url("/f"), tmp_path / "f.part", expected_size=3072, policy=quick())
        seconds = time.monotonic() - start
    assert (tmp_path / "f.part").stat().st_size == 3072 and got.cut_at_limit and seconds < 5


def test_endless_body_without_a_lock_stops_at_the_size_its_shard_header_declares(tmp_path):
    write_shard(tmp_path / "s.bin", np.arange(1000) % 50000)
    shard = (tmp_path / "s.bin").read_bytes()
    with FileServer({"/s": shard}) as server:
        server.fault("/s", Fault("endless", seconds=20))
        got = download(server.url("/s"), tmp_path / "s.part", size_from_prefix=size_from_header, policy=quick())
    assert got.size == shard_bytes(1000) and (tmp_path / "s.part").read_bytes() == shard and got.cut_at_limit


def test_endless_body_with_no_size_known_stops_at_the_cap(tmp_path):
    with FileServer({"/f": DATA}) as server:
        server.fault("/f", Fault("endless", seconds=20))
        got = download(server.url("/f"), tmp_path / "f.part", policy=quick(max_bytes=1_000_000))
    assert got.size == 1_000_000 == (tmp_path / "f.part").stat().st_size and got.cut_at_limit


def test_total_retry_time_is_bounded_by_the_policy(tmp_path):
    with FileServer({"/f": DATA}) as server:
        server.fault("/f", Fault("status", status=503, times=-1))
        start = time.monotonic()
        with pytest.raises(Unreachable, match=r"retrying for more than 1\.5 s"):
            download(server.url("/f"), tmp_path / "f.part", policy=quick(retries=1000, backoff_s=0.2, max_retry_s=1.5))
        seconds = time.monotonic() - start
    assert 1.0 < seconds < 4.0


def test_unreachable_source_is_a_missing_dependency_exit_4(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: connection refused
    with pytest.raises(Unreachable) as caught:
        download(f"http://127.0.0.1:{port}/f", tmp_path / "f.part", policy=quick(retries=2))
    assert caught.value.exit_code == 4 and "gave up after 2 retries" in caught.value.what


def test_http_errors_are_refused_with_the_url_and_no_credentials(tmp_path):
    with FileServer({}) as server:
        url = server.url("/missing").replace("http://", "http://user:pw@") + "?sig=secret"
        with pytest.raises(HttpRefused) as caught:
            download(url, tmp_path / "f.part", policy=quick())
    assert caught.value.status == 404 and caught.value.exit_code == 3
    assert "pw" not in caught.value.what and "secret" not in caught.value.what


def test_fetch_bytes_is_bounded_and_retries(tmp_path):
    with FileServer({"/f": DATA}) as server:
        server.fault("/f", Fault("status", status=500, times=2))
        assert fetch_bytes(server.url("/f"), max_bytes=len(DATA), policy=quick()) == DATA
        with pytest.raises(CheckFailed, match="over the 1000-byte limit"):
            fetch_bytes(server.url("/f"), max_bytes=1000, policy=quick())


def test_a_server_that_disagrees_with_the_expected_size_is_refused(tmp_path):
    with FileServer({"/f": DATA}) as server:
        with pytest.raises(ProtocolViolation, match="offers 307200 bytes"):
            download(server.url("/f"), tmp_path / "f.part", expected_size=1000, policy=quick())


def test_enospc_during_download_is_a_full_disk_and_the_part_is_removed(tmp_path):
    mount = tmp_path / "tiny"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tiny tmpfs needs root")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        with FileServer({"/f": DATA * 4}) as server:
            with pytest.raises(DiskFull) as caught:
                download(server.url("/f"), mount / "f.part", policy=quick())
        assert "disk is full" in caught.value.what and str(mount / "f.part") in caught.value.what
        assert caught.value.exit_code == 4 and list(mount.iterdir()) == []
    finally:
        subprocess.run(["umount", str(mount)])


def test_answers_tells_a_served_file_from_a_missing_one(tmp_path):
    from pipeline.http import answers

    (tmp_path / "here.whl").write_bytes(b"x")
    with FileServer({"/a.whl": DATA}) as server:
        assert answers(server.url("/a.whl")) and not answers(server.url("/gone.whl"))
    assert answers((tmp_path / "here.whl").as_uri()) and not answers((tmp_path / "gone.whl").as_uri())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert not answers(f"http://127.0.0.1:{port}/x.whl", timeout_s=2)
