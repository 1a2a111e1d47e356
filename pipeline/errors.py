"""One error base class for the whole tool; the CLI maps each subclass to an exit code.

Every error says what failed and how to fix it, so a user never has to read a traceback. The exit codes
are pipeline/outcome.py's ExitCode (documented in README.md); pipeline.cli.main maps each error to its code.
"""

from __future__ import annotations

from pipeline.outcome import ExitCode


class ReproError(Exception):
    """Base class: `what` says what failed, `fix` says what the user should do about it."""

    exit_code = ExitCode.BAD_INPUT

    def __init__(self, what: str, fix: str | None = None):
        super().__init__(what)
        self.what = what
        self.fix = fix

    def __str__(self) -> str:
        return self.what if not self.fix else f"{self.what}\n  fix: {self.fix}"


class CheckFailed(ReproError):
    """A check ran to completion and its answer is no."""

    exit_code = ExitCode.CHECK_SAID_NO


class UsageError(ReproError):
    """An option that cannot work as given (a --set key the trainer does not have, options that exclude each
    other): found before anything runs, the same code as click's own usage errors."""

    exit_code = ExitCode.USAGE


class InputError(ReproError):
    """A manifest, log, file or option value is wrong."""

    exit_code = ExitCode.BAD_INPUT


class ManifestError(InputError):
    """A manifest file is malformed; names the file, the field and the fix."""

    def __init__(self, path, field: str, problem: str, fix: str):
        where = f"{path}: field '{field}'" if field else str(path)
        super().__init__(f"{where}: {problem}", fix)
        self.path = path
        self.field = field


class MissingDependency(ReproError):
    """Something the tool needs is not on this machine (a daemon, a GPU, a source)."""

    exit_code = ExitCode.MISSING


class RunFailed(ReproError):
    """A training run or an image build failed."""

    exit_code = ExitCode.RUN_FAILED


class Interrupted(ReproError):
    exit_code = ExitCode.INTERRUPTED


def os_error(path, exc: OSError, fix: str = "check the path") -> ReproError:
    """An OSError on a user's input path as a ReproError naming the path and a fix (issue 14: no tracebacks)."""
    import errno

    reasons = {errno.EACCES: ("permission denied", "make it readable (chmod/chown) or run as its owner"),
               errno.EPERM: ("permission denied", "make it readable (chmod/chown) or run as its owner"),
               errno.EISDIR: ("is a directory, not a file", "give the path of a file"),
               errno.ENOTDIR: ("a part of the path is not a directory", "check the path"),
               errno.ENAMETOOLONG: ("the name is too long for the file system", "use a shorter name"),
               errno.ENOENT: ("not found", fix),
               errno.ELOOP: ("too many levels of symbolic links", "replace the links with the file itself")}
    problem, default_fix = reasons.get(exc.errno, (exc.strerror or str(exc), fix))
    return InputError(f"{path}: {problem}", default_fix if exc.errno != errno.ENOENT else fix)
