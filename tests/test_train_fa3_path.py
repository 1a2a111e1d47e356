"""Native's FA3 path on CPU: what the timed loop hands `flash_attn_varlen_func`, in training and in validation.

    .venv/bin/python -m pytest -q tests/test_train_fa3_path.py

No device run has executed native's FA3 path (the runs so far used FlexAttention), and FA3 trusts its arguments:
a `max_seqlen` below the longest packed sequence gives wrong attention without an error. So train.attention's
`fa3_varlen` is the project's FA3 stand-in (pipeline/runs/fa3_standin, its dense CPU reading of FA3, which refuses
any argument FA3's call in the record does not make), wrapped to record each call, and a real tiny model runs
train.loop.timed_run on it. Each forward must pass what the record's program passes
(`max_len = args.train_max_seq_len if self.training else args.val_batch_size // (grad_accum_steps * world_size)`):
the training cap in training, validation's own micro-batch length in validation, and never less than the longest
sequence of its batch. The config makes the two differ (training documents cut at 32 tokens, validation slices of
256 tokens with documents up to 256 long).
"""

from __future__ import annotations

import importlib.util

import pytest
import torch

import train.attention as attention_module
from pipeline.runs.train_plan import FA3_STANDIN_DIR
from tests.test_train_data import write_corpus
from train.config import apply_overrides, preset
from train.log import RunLog
from train.loop import AttnArgs, DistEnv, Run, build_optimizers, timed_run
from train.model import GPT

CPU = torch.device("cpu")


def fa3_standin():
    spec = importlib.util.spec_from_file_location("repro_fa3_standin", FA3_STANDIN_DIR / "flash_attn_interface.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.flash_attn_varlen_func


@pytest.fixture
def cfg(tmp_path):
    train_glob, val_glob = write_corpus(tmp_path / "corpus")
    return apply_overrides(preset("tiny"), [
        f"train_files={train_glob}", f"val_files={val_glob}", "seed=0", "attention=fa3", "train_max_seq_len=32",
        "val_batch_tokens=1024", "val_tokens=1024", "scheduled_steps=1", "extension_steps=0", "warmup_steps=0"])


def test_validation_passes_its_own_max_seqlen_to_fa3_and_training_its_own(cfg, monkeypatch):
    standin, calls = fa3_standin(), []
    torch.manual_seed(0)
    model = GPT(cfg, attention_backend="fa3", fp8=False)

    def recording_fa3(q, k, v, **kwargs):
        bounds = kwargs["cu_seqlens_q"]
        calls.append(dict(training=model.training, tokens=q.size(0), longest=int((bounds[1:] - bounds[:-1]).max()),
                          max_q=kwargs["max_seqlen_q"], max_k=kwargs["max_seqlen_k"]))
        return standin(q, k, v, **kwargs)

    monkeypatch.setattr(attention_module, "fa3_varlen", recording_fa3)
    adam, muon = build_optimizers(model, cfg)
    grad_accum = cfg.grad_accum(1)
    run = Run(cfg=cfg, env=DistEnv(0, 0, 1, CPU), model=model, forward=model, adam=adam, muon=muon,
              attn_args=AttnArgs("fa3", cfg.block_size, CPU),
              log=RunLog(None, None, enabled=False), grad_accum=grad_accum)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the trainer does on CPU: small ops, shared cores
    try:
        timed_run(run)
    finally:
        torch.set_num_threads(threads)

    training = [c for c in calls if c["training"]]
    validation = [c for c in calls if not c["training"]]
    layers = sum(b.attn is not None for b in model.blocks[1:])  # the forward pass starts at block 1
    val_micro_steps = grad_accum * cfg.val_tokens // cfg.val_batch_tokens
    assert len(training) == grad_accum * layers and len(validation) == 2 * val_micro_steps * layers
    assert cfg.val_tokens_per_slot == 256 != cfg.train_max_seq_len == 32
    assert {(c["tokens"], c["max_q"], c["max_k"]) for c in training} == {(128, 32, 32)}
    assert {(c["tokens"], c["max_q"], c["max_k"]) for c in validation} == {(256, 256, 256)}
    assert all(c["longest"] <= c["max_q"] for c in calls)
    assert max(c["longest"] for c in validation) > cfg.train_max_seq_len  # the training cap would be too short
