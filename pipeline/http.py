"""The one HTTP client: bounded retries with backoff, resumable downloads, streaming sha256.

    from pipeline.http import Policy, download, fetch_bytes
    got = download(url, part_path, expected_size=3_072, policy=Policy(retries=5, max_retry_s=300))
    got.size, got.sha256                      # of the whole file on disk at part_path
    text = fetch_bytes(url, max_bytes=64 << 20)

Every download of the tool goes through here (dataset shards, the record's program log, wheels
for an environment lock), so they all behave alike:
- Transient failures (connection refused or dropped, timeouts, HTTP 408/429/5xx) are retried with
  exponential backoff and jitter from urllib3's Retry, at most Policy.retries times and for at most
  Policy.max_retry_s seconds in a row without new bytes (both reset when bytes arrive: the expected
  size bounds how often that can happen).
- A partial file is resumed with a Range request. A 206 answer whose Content-Range is missing or
  does not start where we asked is a protocol error: the file restarts from zero once, and a second
  one fails naming the server (a broken mirror must not loop until someone presses Ctrl-C).
- Nothing is written past the expected size: the caller's (from a lock), else the server's
  declared length, else what `size_from_prefix` reads from the first bytes (a shard's header), else
  Policy.max_bytes. An endless body is cut there.
- An unreachable source is a MissingDependency (exit 4); an HTTP 4xx an InputError naming the URL;
  a full disk a DiskFull naming the file.
Redirects are followed by requests, which drops Authorization when the host changes (hub tokens
never reach a storage host). URLs in messages carry no credentials and no query (pipeline/redact.py).
"""

from __future__ import annotations

import errno
import hashlib
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from urllib3.exceptions import MaxRetryError
from urllib3.util.retry import Retry

from pipeline.atomic import disk_full, write_error
from pipeline.errors import CheckFailed, InputError, Interrupted, MissingDependency, ReproError
from pipeline.redact import public_url
from pipeline.regular_file import open_regular

CHUNK = 1 << 20
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
USER_AGENT = "repro-speedrun"
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")


@dataclass(kw_only=True)
class Policy:
    retries: int = 5  # consecutive failed attempts without new bytes before giving up
    backoff_s: float = 1.0  # backoff factor: waits grow 2x per failure, with jitter
    max_backoff_s: float = 30.0
    timeout_s: float = 60.0  # connect and read timeout of one request
    max_retry_s: float = 900.0  # time spent retrying without new bytes before giving up on a file
    max_bytes: int = 8 << 30  # hard cap when no expected size is known at all
    stop: threading.Event = field(default_factory=threading.Event)  # set by Ctrl-C: stop between chunks


@dataclass(frozen=True)
class Downloaded:
    url: str  # public form: no credentials, no query
    size: int
    sha256: str
    cut_at_limit: bool  # the server had more bytes than the expected size: they were not written


@dataclass(frozen=True, kw_only=True)
class _Request:
    """What one download asks for, the same in every attempt (download()'s arguments, checked)."""

    url: str
    headers: dict
    expected_size: int | None
    size_from_prefix: Callable[[bytes], int | None] | None
    prefix_bytes: int
    policy: Policy
    progress: Callable[[int], None]


class Unreachable(MissingDependency):
    """Retries used up (or the time budget): the source could not be reached."""


class HttpRefused(InputError):
    """The server answered with an HTTP error retrying will not fix (404, 401, ...)."""

    def __init__(self, what: str, fix: str, status: int):
        super().__init__(what, fix)
        self.status = status


class ProtocolViolation(CheckFailed):
    """The server broke the HTTP contract (a malformed 206, a length it does not keep), twice."""


class _Transient(Exception):
    """One failed attempt worth retrying."""


class _Restart(Exception):
    """The server's answer cannot continue the part on disk: start the file from zero."""


def server_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}"


def session():
    """A requests session; retries are not left to the adapter: the loop below owns them (resume, budget)."""
    import requests

    s = requests.Session()
    s.headers["User-Agent"] = USER_AGENT
    s.trust_env = True  # proxies and CA bundles from the environment, as curl and pip use them
    return s


class Backoff:
    """urllib3's Retry as a schedule: how long to wait after each failure, and when to give up."""

    def __init__(self, url: str, policy: Policy):
        self.url, self.policy = url, policy
        self.reset()

    def reset(self) -> None:
        """Bytes arrived: start counting failures and retry time afresh (a download's size bounds the resets)."""
        self.first_failure: float | None = None
        self.retry = Retry(total=self.policy.retries, backoff_factor=self.policy.backoff_s,
                           backoff_max=self.policy.max_backoff_s, backoff_jitter=self.policy.backoff_s / 2)

    def failed(self, reason: str) -> None:
        """Wait before the next attempt, or raise Unreachable when retries or time are used up."""
        now = time.monotonic()
        self.first_failure = self.first_failure or now
        try:
            self.retry = self.retry.increment(method="GET", url=self.url, error=_Transient(reason))
        except MaxRetryError:
            raise Unreachable(f"{reason} (gave up after {self.policy.retries} retries without progress)",
                              "check the network or the source (another mirror: HF_ENDPOINT, --source), then "
                              "run again: partial files are kept and resumed") from None
        wait = self.retry.get_backoff_time()
        if now + wait - self.first_failure > self.policy.max_retry_s:
            raise Unreachable(f"{reason} (gave up: retrying for more than {self.policy.max_retry_s:g} s)",
                              "check the network or the source, then run again (or raise --max-retry-time): "
                              "partial files are kept and resumed")
        if self.policy.stop.wait(wait):
            raise Interrupted("download interrupted", "run the same command again to resume")


class _Part:
    """The file being downloaded (or, without a path, only its hash): its size and running sha256."""

    def __init__(self, path: Path | None):
        self.path = path
        self.digest = hashlib.sha256()
        self.size = 0
        self.handle = None
        if path is not None and path.exists():
            if path.is_dir():
                raise InputError(f"{path} is a directory where a partial download belongs",
                                 f"remove the directory {path}, then run again")
            try:
                with open(path, "rb") as f:  # hash what is already there once, then only new bytes
                    while chunk := f.read(CHUNK):
                        self.digest.update(chunk)
                        self.size += len(chunk)
            except OSError as exc:
                raise write_error(path, exc) from None

    def prefix(self, n: int) -> bytes:
        if self.path is None or not self.path.exists():
            return b""
        with open(self.path, "rb") as f:
            return f.read(n)

    def truncate(self) -> None:
        self.close()
        self.digest, self.size = hashlib.sha256(), 0
        if self.path is not None:
            self.path.unlink(missing_ok=True)

    def write(self, data: bytes) -> None:
        if self.path is not None:
            try:
                if self.handle is None:
                    self.handle = open(self.path, "ab", buffering=0)
                view = memoryview(data)
                while view:
                    view = view[self.handle.write(view):]
            except OSError as exc:
                self.close()
                if exc.errno == errno.ENOSPC:
                    self.truncate()
                    raise disk_full(self.path, "the partial download") from None
                raise write_error(self.path, exc) from None
        self.digest.update(data)
        self.size += len(data)

    def close(self) -> None:
        if self.handle is not None:
            try:
                self.handle.close()
            finally:
                self.handle = None


def _limit(want: _Request, declared: int | None, part: _Part) -> int:
    """How many bytes the whole file may have: the caller's size, the server's, the content's own, a cap."""
    if want.expected_size is not None:
        return want.expected_size
    if declared is not None:
        return min(declared, want.policy.max_bytes)
    if want.size_from_prefix is not None and part.size >= want.prefix_bytes:
        from_content = want.size_from_prefix(part.prefix(want.prefix_bytes))
        if from_content is not None:
            return min(from_content, want.policy.max_bytes)
    return want.policy.max_bytes


def _open(http, url: str, headers: dict, have: int, policy: Policy):
    """One GET (Range when resuming); returns (response, declared total or None). Raises _Transient/_Restart."""
    import requests

    send = dict(headers)
    send.setdefault("Accept-Encoding", "identity")  # the bytes as stored: their sha256 is what is checked
    if have:
        send["Range"] = f"bytes={have}-"
    try:
        response = http.get(url, headers=send, stream=True, timeout=(policy.timeout_s, policy.timeout_s))
    except requests.exceptions.InvalidURL as exc:
        raise InputError(f"{public_url(url)} is not a valid URL ({exc})", "check the source URL") from None
    except requests.exceptions.RequestException as exc:
        raise _Transient(f"cannot reach {server_of(url)} ({type(exc).__name__})") from None
    status = response.status_code
    if status == 416 and have:
        response.close()
        total = re.match(r"bytes \*/(\d+)$", response.headers.get("Content-Range") or "")
        if total and int(total[1]) == have:
            return None, have  # the part was already whole (an earlier run stopped before the rename)
        raise _Restart(f"{server_of(url)} refused to resume at byte {have} (HTTP 416)")
    if status in RETRY_STATUSES:
        response.close()
        raise _Transient(f"HTTP {status} from {server_of(url)}")
    if status >= 400 or status not in (200, 206):
        response.close()
        raise HttpRefused(f"HTTP {status} from {public_url(url)}",
                          "check the source URL (template) and that the file exists there", status)
    length = response.headers.get("Content-Length")
    length = int(length) if length and length.isdigit() else None
    if status == 200:
        return response, length  # a fresh whole body (a server that ignores Range sends this too)
    content_range = (response.headers.get("Content-Range") or "").strip()
    match = _CONTENT_RANGE.match(content_range)
    if (not match or int(match[1]) != have or int(match[2]) < int(match[1])
            or (length is not None and length != int(match[2]) - int(match[1]) + 1)
            or (match[3] != "*" and int(match[2]) >= int(match[3]))):
        response.close()
        raise _Restart(f"{server_of(url)} answered HTTP 206 with Content-Range {content_range or '(none)'!r} "
                       f"to a request for bytes {have}-")
    return response, int(match[3]) if match[3] != "*" else None


def download(url: str, part: Path | None, *, headers: dict | None = None, expected_size: int | None = None,
             size_from_prefix: Callable[[bytes], int | None] | None = None, prefix_bytes: int = 1024,
             policy: Policy | None = None, progress: Callable[[int], None] = lambda n: None,
             http=None) -> Downloaded:
    """Bring `part` to the whole file at `url` (resuming what it holds); returns its size and sha256.

    part=None hashes the bytes without keeping them (each retry then starts over).
    progress(n) is called with every n bytes written, and with -n when n bytes are discarded.
    """
    policy = policy or Policy()
    if expected_size is not None and expected_size < 0:
        raise ValueError(f"expected_size must be >= 0, got {expected_size}")
    if urlsplit(url).scheme == "file":
        return _local(url, part, expected_size, policy, progress)
    want = _Request(url=url, headers=headers or {}, expected_size=expected_size, size_from_prefix=size_from_prefix,
                    prefix_bytes=prefix_bytes, policy=policy, progress=progress)
    own_session = http is None
    http = http or session()
    state = _Part(part)
    if expected_size is not None and state.size > expected_size:
        progress(-state.size)
        state.truncate()
    try:
        return _download(want, state, http)
    finally:
        state.close()
        if own_session:
            http.close()


def _download(want: _Request, state: _Part, http) -> Downloaded:
    """Attempts until the file is whole: failures without new bytes back off, a broken range restarts once."""
    backoff = Backoff(want.url, want.policy)
    restarted = False
    while True:
        before = state.size
        try:
            return _attempt(want, state, http)
        except _Restart as exc:
            if restarted:
                raise ProtocolViolation(f"{exc}, again after starting the file over: the server breaks the "
                                        "HTTP range protocol",
                                        f"use another source than {server_of(want.url)} (a mirror that serves "
                                        "ranges correctly, or the hub)") from None
            restarted = True
            want.progress(-state.size)
            state.truncate()
        except _Transient as exc:
            if state.size > before:
                backoff.reset()  # bytes arrived: only failures without progress count
            backoff.failed(str(exc))


def _attempt(want: _Request, state: _Part, http) -> Downloaded:
    """One request continuing the part; raises _Transient or _Restart when it cannot finish the file."""
    url, expected_size = want.url, want.expected_size
    if expected_size is not None and state.size == expected_size:
        return Downloaded(public_url(url), state.size, state.digest.hexdigest(), False)
    if state.path is None and state.size:
        want.progress(-state.size)
        state.truncate()
    response, declared = _open(http, url, want.headers, state.size, want.policy)
    if response is None:
        return Downloaded(public_url(url), state.size, state.digest.hexdigest(), False)
    if response.status_code == 200 and state.size:
        want.progress(-state.size)  # the server sends everything again: start the file over
        state.truncate()
    if expected_size is not None and declared is not None and declared != expected_size:
        response.close()
        raise ProtocolViolation(f"{server_of(url)} offers {declared} bytes for {public_url(url)}, "
                                f"{expected_size} are expected",
                                "the source serves a different file: use the pinned source, or fix "
                                "the lock if it is wrong")
    cut = _stream(response, state, want, declared)
    if declared is not None and state.size < declared and not cut:
        raise _Transient(f"connection to {server_of(url)} ended at {state.size} of {declared} bytes")
    return Downloaded(public_url(url), state.size, state.digest.hexdigest(), cut)


def _stream(response, state: _Part, want: _Request, declared: int | None) -> bool:
    """Copy the body into the part, never past the limit; True when the server had more bytes than that."""
    limit = _limit(want, declared, state)
    known_from_prefix = want.expected_size is not None or declared is not None or state.size >= want.prefix_bytes
    with response:
        while True:
            if want.policy.stop.is_set():
                raise Interrupted("download interrupted", "run the same command again to resume")
            chunk = _read1(response, want.url, state.size)
            if not chunk:
                return False
            while chunk:
                # Until the size is known from the content, stop at the prefix that tells it.
                piece = chunk if known_from_prefix else chunk[:max(want.prefix_bytes - state.size, 1)]
                room = limit - state.size
                if len(piece) > room:
                    state.write(piece[:room])
                    want.progress(room)
                    return True
                state.write(piece)
                want.progress(len(piece))
                chunk = chunk[len(piece):]
                if not known_from_prefix and state.size >= want.prefix_bytes:
                    limit = _limit(want, None, state)  # expected and declared sizes are both None here
                    known_from_prefix = True


def _local(url: str, part: Path | None, expected_size, policy: Policy, progress) -> Downloaded:
    """file:// URLs (a local package index, a folder of shards): the same checks, no network."""
    from urllib.parse import unquote

    source = Path(unquote(urlsplit(url).path))
    state = _Part(None)
    try:  # a FIFO or a device behind a file:// URL is refused, never waited on
        src = open_regular(source, "file", "check the file URL")
    except ReproError as exc:
        raise HttpRefused(f"cannot read {source} ({exc.what})", "check the file URL", 404) from None
    limit = expected_size if expected_size is not None else policy.max_bytes
    writer = _Part(part) if part is not None else None
    if writer is not None:
        progress(-writer.size)
        writer.truncate()  # a local copy is cheap: always whole, never resumed
    try:
        with src:
            while chunk := src.read(min(CHUNK, limit - state.size)):
                if policy.stop.is_set():
                    raise Interrupted("copy interrupted", "run the same command again")
                if writer is not None:
                    writer.write(chunk)
                state.digest.update(chunk)
                state.size += len(chunk)
                progress(len(chunk))
            cut = bool(src.read(1))
    finally:
        if writer is not None:
            writer.close()
    return Downloaded(url, state.size, state.digest.hexdigest(), cut)


def fetch_bytes(url: str, max_bytes: int, policy: Policy | None = None, headers: dict | None = None) -> bytes:
    """A small file in memory (a run log, a JSON document), with the same retries; over max_bytes is refused."""
    policy = policy or Policy()
    with session() as http:
        return _fetch_bytes(http, url, max_bytes, policy, headers)


def _fetch_bytes(http, url: str, max_bytes: int, policy: Policy, headers: dict | None) -> bytes:
    backoff = Backoff(url, policy)
    while True:
        try:
            response, declared = _open(http, url, headers or {}, 0, policy)
            if declared is not None and declared > max_bytes:
                response.close()
                raise CheckFailed(f"{public_url(url)} is {declared} bytes, over the {max_bytes}-byte limit",
                                  "check the URL: this is not the file expected there")
            body = bytearray()
            with response:
                while chunk := _read1(response, url, len(body)):
                    body += chunk
                    if len(body) > max_bytes:
                        raise CheckFailed(f"{public_url(url)} is larger than {max_bytes} bytes",
                                          "check the URL: this is not the file expected there")
            if declared is not None and len(body) < declared:
                raise _Transient(f"connection to {server_of(url)} ended at {len(body)} of {declared} bytes")
            return bytes(body)
        except _Restart as exc:  # only possible for a Range request, which this never sends
            raise ProtocolViolation(str(exc), f"use another source than {server_of(url)}") from None
        except _Transient as exc:
            backoff.failed(str(exc))


def _read1(response, url: str, have: int) -> bytes:
    try:
        return response.raw.read1(CHUNK, decode_content=False)
    except Exception as exc:  # urllib3 and socket errors alike: the connection is gone
        if isinstance(exc, (MemoryError, KeyboardInterrupt)):
            raise
        raise _Transient(f"connection to {server_of(url)} lost after {have} bytes ({type(exc).__name__})") from None


def answers(url: str, timeout_s: float = 20.0) -> bool:
    """Whether the file at `url` is still served (HEAD, redirects followed; file:// looks at the file)."""
    import requests

    if urlsplit(url).scheme == "file":
        from urllib.parse import unquote

        return Path(unquote(urlsplit(url).path)).is_file()
    try:
        with session() as http:
            response = http.head(url, allow_redirects=True, timeout=(timeout_s, timeout_s))
            return 200 <= response.status_code < 300
    except (requests.exceptions.RequestException, ValueError):
        return False
