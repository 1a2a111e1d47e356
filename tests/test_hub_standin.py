"""The `kernels` hub stand-in (pipeline/runs/hub_standin/): get_kernel answered locally, FA3 through the stand-in.

Each case is a real Python subprocess with the stand-in's folder first on its path, as a run puts it; the last
is a real `repro train` of the two-file stand-in program that calls get_kernel, under torchrun.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from pipeline.runs.train_plan import FA3_STANDIN_DIR, HUB_STANDIN_DIR, TRAIN_PARENT
from tests.standin.record import NAME, multifile_program, repro, served_record, write_data

CALL = """
import torch
from kernels import get_kernel
fa3 = get_kernel({args}).flash_attn_interface
q = torch.randn(16, 2, 8)
b = torch.tensor([0, 5, 16], dtype=torch.int32)
y = fa3.flash_attn_varlen_func(q, q, q, cu_seqlens_q=b, cu_seqlens_k=b, max_seqlen_q=16, max_seqlen_k=16,
                               causal=True, softmax_scale=0.3, window_size=(3, 0))
print(fa3.REPRO_STANDIN, tuple(y.shape))
"""


def _python(code: str) -> subprocess.CompletedProcess:
    path = os.pathsep.join(map(str, (HUB_STANDIN_DIR, FA3_STANDIN_DIR, TRAIN_PARENT)))
    return subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": path},
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args", ["'kernels-community/flash-attn3', version=1", "'varunneal/flash-attention-3'",
                                  "'kernels-community/flash-attn3'"])
def test_the_fa3_repositories_records_name_are_served_through_the_flexattention_standin(args):
    done = _python(CALL.format(args=args))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "flexattention (16, 2, 8)"


@pytest.mark.parametrize("args, named", [
    ("'kernels-community/activation'", "does not serve the hub kernel 'kernels-community/activation'"),
    ("'kernels-community/flash-attn3', version=2", "not 2"),
    ("'kernels-community/flash-attn3', revision='main'", "cannot pin kernels-community/flash-attn3"),
    ("'kernels-community/flash-attn3', local_files_only=True", "does not implement get_kernel's local_files_only"),
])
def test_anything_else_is_refused_by_name(args, named):
    done = _python(CALL.format(args=args))
    assert done.returncode != 0 and "HubKernelRefused" in done.stderr and named in done.stderr


def test_another_name_of_the_package_is_refused_by_name():
    done = _python("from kernels import use_kernel_forward_from_hub")
    assert done.returncode != 0 and "implements get_kernel only, not kernels.use_kernel_forward_from_hub" in done.stderr


def test_a_record_program_calling_get_kernel_runs_on_the_standin_and_declares_it(tmp_path):
    with served_record(tmp_path, multifile_program()) as env:
        done = repro(env, "train", "--record", NAME, "--runtime", "host", "--data-dir",
                     str(write_data(tmp_path / "data", hub=True)), "--runs-dir", str(tmp_path / "runs"))
        assert done.returncode == 0, done.stdout + done.stderr
        (run,) = (tmp_path / "runs" / NAME).iterdir()
        assert "attention through flexattention: (8, 2, 4)" in (run / "stdout.txt").read_text()
        meta = yaml.safe_load((run / "run.yaml").read_text())
        assert meta["hub_standin"] is True and meta["fa3_standin"] is True
        verdict = repro(env, "verify", "--record", NAME, "--json", str(run))
    codes = [f["code"] for f in json.loads(verdict.stdout)["findings"]]
    assert "kernels.hub_standin" in codes and "attention.fa3_standin" in codes


# ---- planning: every way of reaching the hub is found, or the program is refused by name (issue 38) ----------
@pytest.mark.parametrize("source, named", [
    ("import kernels\nk = kernels.get_kernel('evil')\n", "evil"),
    ("import kernels as hub\nk = hub.get_kernel('evil/x')\n", "evil/x"),
    ("from kernels import get_kernel\nREPO = 'kernels-community/flash-attn3'\nk = get_kernel(REPO)\n",
     "not a literal string"),
    ("from kernels import get_kernel as fetch\nk = fetch('evil')\n", "evil"),
    ("from kernels import get_kernel\nfetch = get_kernel\nk = fetch('kernels-community/flash-attn3')\n",
     "used other than by calling it"),
    ("import importlib\nk = importlib.import_module('kernels').get_kernel('evil')\n", "evil"),
    ("import importlib\nhub = importlib.import_module('kernels')\nk = getattr(hub, 'get_kernel')('x')\n",
     "used other than as hub.get_kernel"),
    ("import importlib\nname = 'ker' + 'nels'\nhub = importlib.import_module(name)\n", "not a literal string"),
    ("hub = __import__('kernels')\nk = hub.get_kernel('evil')\n", "evil"),
    ("from kernels import *\nk = get_kernel('kernels-community/flash-attn3')\n", "kernels import *"),
])
def test_planning_finds_every_get_kernel_or_refuses_the_program(source, named):
    from pipeline.runs.hub_standin.kernels import FA3_REPOSITORIES
    from pipeline.runs.hub_use import hub_use
    from pipeline.runs.train_plan import imports_hub_kernels

    use = hub_use(source.encode())
    unserved = [r for r in use.repositories if r not in FA3_REPOSITORIES]
    assert any(named in text for text in use.refusals + unserved), (use.refusals, use.repositories)
    assert imports_hub_kernels(source.encode())  # whichever way it imports the hub, the stand-in is put first


def test_the_records_own_calls_are_served_without_a_refusal():
    from pipeline.runs.hub_use import hub_use

    use = hub_use(multifile_program())
    assert use.imports and use.repositories == ["kernels-community/flash-attn3"] and not use.refusals


def test_plan_refuses_a_computed_repository_by_name(tmp_path):
    from tests.test_reproduce_plan import _plan, _standin_registry

    program = multifile_program().replace(b"get_kernel('kernels-community/flash-attn3', version=1)",
                                          b"get_kernel(REPO, version=1)")
    assert program != multifile_program()
    registry, log = _standin_registry(tmp_path / "hub", program)
    plan = _plan(tmp_path, "--record", NAME, "--program-source", str(log), registry=registry)
    assert len(plan["refusals"]) == 1 and "get_kernel() with a repository that is not a literal string" in \
        plan["refusals"][0] and "line" in plan["refusals"][0], plan["refusals"]
