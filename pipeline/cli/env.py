"""`repro env list|lock|build|verify|venv|save|load|compare|check-dockerfile`: the pinned environment.

    repro env lock   [--env NAME] [--wheelhouse DIR] [--from-pypi]   resolve pins -> <env>.lock.yaml
    repro env build  [--env NAME] [--wheelhouse DIR] [--no-cache]    image + state/image.json
    repro env verify [--env NAME] [--image ID]                       versions inside vs the lock
    repro env venv   [--env NAME] [--wheelhouse DIR | --index-url URL] [--python PATH] [--build-fa3]
                                                                     the lock as a virtualenv (host runtime)
    repro env save OUT.tar[.gz] / repro env load IN.tar[.gz]         image <-> tarball (+ .sha256)

--env defaults to the environment of the default record (2025-09-23_MuonCustomSizing). A fallback
environment is chosen by name and every use of it prints its deviations from the record.
"""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.errors import CheckFailed, InputError, ManifestError

from .output import echo, emit_json, pass_registry, pass_workspace, secho

ENV_OPTION = click.option("--env", "env_name", default=None, metavar="NAME",
                          help="Environment (manifests/environments/NAME.yaml); default: the default record's.")
JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print JSON.")
WHEELHOUSE_OPTION = click.option("--wheelhouse", type=click.Path(file_okay=False, path_type=Path), default=None,
                                 help="Folder of the lock's files: lock fills it, build installs from it offline.")


def _env_name(registry, name: str | None) -> str:
    return name or registry.default_environment().name


def _say(as_json: bool):
    return (lambda line: None) if as_json else echo


def _deviations(findings) -> None:
    """Each deviation finding as its sentence, on stderr (stdout stays the command's result)."""
    from pipeline.verdict.render import render

    for finding in findings:
        secho(f"DEVIATION: {render(finding)}", fg="yellow", err=True)


@click.group()
def env():
    """The pinned container: lock, build, verify, save and load the record's environment."""


@env.command("list")
@JSON_OPTION
@pass_workspace
def list_(ws, as_json):
    """Environments and whether each has a complete lock."""
    from pipeline.env.lock import load_lock
    from pipeline.env.manifest import environment_names, load_environment

    rows = []
    for name in environment_names(ws):
        e = load_environment(ws, name)
        try:
            lock = load_lock(e)
            unknown = lock.unknown_entries()
            state = "stale" if lock.manifest_sha256 != e.manifest_sha256 else (
                f"{len(unknown)} unknown entries" if unknown else "complete")
        except ManifestError:  # a lock that is there but does not read is no "not locked": name it and the fix
            raise
        except InputError:
            state = "not locked"
        rows.append({"name": name, "record": e.record, "lock": state, "deviations": list(e.deviations())})
    if as_json:
        emit_json(rows)
        return
    for row in rows:
        flag = "  (deviates from the record)" if row["deviations"] else ""
        echo(f"{row['name']:24} record {row['record'] or '-':30} lock: {row['lock']}{flag}")


@env.command()
@ENV_OPTION
@WHEELHOUSE_OPTION
@click.option("--from-pypi", is_flag=True,
              help="Take each file's sha256 from PyPI's listing instead of downloading it (PyPI-only environments).")
@JSON_OPTION
@pass_registry
def lock(registry, env_name, wheelhouse, from_pypi, as_json):
    """Resolve the environment's pins to exact URLs + sha256 (needs the environment's package indexes)."""
    from pipeline.env.lock import resolve_lock

    environment = registry.environment(_env_name(registry, env_name))
    result = resolve_lock(environment, wheelhouse=wheelhouse, log=_say(as_json), from_pypi=from_pypi)
    if as_json:
        emit_json({"lock": str(result.path), "sha256": result.sha256, "packages": result.packages,
                   "build_packages": result.build_packages, "bases": result.bases,
                   "deviations": result.deviations})
        return
    _deviations(result.deviations)
    echo(f"wrote {result.path} ({len(result.packages)} packages, sha256 {result.sha256})")


@env.command()
@ENV_OPTION
@WHEELHOUSE_OPTION
@click.option("--no-cache", is_flag=True, help="Rebuild every step.")
@click.option("--tag", default=None, help="Image tag (default repro/<env>:<lock sha256 prefix>).")
@click.option("--max-jobs", type=int, default=None, help="Parallel compile jobs for FA3 (default: CPU count).")
@JSON_OPTION
@pass_registry
def build(registry, env_name, wheelhouse, no_cache, tag, max_jobs, as_json):
    """Build the image from the lock through the Docker SDK; records state/image.json."""
    from pipeline.env.build import build_image

    result = build_image(registry.workspace, _env_name(registry, env_name), wheelhouse=wheelhouse, nocache=no_cache,
                         tag=tag, max_jobs=max_jobs, log=_say(as_json))
    if as_json:
        emit_json(result)
        return
    _deviations(result.deviations)  # the lock's: what this image does not share with the record
    echo(f"image {result.image_id}\n  tag {result.tag}\n  lock sha256 {result.lock_sha256}\n"
         f"  {len(result.layers)} layers, {result.steps} steps, {result.seconds} s\n  state {result.state_path}")


@env.command()
@ENV_OPTION
@click.option("--image", default=None, help="Image id or tag (default: the one in state/image.json).")
@JSON_OPTION
@pass_workspace
def verify(ws, env_name, image, as_json):
    """Run the image and compare Python, torch, triton, FA3, CUDA and packages with the lock."""
    from pipeline.env.verify import verify_image

    report = verify_image(ws, env_name, image)
    if as_json:
        emit_json({"ok": report.ok, **report.__dict__, "checks": report.checks})
    else:
        echo(f"image {report.image_id} against {report.environment} (lock {report.lock_sha256[:12]})")
        for c in report.checks:
            mark = "ok  " if c.ok else "DIFF"
            echo(f"  {mark} {c.component:28} expected {c.expected:20} found {c.found}")
        _deviations(report.deviations)
    if not report.ok:
        names = ", ".join(c.component for c in report.mismatches)
        raise CheckFailed(f"image {report.image_id[:19]} does not match the lock of {report.environment}: {names}",
                          "rebuild with `repro env build`, or re-lock if the environment changed on purpose")


@env.command()
@click.option("--env", "env_name", default=None, metavar="NAME",
              help="Environment to build it from. Default: chosen for the record (its own, else its declared "
                   "fallback; an unresolved lock is resolved on this node), every deviation shown.")
@click.option("--record", "record_name", default=None, metavar="NAME", help="Record whose environment is chosen "
              "when --env is not given [2025-09-23_MuonCustomSizing].")
@WHEELHOUSE_OPTION
@click.option("--index-url", default=None, metavar="URL",
              help="Install the locked files from this index (a mirror) instead of the lock's URLs; hashes decide.")
@click.option("--python", "python", default=None, metavar="PATH",
              help="Base interpreter (default: python<version> of the environment on PATH).")
@click.option("--build-fa3", is_flag=True,
              help="Without a flash_attn wheel in --wheelhouse: compile FA3's pinned source once (needs nvcc).")
@JSON_OPTION
@pass_registry
def venv(registry, env_name, record_name, wheelhouse, index_url, python, build_fa3, as_json):
    """Build (or reuse) a virtualenv from the lock, hashes enforced, for `--runtime host`."""
    from pipeline.env.lock import load_lock
    from pipeline.env.venv import build_venv

    ws, choice = registry.workspace, None
    if env_name is not None:
        environment = registry.environment(env_name)
        lock = load_lock(environment)
    else:
        from pipeline.env.choose import choose_environment

        record = registry.record_or_default(record_name)
        say = (lambda line: echo(line, err=True)) if as_json else echo
        choice = choose_environment(ws, record, ws.work / record.name, wheelhouse=wheelhouse, say=say)
        environment, lock = choice.environment, choice.lock
    identity = build_venv(ws, environment, lock, wheelhouse=wheelhouse, index_url=index_url, python=python,
                          build_fa3_from_source=build_fa3, log=_say(as_json))
    if as_json:
        emit_json({**identity.to_dict(), "choice": choice.to_dict() if choice else None})
        return
    if choice is not None:
        _deviations(choice.deviations)
    _deviations(identity.deviations)
    echo(f"venv {identity.key} ({'reused' if identity.reused else 'built'})\n  python {identity.python} "
         f"(Python {identity.python_version})\n  lock sha256 {identity.lock_sha256}\n"
         f"  use it: repro train --runtime host --venv {identity.path}")


@env.command()
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--image", default=None, help="Image id or tag (default: the one in state/image.json).")
@JSON_OPTION
@pass_workspace
def save(ws, out, image, as_json):
    """Write the image as a tarball (gzip if OUT ends in .gz) and OUT.sha256."""
    from pipeline.env.image import save_image

    saved = save_image(out, image, state_directory=ws.state)
    if as_json:
        emit_json(saved)
        return
    echo(f"saved {saved.image_id} to {saved.path} ({saved.bytes / 1e6:.1f} MB)\n  sha256 {saved.sha256}")


@env.command()
@click.argument("tarball", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--sha256", "sha256", default=None, help="Expected sha256 (default: read TARBALL.sha256).")
@JSON_OPTION
@pass_workspace
def load(ws, tarball, sha256, as_json):
    """Check a saved tarball's sha256, load it, and record it in state/image.json."""
    from pipeline.env.image import load_image

    state = load_image(tarball, sha256, state_directory=ws.state)
    if as_json:
        emit_json(state)
        return
    echo(f"loaded {state.image_id} (environment {state.environment or '?'}, "
         f"lock {state.lock_sha256[:12] or '?'})")
    _deviations(state.deviations)


@env.command()
@click.argument("image_a")
@click.argument("image_b")
@JSON_OPTION
def compare(image_a, image_b, as_json):
    """What differs between two images (config fields; layer files: bytes vs metadata)."""
    from pipeline.env.compare import compare_images, describe

    diff = compare_images(image_a, image_b)
    if as_json:
        emit_json({"identical": diff.identical, "layers_identical": diff.layers_identical, **diff.__dict__})
        return
    echo("\n".join(describe(diff)))


@env.command("check-dockerfile")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path), default=None, required=False)
@click.option("--build-arg", "build_args", multiple=True, metavar="NAME=VALUE", help="As the build would pass.")
@JSON_OPTION
@pass_workspace
def check_dockerfile_(ws, path, build_args, as_json):
    """Every FROM pinned by digest, every install pinned (pip hashes, apt versions or snapshot, git commits)."""
    from pipeline.env.dockerfile_policy import check_dockerfile

    args = {}
    for item in build_args:
        name, sep, value = item.partition("=")
        if not sep:
            raise InputError(f"--build-arg {item!r} has no '='", "write --build-arg NAME=VALUE")
        args[name] = value
    report = check_dockerfile(path or ws.docker_dir / "Dockerfile", args)
    if as_json:
        emit_json({"ok": report.ok, **report.__dict__})
    else:
        for v in report.violations:
            echo(f"{report.path}:{v.line}: {v.instruction}: {v.problem}\n  fix: {v.fix}")
        echo(f"{report.path}: {report.instructions_checked} instructions, "
             f"{len(report.violations)} violation(s); bases: {', '.join(report.base_images) or '-'}")
    if not report.ok:
        raise CheckFailed(f"{report.path} has {len(report.violations)} unpinned instruction(s)",
                          "pin each as the messages above say")
