"""The test HTTP server's counters: a test reads them only after the server has logged every request it got.

A client has its answer before the server's handler thread logs the request; on a busy machine the test could
read the counters one request short (a CI run on 2026-12-01 saw 2 requests where 3 had been answered). And they list
requests in the order they arrived, not the order their handlers logged them: a client that hangs up mid-body and asks
again at once can be logged second (CI runs on 2026-12-03 saw the retry listed before the request it retried)."""

import time
import urllib.error
import urllib.request

from tests.helpers_http import FileServer


def test_counters_wait_for_the_request_being_logged(monkeypatch):
    log = FileServer._log

    def slow_log(self, handler, status, body_bytes, path):  # the first handler is descheduled before it logs
        if path == "/a.bin":
            time.sleep(0.3)
        log(self, handler, status, body_bytes, path)

    monkeypatch.setattr(FileServer, "_log", slow_log)
    with FileServer({"/a.bin": b"x" * 10}) as server:
        with urllib.request.urlopen(server.url("/a.bin")) as response:
            assert response.read() == b"x" * 10
        try:
            urllib.request.urlopen(server.url("/missing"))
        except urllib.error.HTTPError as e:
            assert e.code == 404
        assert [(r.path, r.status) for r in server.requests] == [("/a.bin", 200), ("/missing", 404)]
        assert server.bytes_served == 10
