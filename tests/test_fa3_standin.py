"""The FA3 stand-in as `repro` runs it (pipeline/runs/fa3_standin): its FlexAttention path against its dense reading
of FA3's definition, what it refuses, that the native trainer never mistakes it for FA3, and the GPU check
script benchmarks/standin_check.py (its H200 numbers are in train/BENCHMARKS.md)."""

import importlib.util
import json
import subprocess
import sys

import pytest
import torch

from pipeline.runs.train_plan import FA3_STANDIN_DIR

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # FlexAttention's CPU reference path warns


# ---- numerics and refusals -------------------------------------------------------------------------------------------

def load_standin():
    spec = importlib.util.spec_from_file_location("repro_fa3_standin", FA3_STANDIN_DIR / "flash_attn_interface.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def packed(bounds: list[int], T: int = 384, H: int = 2, hd: int = 16, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(T, H, hd, generator=gen) for _ in range(3))
    cu = torch.full((16,), T, dtype=torch.int32)
    cu[: len(bounds)] = torch.tensor(bounds)
    return q, k, v, cu


@pytest.mark.parametrize("window", [0, 1, 16, 100, 1000, -1])
@pytest.mark.parametrize("bounds", [[0, 37, 128, 129, 300], [0, 0, 200, 201]], ids=["train", "val-bos-first"])
def test_standin_flex_path_matches_its_dense_path(window, bounds):
    """The CUDA path (train/'s FlexAttention) run on CPU against the stand-in's own dense reading of FA3: both
    float32, so they agree to summation order (measured <= 5e-7; bound 1e-5)."""
    fa3 = load_standin()
    q, k, v, cu = packed(bounds)
    kwargs = dict(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=384, max_seqlen_k=384, causal=True,
                  softmax_scale=0.12, window_size=(window, 0))
    fa3.BACKEND = "dense"
    want = fa3.flash_attn_varlen_func(q, k, v, **kwargs)
    fa3.BACKEND = "flex"
    got = fa3.flash_attn_varlen_func(q, k, v, **kwargs)
    assert got.shape == want.shape == (384, 2, 16)
    assert (got - want).abs().max().item() < 1e-5


def test_standin_dense_path_is_fa3s_definition():
    """One query by hand: t = 150 in the document [129, 300) with window 16 sees keys 134..150 only."""
    fa3 = load_standin()
    fa3.BACKEND = "dense"
    q, k, v, cu = packed([0, 37, 128, 129, 300])
    out = fa3.flash_attn_varlen_func(q, k, v, cu, cu, causal=True, softmax_scale=0.5, window_size=(16, 0))
    keys = torch.arange(134, 151)
    w = torch.softmax(torch.einsum("hd,khd->hk", q[150], k[keys]) * 0.5, dim=-1)  # (H, 17)
    assert torch.allclose(out[150], torch.einsum("hk,khd->hd", w, v[keys]), atol=1e-6)
    assert torch.allclose(out[129], v[129], atol=1e-6)  # a document's first token sees only itself


def test_standin_refuses_what_it_does_not_implement():
    fa3 = load_standin()
    q, k, v, cu = packed([0, 100])
    with pytest.raises(NotImplementedError, match="causal"):
        fa3.flash_attn_varlen_func(q, k, v, cu, cu, causal=False)
    with pytest.raises(NotImplementedError, match="right window"):
        fa3.flash_attn_varlen_func(q, k, v, cu, cu, causal=True, window_size=(8, 8))
    with pytest.raises(NotImplementedError, match="softcap"):
        fa3.flash_attn_varlen_func(q, k, v, cu, cu, causal=True, softcap=1.0)
    with pytest.raises(NotImplementedError, match="same sequence bounds"):
        fa3.flash_attn_varlen_func(q, k, v, cu, cu.flip(0).contiguous(), causal=True)


def test_native_trainer_does_not_mistake_the_standin_for_fa3():
    """With the stand-in first on the path, train.attention must still report FA3 as absent."""
    code = "import flash_attn_interface, train.attention as a; print(a.fa3_varlen is None)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": f"{FA3_STANDIN_DIR}:{FA3_STANDIN_DIR.parents[2]}", "PATH": ""})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


# ---- benchmarks/standin_check.py (its GPU numbers are in train/BENCHMARKS.md) ------------------------------------

def test_standin_check_runs_on_cpu_and_fails_a_wrong_window(tmp_path, monkeypatch):
    from benchmarks import standin_check
    from train import attention

    args = ["--device", "cpu", "--tokens", "512", "--heads", "2", "--head-dim", "16", "--no-compile"]
    assert standin_check.main(args + ["--out", str(tmp_path / "ok")]) == 0
    result = json.loads((tmp_path / "ok" / "standin_check.json").read_text())
    assert [c["window"] for c in result["checks"]] == [128, 384, 640, 896, 1408, 1664, 2560]
    assert all(0 < c["out"] <= standin_check.BOUND for c in result["checks"])  # bf16 inputs: never exact
    flex = attention.flex_attention_varlen
    monkeypatch.setattr(attention, "flex_attention_varlen",
                        lambda q, k, v, bounds, window, scale: flex(q, k, v, bounds, window + 64, scale))
    assert standin_check.main(args + ["--out", str(tmp_path / "off")]) == 1  # a window 64 tokens too wide
