"""Stand-in for the Hugging Face `kernels` package, for the record programs that take FA3 from the kernels hub.

    from kernels import get_kernel                                                     (as the 2026 records do)
    flash_attn_interface = get_kernel('kernels-community/flash-attn3', version=1).flash_attn_interface

A hub kernel is fetched at run time from an unpinned snapshot and needs a build for the node's exact torch,
CUDA and architecture (upstream issues #145, #176, #198), so repro never lets a record's program reach the hub:
its folder is put first on the program's path and this module answers `get_kernel` for the FA3 repositories
the records name. The kernel it returns is `flash_attn_interface` as this Python imports it: FA3 itself where it
is installed, else repro's FlexAttention stand-in (pipeline/runs/fa3_standin/, put on the path by the run), and
the run declares which. Any other repository, version, option or name of the package is refused by name.
"""

import importlib

REPRO_STANDIN = "kernels-hub"
# repository -> the versions records ask for (None: no version given)
FA3_REPOSITORIES = {"kernels-community/flash-attn3": (None, 1), "varunneal/flash-attention-3": (None,)}
ACCEPTED_OPTIONS = ("revision", "version", "trust_remote_code", "user_agent")


class HubKernelRefused(ImportError):
    """A hub kernel or feature this stand-in does not serve: named, never replaced by something else."""


class Kernel:
    """What `get_kernel` returns: the FA3 interface under the attribute records read, and its functions."""

    def __init__(self, repository: str, interface):
        self.repository = repository
        self.flash_attn_interface = interface

    def __getattr__(self, name):  # get_kernel(...).flash_attn_varlen_func, as some programs call it
        return getattr(self.flash_attn_interface, name)


def get_kernel(repo_id, revision=None, version=None, **options):
    unknown = sorted(set(options) - set(ACCEPTED_OPTIONS))
    if unknown:
        raise HubKernelRefused(f"repro's kernels stand-in does not implement get_kernel's {', '.join(unknown)}")
    if repo_id not in FA3_REPOSITORIES:
        raise HubKernelRefused(f"repro's kernels stand-in does not serve the hub kernel {repo_id!r}: only "
                               f"{', '.join(sorted(FA3_REPOSITORIES))} (FA3). Add a local implementation of "
                               "it to pipeline/runs/hub_standin/, or run where the program's own hub works")
    if version not in FA3_REPOSITORIES[repo_id]:
        raise HubKernelRefused(f"repro's kernels stand-in serves {repo_id} at version "
                               f"{' or '.join(str(v) for v in FA3_REPOSITORIES[repo_id] if v)} or none, not {version}")
    if revision is not None:
        raise HubKernelRefused(f"repro's kernels stand-in cannot pin {repo_id} to revision {revision!r}: it serves "
                               "the FA3 installed here or the FlexAttention stand-in")
    return Kernel(repo_id, importlib.import_module("flash_attn_interface"))


def __getattr__(name):
    raise HubKernelRefused(f"repro's kernels stand-in implements get_kernel only, not kernels.{name}")
