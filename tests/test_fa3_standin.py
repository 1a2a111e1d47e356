"""The FA3 stand-in (pipeline/runs/fa3_standin/flash_attn_interface.py) against a dense float32 reference.

FA3's varlen call as the record's program makes it: packed (T, H, hd) inputs, cumulative sequence starts
padded with T, causal, a left window, YaRN's softmax scale. On CPU, FlexAttention runs its reference path
in float32, so the stand-in must agree with the dense masked softmax to float32 rounding (measured ~1e-7;
the bound 1e-5 leaves room for summation order). The GPU check (bf16, compiled) is in docs/device-runs.
"""

import importlib.util
import subprocess
import sys

import pytest
import torch

from pipeline.runs.stage import FA3_STANDIN_DIR
from train.attention import _dense

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


@pytest.mark.parametrize("window", [1, 16, 100, 1000])
def test_standin_matches_dense_reference(window):
    fa3 = load_standin()
    q, k, v, bounds = packed()
    scale = 0.12
    got = fa3.flash_attn_varlen_func(q, k, v, cu_seqlens_q=bounds, cu_seqlens_k=bounds, max_seqlen_q=384,
                                     max_seqlen_k=384, causal=True, softmax_scale=scale, window_size=(window, 0))
    want = _dense(q, k, v, bounds, window, scale)
    assert got.shape == want.shape == (384, 2, 16)
    assert (got - want).abs().max().item() < 1e-5


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
