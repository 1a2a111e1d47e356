"""Real HTTP servers on 127.0.0.1 for tests: byte ranges, fault injection, a byte counter, a hub.

    with FileServer({"/a.bin": data}) as server:
        server.fault("/a.bin", Fault("drop", after=1000))   # next GET closes the socket after 1000 body bytes
        urlopen(server.url("/a.bin")).read()
        server.bytes_served                                   # body bytes actually written to sockets

    with HubServer("kjj0/fineweb10B-gpt2", {"x.bin": data}) as hub:   # HF_ENDPOINT=hub.endpoint
        hf_hub_download("kjj0/fineweb10B-gpt2", "x.bin", repo_type="dataset", endpoint=hub.endpoint)

HubServer answers what `huggingface_hub.hf_hub_download` asks (read from huggingface_hub 2.x,
file_download.get_hf_file_metadata and http_get): HEAD/GET
{endpoint}/datasets/{repo}/resolve/{revision}/{filename} → 302 to a separate "CDN" server (another
origin, so the client stops there as it does for the real hub's LFS storage) with X-Repo-Commit,
X-Linked-Etag (the LFS sha256), X-Linked-Size and a git ETag; the CDN serves the blob with ranges.
Unknown revision / file / repo → 404 / 404 / 401 with the hub's X-Error-Code values.
"""

from __future__ import annotations

import hashlib
import re
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

CHUNK = 64 << 10


@dataclass
class Fault:
    """A misbehaviour for the next `times` requests of one path (times=-1: every request).

    kind "drop": send `after` body bytes, then close the connection (Content-Length promised more);
    "stall": send `after` body bytes, then hold the connection silent for `seconds` and close it;
    "wrong": send the right length with 64 bytes flipped at offset `at` (default: the middle);
    "status": answer `status` (404, 500, ...) with no body;
    "endless": answer 200 with no Content-Length and the file's bytes repeated until the client hangs
    up (or `seconds` pass): a mirror whose body never ends.
    """

    kind: str
    after: int = 0
    status: int = 500
    at: int | None = None
    times: int = 1
    seconds: float = 5.0


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    range: str | None
    status: int
    body_bytes: int
    headers: dict


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "repro-test"

    def log_message(self, *args):  # keep pytest output clean
        pass

    def do_HEAD(self):
        self.server.owner.handle(self, head=True)

    def do_GET(self):
        self.server.owner.handle(self, head=False)


class FileServer:
    """A threaded HTTP server on 127.0.0.1 serving in-memory files, with faults and counters."""

    def __init__(self, files: dict[str, bytes] | None = None, range_support: bool = True):
        self.files: dict[str, bytes] = dict(files or {})
        self.range_support = range_support
        self.faults: dict[str, list[Fault]] = {}
        # One slot per request in the order requests arrived, filled when its handler logs it: a handler that
        # logs late (a client that hung up mid-body and retried at once) cannot reorder what the client did.
        self._arrivals: list[list[Request]] = []
        self._served: dict[str, int] = {}
        self.headers: dict[str, dict] = {}  # extra response headers per path (an ETag, a Digest)
        # path -> "wrong" (206 whose Content-Range starts at 0, whatever was asked) or "missing" (206 without one)
        self.broken_ranges: dict[str, str] = {}
        self._guard = threading.Lock()
        # A client has its answer before the handler thread logs it: readers of the counters wait until every
        # request that has arrived is logged, so a test never reads them one request short.
        self._logged = threading.Condition(self._guard)
        self._unlogged = 0
        self._current = threading.local()  # this handler thread's slot, and whether its request is unlogged
        self._closing = threading.Event()  # ends stalls when the server stops
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.owner = self
        # A client that hangs up mid-body (the point of several tests) is not an error worth a stack trace.
        self._httpd.handle_error = lambda request, client_address: None
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), daemon=True)

    # -- lifecycle
    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def url(self, path: str = "") -> str:
        return self.base + path

    # -- test controls
    def fault(self, path: str, fault: Fault) -> None:
        with self._guard:
            self.faults.setdefault(path, []).append(fault)

    @property
    def requests(self) -> list[Request]:
        """Every logged request, in the order the requests arrived."""
        with self._guard:
            self._logged.wait_for(lambda: self._unlogged == 0, timeout=5)
            return [slot[0] for slot in self._arrivals if slot]

    @property
    def served(self) -> dict[str, int]:
        with self._guard:
            self._logged.wait_for(lambda: self._unlogged == 0, timeout=5)
            return self._served

    @property
    def bytes_served(self) -> int:
        return sum(self.served.values())

    def reset_counts(self) -> None:
        with self._guard:
            self._logged.wait_for(lambda: self._unlogged == 0, timeout=5)
            self._served.clear()
            self._arrivals.clear()

    def _take_fault(self, path: str) -> Fault | None:
        with self._guard:
            queue = self.faults.get(path)
            if not queue:
                return None
            fault = queue[0]
            if fault.times > 0:
                fault.times -= 1
                if fault.times == 0:
                    queue.pop(0)
            return fault

    def _log(self, handler, status: int, body_bytes: int, path: str) -> None:
        with self._guard:
            self._current.slot.append(Request(handler.command, path, handler.headers.get("Range"), status,
                                              body_bytes, {k.lower(): v for k, v in handler.headers.items()}))
            self._served[path] = self._served.get(path, 0) + body_bytes
            self._settle()

    def _settle(self) -> None:
        """This thread's request is logged (or its handler ended without a log); under the guard."""
        if getattr(self._current, "pending", False):
            self._current.pending = False
            self._unlogged -= 1
            self._logged.notify_all()

    # -- serving
    def handle(self, handler: _Handler, head: bool) -> None:
        with self._guard:
            self._unlogged += 1
            self._current.pending = True
            self._current.slot = []
            self._arrivals.append(self._current.slot)
        try:
            path = unquote(urlsplit(handler.path).path)
            if not self.route(handler, path, head):
                self.send_status(handler, 404, path)
        finally:
            with self._guard:
                self._settle()

    def route(self, handler: _Handler, path: str, head: bool) -> bool:
        """Serve `path` if this server knows it; subclasses add routes (the hub)."""
        if path not in self.files:
            return False
        self.send_file(handler, path, self.files[path], head, extra_headers=self.headers.get(path, {}))
        return True

    def send_status(self, handler: _Handler, status: int, path: str, headers: dict | None = None) -> None:
        handler.send_response(status)
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", "0")
        handler.end_headers()
        self._log(handler, status, 0, path)

    def send_file(self, handler: _Handler, path: str, data: bytes, head: bool, extra_headers: dict) -> None:
        fault = None if head else self._take_fault(path)
        if fault is not None and fault.kind == "status":
            self.send_status(handler, fault.status, path)
            return
        if fault is not None and fault.kind == "endless":
            self._send_endless(handler, path, data, fault, extra_headers)
            return
        start, end, status = 0, len(data), 200
        range_header = handler.headers.get("Range")
        if range_header and self.range_support:
            match = re.fullmatch(r"bytes=(\d+)-(\d*)", range_header.strip())
            if not match or int(match[1]) >= len(data):
                self.send_status(handler, 416, path, {"Content-Range": f"bytes */{len(data)}"})
                return
            start = int(match[1])
            end = min(len(data), int(match[2]) + 1) if match[2] else len(data)
            status = 206
        body = data[start:end]
        if fault is not None and fault.kind == "wrong":
            body = _flipped(body, start, len(data) // 2 if fault.at is None else fault.at)
        handler.send_response(status)
        handler.send_header("Content-Type", "application/octet-stream")
        handler.send_header("Accept-Ranges", "bytes" if self.range_support else "none")
        broken = self.broken_ranges.get(path) if status == 206 else None
        if broken == "wrong":
            body = data  # the whole file, labelled as starting at 0 although a later byte was asked for
        handler.send_header("Content-Length", str(len(body)))
        if broken == "wrong":
            handler.send_header("Content-Range", f"bytes 0-{len(data) - 1}/{len(data)}")
        elif status == 206 and broken != "missing":
            handler.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
        for key, value in extra_headers.items():
            handler.send_header(key, value)
        handler.end_headers()
        if head:
            self._log(handler, status, 0, path)
            return
        cut = fault is not None and fault.kind in ("drop", "stall")
        limit = min(fault.after, len(body)) if cut else len(body)
        sent = 0
        try:
            while sent < limit:
                piece = body[sent:min(sent + CHUNK, limit)]
                handler.wfile.write(piece)
                sent += len(piece)
            handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            handler.close_connection = True
        finally:
            self._log(handler, status, sent, path)
        if cut and fault.kind == "stall":
            self._closing.wait(fault.seconds)
        if limit < len(body):
            # The promised Content-Length is not met: the client must see the connection end early.
            handler.close_connection = True
            try:
                handler.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


    def _send_endless(self, handler: _Handler, path: str, data: bytes, fault: Fault, extra_headers: dict) -> None:
        """200, no Content-Length, the data repeated until the client closes (or fault.seconds pass)."""
        handler.send_response(200)
        handler.send_header("Content-Type", "application/octet-stream")
        handler.send_header("Connection", "close")
        for key, value in extra_headers.items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.close_connection = True
        sent = 0
        deadline = time.monotonic() + fault.seconds
        try:
            while time.monotonic() < deadline and not self._closing.is_set():
                handler.wfile.write(data)
                sent += len(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            self._log(handler, 200, sent, path)

def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class HubServer(FileServer):
    """A Hugging Face Hub look-alike for one repo: resolve routes here, LFS blobs on a CDN server."""

    def __init__(self, repo_id: str, files: dict[str, bytes], repo_type: str = "dataset",
                 commit: str = "0123456789abcdef0123456789abcdef01234567", declared_sha256: dict | None = None):
        super().__init__()
        self.repo_id, self.repo_type, self.commit = repo_id, repo_type, commit
        self.repo_files = dict(files)
        self.sha256 = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
        self.sha256.update(declared_sha256 or {})  # a hub that declares a hash its bytes do not have
        self.cdn = FileServer({f"/blobs/{hashlib.sha256(d).hexdigest()}": d for d in files.values()})

    def __enter__(self):
        self.cdn.__enter__()
        return super().__enter__()

    def __exit__(self, *exc):
        super().__exit__(*exc)
        self.cdn.__exit__(*exc)

    @property
    def endpoint(self) -> str:
        return self.base

    @property
    def bytes_served(self) -> int:
        return self.cdn.bytes_served

    def blob_path(self, filename: str) -> str:
        return f"/blobs/{hashlib.sha256(self.repo_files[filename]).hexdigest()}"

    def fault_blob(self, filename: str, fault: Fault) -> None:
        self.cdn.fault(self.blob_path(filename), fault)

    def route(self, handler: _Handler, path: str, head: bool) -> bool:
        prefix = "/datasets/" if self.repo_type == "dataset" else "/"
        match = re.fullmatch(re.escape(prefix) + r"(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)", path)
        if not match:
            return False
        fault = self._take_fault(path)
        if fault is not None and fault.kind == "status":
            self.send_status(handler, fault.status, path)
            return True
        if match["repo"] != self.repo_id:
            self.send_status(handler, 401, path, {"X-Error-Code": "RepoNotFound",
                                                  "X-Error-Message": "Repository not found"})
            return True
        if match["rev"] not in (self.commit, "main"):
            self.send_status(handler, 404, path, {"X-Error-Code": "RevisionNotFound",
                                                  "X-Error-Message": "Invalid rev id"})
            return True
        name = match["file"]
        if name not in self.repo_files:
            self.send_status(handler, 404, path, {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": self.commit,
                                                  "X-Error-Message": "Entry not found"})
            return True
        data = self.repo_files[name]
        self.send_status(handler, 302, path, {
            "Location": self.cdn.url(self.blob_path(name)),
            "X-Repo-Commit": self.commit,
            "X-Linked-Etag": f'"{self.sha256[name]}"',
            "X-Linked-Size": str(len(data)),
            "ETag": f'"{git_blob_sha1(data)}"',
        })
        return True


def _flipped(body: bytes, start: int, at: int) -> bytes:
    """`body` (the file's bytes from `start`) with the 64 bytes from file offset `at` inverted: wrong bytes."""
    flipped = bytearray(body)
    for i in range(max(at - start, 0), min(at - start + 64, len(body))):
        flipped[i] ^= 0xFF
    return bytes(flipped)
