"""Reading a bundle's members into memory, bounded, without trusting the archive.

A hand-written tar reader over the gzip stream, because `tarfile` itself reads pax and GNU long-name
headers of any declared size into memory and, to skip an oversized member, decompresses all of it
(a 21 MB bundle holding a 20 GiB member kept it busy for over a minute). Here every size is checked
against its header *before* anything is read: a member over the member limit, members adding up to
more than the total limit, too many members, or an oversized header record stop the reading at once.

Nothing is ever written to the file system: names are only checked (absolute, `..`, backslash,
components over NAME_MAX, outside the one bundle folder, not UTF-8) and each problem is reported with
the member it concerns. Links, devices and fifos are problems too; their data is never kept.
"""

from __future__ import annotations

import gzip
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

BLOCK = 512
NAME_MAX = 255  # bytes in one path component on Linux
PATH_MAX = 4096
MAX_HEADER_RECORD = 64 << 10  # pax and GNU long-name records: a name and a few numbers, never more
MAX_MEMBERS = 20_000  # tar headers (members and their pax/long-name records)
ARCHIVE = "(archive)"  # the member name of problems that concern the whole file


@dataclass(frozen=True)
class Problem:
    member: str  # the member's name inside the bundle folder, or "(archive)"
    problem: str
    fix: str = ""

    def __str__(self) -> str:
        return f"{self.member}: {self.problem}"


@dataclass(kw_only=True)
class Members:
    top: str | None = None  # the one folder every member sits in
    files: dict[str, bytes] = field(default_factory=dict)  # name inside the folder -> bytes
    listing: list[tuple[str, int]] = field(default_factory=list)  # every member as its header names it
    problems: list[Problem] = field(default_factory=list)
    stopped: str | None = None  # why reading stopped before the end of the archive

    @property
    def complete(self) -> bool:
        return self.stopped is None


class _Malformed(Exception):
    """The byte stream is not a tar archive (bad checksum, bad number, truncated)."""


def _number(raw: bytes, what: str) -> int:
    if raw[:1] in (b"\x80", b"\xff"):  # GNU base-256, used for sizes of 8 GiB and more
        value = int.from_bytes(raw[1:], "big")
        if raw[:1] == b"\xff":
            raise _Malformed(f"negative {what} in a header")
        return value
    text = raw.split(b"\0", 1)[0].strip()
    if not text:
        return 0
    try:
        return int(text, 8)
    except ValueError:
        raise _Malformed(f"{what} field {text[:20]!r} is not an octal number") from None


def _checksum_ok(block: bytes) -> bool:
    stored = _number(block[148:156], "checksum")
    unsigned = sum(block[:148]) + 8 * 32 + sum(block[156:])
    signed = sum(b - 256 if b > 127 else b for b in block[:148] + block[156:]) + 8 * 32
    return stored in (unsigned, signed)


def _pax_records(data: bytes) -> dict[str, str]:
    """`<length> <key>=<value>\\n` records of a pax header."""
    out: dict[str, str] = {}
    pos = 0
    while pos < len(data):
        match = re.match(rb"(\d+) ", data[pos:pos + 24])
        if not match:
            if data[pos:].strip(b"\0") == b"":
                break
            raise _Malformed("a pax header record has no length")
        length = int(match.group(1))
        record = data[pos + match.end():pos + length]
        if length <= match.end() or pos + length > len(data) or not record.endswith(b"\n") or b"=" not in record:
            raise _Malformed("a pax header record is malformed")
        key, _, value = record[:-1].partition(b"=")
        out[key.decode("utf-8", "replace")] = value.decode("utf-8", "surrogateescape")
        pos += length
    return out


def name_problem(name: str) -> str | None:
    """Why a member name cannot be a bundle path, or None."""
    if any("\udc80" <= c <= "\udcff" for c in name):
        return "the name is not UTF-8"
    if "\0" in name:
        return "NUL byte in the name"
    if not name.isprintable():  # a newline would print a line of the bundle's own; ESC drives the terminal
        return "a control or format character in the name"
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return "absolute path"
    if "\\" in name:
        return "backslash in the name"
    parts = name.rstrip("/").split("/")
    if ".." in parts:
        return "'..' in the path (would escape the bundle folder)"
    if any(p in ("", ".") for p in parts):
        return "empty or '.' path component"
    if len(name.encode("utf-8", "surrogateescape")) > PATH_MAX:
        return f"the name is longer than {PATH_MAX} bytes (PATH_MAX)"
    long = next((p for p in parts if len(p.encode("utf-8", "surrogateescape")) > NAME_MAX), None)
    if long is not None:
        return f"a path component is {len(long.encode('utf-8', 'surrogateescape'))} bytes, over NAME_MAX ({NAME_MAX})"
    return None


def _visible(name: str) -> str:
    """A name as it may be printed: one whose characters are not all printable is shown escaped, as repr shows it."""
    return name if name.isprintable() else ascii(name)[1:-1]


def _type_problem(kind: bytes, linkname: str, mode: int) -> str | None:
    if kind == b"2":
        return f"symbolic link (to {linkname[:200]!r}); bundles hold only regular files"
    if kind == b"1":
        return f"hard link (to {linkname[:200]!r}); bundles hold only regular files"
    if kind in (b"3", b"4"):
        return "device file; bundles hold only regular files"
    if kind == b"6":
        return "fifo; bundles hold only regular files"
    if kind not in (b"0", b"\0", b"5", b"7"):
        return f"unsupported member type {kind.decode('latin-1')!r}"
    if mode & 0o7000:
        return f"mode {mode:o} sets setuid/setgid/sticky bits"
    return None


class _Stream:
    def __init__(self, raw):
        self.raw = raw
        self.read_bytes = 0

    def exact(self, n: int) -> bytes:
        if n < 0:  # read(-1) is the whole rest of the stream
            raise _Malformed(f"a negative size ({n}) in a header")
        data = self.raw.read(n)
        self.read_bytes += len(data)
        if len(data) != n:
            raise _Malformed("the archive ends in the middle of a member (truncated)")
        return data

    def member_data(self, size: int) -> bytes:
        data = self.exact(size)
        pad = -size % BLOCK
        if pad:
            self.exact(pad)
        return data


def read_members(path: Path, max_member_bytes: int, max_total_bytes: int,
                 max_members: int = MAX_MEMBERS) -> Members:
    """Every regular member's bytes, in memory, and a problem for every unsafe or oversized one."""
    from pipeline.regular_file import open_regular

    out = Members()
    handle = open_regular(Path(path), "bundle", "give the path of a readable .tar.gz written by `repro archive`")
    with handle, gzip.GzipFile(fileobj=handle, mode="rb") as gz:
        try:
            _Reader(stream=_Stream(gz), out=out, max_member=max_member_bytes, max_total=max_total_bytes,
                    max_members=max_members).read()
            if out.complete:
                _read_to_end(gz, out)
        except _Malformed as exc:
            out.problems.append(Problem(ARCHIVE, f"not a readable bundle: {exc}"))
            out.stopped = str(exc)
        except (EOFError, OSError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
            out.problems.append(Problem(ARCHIVE, f"not a readable tar.gz ({exc}); the file is damaged or truncated"))
            out.stopped = "the gzip stream is damaged"
    return out


TAIL_LIMIT = 1 << 20  # bytes after the end-of-archive block: tar pads to 10 KiB records, never more than that


def _read_to_end(gz: gzip.GzipFile, out: Members) -> None:
    """The rest of the stream after the end-of-archive block, so that gzip checks its trailer (CRC and length: a
    bundle cut short in its last bytes, or with bytes appended, fails here) and the padding is only zeros. Read in
    small pieces and at most TAIL_LIMIT bytes: a tail that inflates without end is stopped, not held."""
    seen = 0
    while piece := gz.read(BLOCK * 128):
        seen += len(piece)
        if piece.strip(b"\0"):
            out.problems.append(Problem(ARCHIVE, "data after the end of the archive; a bundle written by repro "
                                                 "ends with its last member"))
            out.stopped = "data after the end of the archive"
            return
        if seen > TAIL_LIMIT:
            _stop(out, ARCHIVE, f"more than {TAIL_LIMIT} bytes of padding after the end of the archive")
            return


def _stop(out: Members, member: str, problem: str, fix: str = "") -> None:
    out.problems.append(Problem(member, problem, fix))
    out.stopped = f"{member}: {problem}"


_HEADER_RECORDS = (b"x", b"g", b"L", b"K")  # pax (local, global) and GNU long name/link: not members


@dataclass(kw_only=True)
class _Reader:
    stream: _Stream
    out: Members
    max_member: int
    max_total: int
    max_members: int
    total: int = 0  # bytes of members and header records read so far, against max_total
    count: int = 0  # tar headers seen so far, against max_members
    # what pax and GNU long-name records set for the next member header only
    pending_pax: dict[str, str] = field(default_factory=dict)
    pending_long_name: str | None = None
    pending_long_link: str | None = None

    def read(self) -> None:
        """Header after header until the end of the archive or the first limit; a limit stops it via _stop."""
        while (block := self._header_block()) is not None:
            kind = block[156:157]
            size = _number(block[124:136], "size")
            self.count += 1  # header records count too: an endless run of them must stop like endless members
            if self.count > self.max_members:
                return _stop(self.out, ARCHIVE, f"more than {self.max_members} members",
                             "a bundle holds a few hundred files")
            keep_reading = self._header_record(kind, size) if kind in _HEADER_RECORDS else self._member(block, size)
            if not keep_reading:
                return

    def _header_block(self) -> bytes | None:
        """The next 512-byte header, or None at the end of the archive."""
        block = self.stream.raw.read(BLOCK)
        if not block.strip(b"\0"):
            if len(block) not in (0, BLOCK):
                raise _Malformed("the archive ends in the middle of a header (truncated)")
            if self.count == 0 and not block:
                raise _Malformed("the archive is empty")
            return None  # an end-of-archive block (or a stream that simply ends after the last member)
        if len(block) != BLOCK:
            raise _Malformed("the archive ends in the middle of a header (truncated)")
        if not _checksum_ok(block):
            raise _Malformed("a header's checksum does not match (not a tar archive, or damaged)")
        return block

    def _header_record(self, kind: bytes, size: int) -> bool:
        """Read a pax or long-name record into the pending fields; False when a limit stopped the reading."""
        if size > MAX_HEADER_RECORD:
            _stop(self.out, ARCHIVE, f"a header record declares {size} bytes, over the "
                                     f"{MAX_HEADER_RECORD}-byte limit for names and attributes")
            return False
        if self.total + size > self.max_total:
            _stop(self.out, ARCHIVE, f"members add up to more than the {self.max_total}-byte total limit "
                                     "(the rest of the archive was not read)")
            return False
        self.total += size
        data = self.stream.member_data(size)
        if kind == b"x":
            self.pending_pax = _pax_records(data)
        elif kind == b"g":
            self.out.problems.append(Problem(ARCHIVE, "a global pax header; bundles written by repro have none"))
        elif kind == b"L":
            self.pending_long_name = data.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
        else:
            self.pending_long_link = data.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
        return True

    def _member(self, block: bytes, size: int) -> bool:
        """List one member, keep its bytes if it is a safe regular file; False when a limit stopped the reading."""
        kind = block[156:157]
        name_text, link, size = self._header_names(block, size)
        mode = _number(block[100:108], "mode")
        self.pending_pax, self.pending_long_name, self.pending_long_link = {}, None, None  # this member's only
        problem, rel = self._placement(name_text, kind)
        shown = rel if problem is None and rel else _visible(name_text)
        self.out.listing.append((shown, size))
        problem = problem or _type_problem(kind, link, mode)
        if not self._within_limits(shown, size):
            return False
        self.total += size
        data = self.stream.member_data(size)
        if problem:
            self.out.problems.append(Problem(shown, problem))
        elif kind == b"5":
            pass  # a directory: listed, nothing to keep
        elif rel in self.out.files:
            self.out.problems.append(Problem(rel, "appears twice in the archive"))
        else:
            self.out.files[rel] = data
        return True

    def _header_names(self, block: bytes, size: int) -> tuple[str, str, int]:
        """The member's name, link target and size: pending pax and long-name records win over the header."""
        name = block[0:100].split(b"\0", 1)[0]
        if block[257:262] == b"ustar" and block[345:500].strip(b"\0"):
            name = block[345:500].split(b"\0", 1)[0] + b"/" + name
        pax = self.pending_pax
        name_text = pax.get("path") or self.pending_long_name or name.decode("utf-8", "surrogateescape")
        link = (pax.get("linkpath") or self.pending_long_link
                or block[157:257].split(b"\0", 1)[0].decode("utf-8", "replace"))
        if "size" in pax:  # digits only: int() would take "-1" (read to the stream's end) and "1_0"
            if not re.fullmatch(r"[0-9]{1,20}", pax["size"]):
                raise _Malformed(f"pax size {pax['size'][:20]!r} is not a size in bytes")
            size = int(pax["size"])
        return name_text, link, size

    def _placement(self, name_text: str, kind: bytes) -> tuple[str | None, str]:
        """Why the name cannot be a bundle path (or None), and the path inside the one bundle folder."""
        problem = name_problem(name_text)
        head, _, rel = name_text.rstrip("/").partition("/")
        if problem is None:
            if not rel and kind != b"5":
                problem = "a file beside, not inside, the bundle folder"
            elif self.out.top is None:
                self.out.top = head  # the first member names the folder every other one must sit in
            elif head != self.out.top:
                problem = f"outside the bundle folder {self.out.top!r}"
        return problem, rel

    def _within_limits(self, shown: str, size: int) -> bool:
        """Checked against the header before any byte is read, so an oversized member costs nothing."""
        if size > self.max_member:
            _stop(self.out, shown, f"{size} bytes, over the {self.max_member}-byte member limit (checked against "
                                   "its header before reading; the rest of the archive was not read)",
                  "if the bundle is genuine, raise --max-member-mb")
            return False
        if self.total + size > self.max_total:
            _stop(self.out, ARCHIVE, f"members add up to more than the {self.max_total}-byte total limit at "
                                     f"{shown} (the rest of the archive was not read)")
            return False
        return True
