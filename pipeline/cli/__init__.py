"""The `repro` command line: thin click commands that parse, call a stage function and print.

Each subcommand lives in its own module under pipeline/cli/ and is imported only when used,
so `repro records list` never pays for torch, docker or matplotlib imports.
"""

from __future__ import annotations

import gc
import importlib
import signal
import sys
from pathlib import Path

import click

from pipeline.errors import ReproError
from pipeline.outcome import ExitCode, exit_code_of
from pipeline.plain_text import plain

# command name -> "module:attribute" (module relative to pipeline.cli)
SUBCOMMANDS = {
    "records": "records:records",
    "verify": "verify:verify",
    "data": "data:data",
    "env": "env:env",
    "preflight": "preflight:preflight",
    "train": "train:train",
    "archive": "bundle:archive",
    "bundle": "bundle:bundle",
    "report": "report:report",
    "reproduce": "reproduce:reproduce",
    "campaign": "campaign:campaign",
}


# Each command's one-line help, for `repro --help`: listing the commands must not import them (the bundle and
# verify commands pull in scipy, a second of the listing's time). tests/test_cli_speed.py holds these equal to
# the commands' own docstrings.
SUMMARIES = {
    "archive": "Bundle run directories, their environment, data lock, verdict and report into one archive.",
    "bundle": "Check or show a record bundle written by `repro archive`.",
    "campaign": "Many runs of a record on Slurm (a job array) or locally, gathered into one verified bundle.",
    "data": "Token shards: fetch (verified, resumable), verify, tokenize text, generate synthetic data.",
    "env": "The pinned container: lock, build, verify, save and load the record's environment.",
    "preflight": "Read this node (GPUs, driver, topology, runtime versions, CPU, RAM, disk, /dev/shm, Docker) and "
                 "check it against the record's hardware.",
    "records": "The records this tool knows (the registry's records/*.yaml).",
    "report": "Write a markdown summary (losses, mean, sd, p-value, times) and plots against the record's logs.",
    "reproduce": "Reproduce a record end to end and leave a verified record bundle.",
    "train": "Run training once and leave a complete run directory (runs/<record>/<run-id>/).",
    "verify": "Judge run directories or log files against a record.",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(SUBCOMMANDS)

    def format_commands(self, ctx, formatter):
        """click's listing, from SUMMARIES instead of importing every command."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = [(name, click.utils.make_default_short_help(SUMMARIES[name], limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def get_command(self, ctx, name):
        target = SUBCOMMANDS.get(name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(f"{__name__}.{module_name}")
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith(__name__):
                return None  # a stage not built yet: click reports "no such command"
            raise
        return getattr(module, attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="repro-speedrun")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder under which data/, runs/, work/, bundles/, state/ and cache/ live "
                   "[default: $REPRO_HOME, else the current directory].")
@click.option("--registry", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Manifest registry (records/, datasets/, environments/) [default: the one shipped with repro].")
@click.pass_context
def cli(ctx, root, registry):
    """Reproduce GPU training speed records and archive verified record bundles.

    Exit codes: 0 ok; 1 a check ran and said no; 2 usage; 3 bad input;
    4 missing dependency (daemon, GPU, source); 5 a run or build failed; 130 interrupted;
    141 the output's reader left (`| head`).
    """
    from pipeline.records import log_cache  # here, not at the top: `repro --help` needs none of these
    from pipeline.registry import Registry
    from pipeline.workspace import Workspace

    ctx.obj = Registry(Workspace.resolve(root=root, registry=registry))
    # what the log reader derives from a log's bytes is remembered in the workspace (each log is read once)
    log_cache.use_folder(ctx.obj.workspace.cache / "log-reader")
    ctx.call_on_close(log_cache.flush)


@cli.result_callback()
def _outcome_as_exit(result, **params):
    """A command's Outcome ends the process with its code, whether click runs standalone (tests' CliRunner)
    or under run() below."""
    code = exit_code_of(result)
    if code != ExitCode.OK:
        raise click.exceptions.Exit(code)
    return result


def _sigterm_as_ctrl_c(signum, frame):
    raise KeyboardInterrupt  # SIGTERM (a scheduler, `kill`) ends like Ctrl-C: staging removed, exit 130


def run(argv=None) -> int:
    """The command's exit code: its Outcome's, or the code of the error it raised (the one place either
    becomes the process's status; pipeline/outcome.py lists the codes)."""
    try:
        return exit_code_of(cli.main(args=argv, prog_name="repro", standalone_mode=False))
    except ReproError as exc:
        click.secho(plain(f"error: {exc}", lines=True), fg="red", err=True)  # its text may quote untrusted input
        return exc.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("interrupted", err=True)
        return ExitCode.INTERRUPTED
    except SystemExit:
        # `repro ... | head`: click meets the closed pipe (EPIPE), wraps stdout to keep the last flush quiet and
        # exits 1, the code of a check that said no. The wrapper tells that case from any other exit.
        if type(sys.stdout).__name__ == "_PacifyFlushWrapper":
            return ExitCode.OUTPUT_CLOSED
        raise
    except click.ClickException as exc:  # click's usage errors exit 2; any other of its errors is bad input
        _hint_record_option(exc)
        exc.show()
        return ExitCode.USAGE if isinstance(exc, click.UsageError) and not _bad_path(exc) else ExitCode.BAD_INPUT


def _bad_path(exc: click.ClickException) -> bool:
    """A path click refused (absent, or a file where a folder belongs): bad input (3), as the same path is where a
    command checks it itself (`bundle verify`, `data verify`), not a usage error (2)."""
    param = getattr(exc, "param", None)  # a missing argument is a BadParameter too, and a usage error
    return (isinstance(exc, click.BadParameter) and not isinstance(exc, click.MissingParameter)
            and param is not None and isinstance(param.type, click.Path))


def _hint_record_option(exc: click.ClickException) -> None:
    """`repro reproduce NAME` (as `repro records show NAME` takes it): click says only "Got unexpected extra argument
    (NAME)". Where the command takes the record as --record, its message says so."""
    ctx = getattr(exc, "ctx", None)
    if not isinstance(exc, click.UsageError) or ctx is None or "unexpected extra argument" not in exc.message:
        return
    if any("--record" in param.opts for param in ctx.command.params if isinstance(param, click.Option)):
        extra = exc.message.rsplit("(", 1)[-1].rstrip(")").split()
        exc.message += f"; the record is an option here: --record {extra[0] if extra else 'NAME'}"


# The cyclic garbage collector's first threshold, in allocations (Python's default: 700). A command that reads the
# whole history keeps a few hundred thousand objects alive (each distinct program statement's syntax tree, the
# logs' facts) and allocates millions more; at the default every full collection walked all of them again, a
# quarter of a cold `records import` (2.5 s of 9). Reference counting still frees all acyclic garbage at once.
GC_THRESHOLD = (50_000, 20, 20)


def main(argv=None):
    signal.signal(signal.SIGTERM, _sigterm_as_ctrl_c)
    gc.set_threshold(*GC_THRESHOLD)
    code = int(run(argv))
    gc.freeze()  # the collections of the interpreter's exit need not walk what is alive now: it is all freed anyway
    sys.exit(code)
