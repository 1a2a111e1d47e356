"""A record's program as a set of files: the main program and the files its log appends after it.

    files = split_program(program)          # (ProgramFile("train_gpt.py", ...), ProgramFile("triton_kernels.py", ...))
    join_program(files) == program          # always: the split keeps every byte
    program_set_sha256(files)               # the set's own digest (names and each file's sha256, in order)

Since 2026 the program reads its other source files at start and logs each after the main one, under a
divider the program writes itself (2026-07-17_FP8DownProjection):

    <train_gpt.py> "\\n\\n" + "-"*40 + "\\n# triton_kernels.py\\n" + "-"*40 + "\\n\\n" <triton_kernels.py>

so the log's program text is exactly the files joined by that divider, and writing the pieces back as files
makes the program log the same text again. The main file is always run as train_gpt.py. A file name must be
one plain component ending in .py: it becomes a file in the run's working folder.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from pipeline.errors import CheckFailed
from pipeline.hashing import sha256_bytes

MAIN = "train_gpt.py"
RULE = b"-" * 40
_DIVIDER = re.compile(rb"\n\n" + RULE + rb"\n# ([^\n]{1,200})\n" + RULE + rb"\n\n")
_FILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}\.py$")


@dataclass(frozen=True)
class ProgramFile:
    name: str
    text: bytes

    @property
    def sha256(self) -> str:
        return sha256_bytes(self.text)

    def pin(self) -> dict:
        return {"name": self.name, "sha256": self.sha256, "bytes": len(self.text)}


def divider(name: str) -> bytes:
    return b"\n\n" + RULE + b"\n# " + name.encode() + b"\n" + RULE + b"\n\n"


def split_program(program: bytes) -> tuple[ProgramFile, ...]:
    """The files of a log's program text; one file (train_gpt.py) when it carries no divider."""
    parts = _DIVIDER.split(program)
    files = [ProgramFile(MAIN, parts[0])]
    for raw_name, text in zip(parts[1::2], parts[2::2]):
        name = raw_name.decode("utf-8", "replace")
        if not _FILE_NAME.match(name) or name == MAIN:
            raise CheckFailed(f"the program's divider names a file {name!r}, which is not a plain .py file name",
                              "use the record's unmodified log: its appended files are named like triton_kernels.py")
        if name in {f.name for f in files}:
            raise CheckFailed(f"the program carries {name} twice", "use the record's unmodified log")
        files.append(ProgramFile(name, text))
    return tuple(files)


def join_program(files: tuple[ProgramFile, ...]) -> bytes:
    """The program text a log of these files prints (the inverse of split_program)."""
    out = files[0].text
    for f in files[1:]:
        out += divider(f.name) + f.text
    return out


def program_set_sha256(files: tuple[ProgramFile, ...]) -> str:
    """The set's digest: each file's name and sha256, in the order the log carries them."""
    return sha256_bytes(json.dumps([[f.name, f.sha256] for f in files]).encode())


def program_file_pins(program: bytes) -> tuple[dict, ...]:
    """Each file's name, sha256 and size for a program of several files; () for one file or unsplittable text."""
    try:
        files = split_program(program)
    except CheckFailed:
        return ()
    return tuple(f.pin() for f in files) if len(files) > 1 else ()
