"""What a campaign may be called, where it may live, and which partition names it may give Slurm.

Checked at the door, before anything is written or submitted, because these values end up in the
generated job scripts: in `#SBATCH` lines, which sbatch reads without any shell quoting (a newline there
starts a new line of the script; a space ends the option; `%` is one of Slurm's file-name patterns), and
in the job's name. Values that reach a shell line are quoted with shlex as well (slurm.py); these rules
keep the `#SBATCH` lines, which cannot be quoted, to plain words.

    campaign name (the folder's own name)  1 to 100 of  A-Z a-z 0-9 . _ -   not starting with . or -
    campaign folder (its absolute path)    at most 1000 characters, each part of the same set (and + @ , = ~)
    partition                              1 to 64 of  A-Z a-z 0-9 . _ -   (a comma-separated list of them)
    time limit                             Slurm's own format: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
"""

from __future__ import annotations

import re
from pathlib import Path

from pipeline.errors import InputError

NAME_MAX = 100
PATH_MAX = 1000
PARTITION_MAX = 64
NAME_RULE = f"1 to {NAME_MAX} letters, digits, '.', '_' or '-', not starting with '.' or '-'"
_NAME = re.compile(rf"[A-Za-z0-9_][A-Za-z0-9._-]{{0,{NAME_MAX - 1}}}")
_PATH_PART = re.compile(r"[A-Za-z0-9._+@,=~-]+")
_TIME = re.compile(r"([0-9]{1,4}-)?[0-9]{1,4}(:[0-9]{1,2}){0,2}")  # ASCII digits: \d takes '٣٠' too
_PARTITION = re.compile(rf"[A-Za-z0-9._-]{{1,{PARTITION_MAX}}}(,[A-Za-z0-9._-]{{1,{PARTITION_MAX}}})*")


def _shown(text: str, limit: int = 80) -> str:
    """The value as the error shows it: escaped (a newline as \\n) and cut, so the message stays one line."""
    shown = ascii(text)
    return shown if len(shown) <= limit else shown[:limit] + "…'"


def check_folder(folder: Path) -> Path:
    """The campaign folder as an absolute path, or InputError naming the rule it breaks."""
    text = str(folder)
    if len(text) > PATH_MAX * 4:  # not even worth resolving (a path this long is refused below anyway)
        raise InputError(f"campaign folder path is {len(text)} characters long (at most {PATH_MAX})",
                         "give a shorter --campaign path")
    try:
        absolute = Path(folder).resolve()  # what the scripts will name (a link's target, too)
    except (OSError, RuntimeError) as exc:  # RuntimeError: a loop of symbolic links
        raise InputError(f"campaign folder {_shown(text)} cannot be resolved ({exc})",
                         "give a --campaign path without a loop of symbolic links") from None
    name = absolute.name
    if not _NAME.fullmatch(name):
        raise InputError(f"campaign name {_shown(name)} ({len(name)} characters) is not allowed: a campaign's name "
                         f"is {NAME_RULE}", "give --campaign a folder named like that, e.g. campaigns/muon-11")
    if len(str(absolute)) > PATH_MAX:
        raise InputError(f"campaign folder path is {len(str(absolute))} characters long (at most {PATH_MAX}): "
                         f"{_shown(str(absolute))}", "give a shorter --campaign path")
    bad = [part for part in absolute.parts[1:] if not _PATH_PART.fullmatch(part)]
    if bad:
        raise InputError(f"campaign folder {_shown(str(absolute))}: the part {_shown(bad[0])} holds a character "
                         "Slurm's job scripts cannot carry (only letters, digits and . _ - + @ , = ~ are allowed in "
                         "each part of the path: no spaces, quotes, %, $ or control characters)",
                         "put the campaign in a folder whose path has none, e.g. --campaign campaigns/muon-11")
    return absolute


def check_partition(partition: str | None) -> str | None:
    if partition is None or _PARTITION.fullmatch(partition):
        return partition
    raise InputError(f"--partition {_shown(partition)} is not a Slurm partition name (1 to {PARTITION_MAX} letters, "
                     "digits, '.', '_' or '-'; several separated by commas)",
                     "give a partition `sinfo` lists, e.g. --partition gpu")


def check_time(value: str | None, option: str = "--time") -> str | None:
    if value is None or _TIME.fullmatch(value):
        return value
    raise InputError(f"{option} {_shown(value)} is not a Slurm time limit",
                     f"write e.g. {option} 30, 00:30:00 or 1-00:00:00")
