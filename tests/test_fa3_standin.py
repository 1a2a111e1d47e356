"""The FA3 stand-in as `repro` runs it (pipeline/runs/fa3_standin): what it refuses, and that the native trainer
never mistakes it for FA3. Its numerics (FlexAttention path vs its dense path) are in tests/test_sidebyside.py."""

import importlib.util
import subprocess
import sys

import pytest
import torch

from pipeline.runs.stage import FA3_STANDIN_DIR

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def load_standin():
    spec = importlib.util.spec_from_file_location("repro_fa3_standin", FA3_STANDIN_DIR / "flash_attn_interface.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def packed(T=384, H=2, hd=16, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(T, H, hd, generator=gen) for _ in range(3))
    bounds = torch.tensor([0, 37, 128, 129, 300, T, T, T], dtype=torch.int32)  # padded with T, as the record
    return q, k, v, bounds


def test_standin_refuses_what_it_does_not_implement():
    fa3 = load_standin()
    q, k, v, bounds = packed()
    with pytest.raises(NotImplementedError, match="causal"):
        fa3.flash_attn_varlen_func(q, k, v, bounds, bounds, causal=False)
    with pytest.raises(NotImplementedError, match="right window"):
        fa3.flash_attn_varlen_func(q, k, v, bounds, bounds, causal=True, window_size=(8, 8))
    with pytest.raises(NotImplementedError, match="softcap"):
        fa3.flash_attn_varlen_func(q, k, v, bounds, bounds, causal=True, softcap=1.0)


def test_native_trainer_does_not_mistake_the_standin_for_fa3():
    """With the stand-in first on the path, train.attention must still report FA3 as absent."""
    code = "import flash_attn_interface, train.attention as a; print(a.fa3_varlen is None)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": f"{FA3_STANDIN_DIR}:{FA3_STANDIN_DIR.parents[2]}", "PATH": ""})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"
