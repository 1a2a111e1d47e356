"""Schedules at exact steps (trainer.md section 4) and YaRN (section 1), for the record configuration.

    .venv/bin/python -m pytest -q tests/test_train_schedule.py
"""

import dataclasses
import math

import pytest
import torch

from train.config import ConfigError, TrainConfig, apply_overrides
from train.model import Yarn
from train.schedule import lr_multiplier, muon_momentum, warmup_long_window, window_blocks

CFG = TrainConfig()


@pytest.mark.parametrize("step, expected", [
    (0, 1.0), (819, 1.0), (820, 1.0),  # x = 0.5 is the first cooldown step: w = 1 still gives 1
    (821, 1 - 0.9 * (1 / 1640) / 0.5),
    (1230, 0.55),  # x = 0.75: halfway down from 1 to 0.1
    (1640, 0.1 + 0.9 * 0.0002), (1679, 0.1 + 0.9 * 0.0002),  # x capped at 0.9999
])
def test_lr_multiplier(step, expected):
    assert lr_multiplier(step, CFG) == pytest.approx(expected, abs=1e-12)


def test_lr_multiplier_is_the_records_formula_everywhere():
    for step in range(CFG.total_steps):
        x = min(0.9999, step / 1640)
        w = (1 - x) / 0.5
        assert lr_multiplier(step, CFG) == (1.0 if x < 0.5 else w * 1.0 + (1 - w) * 0.1)


@pytest.mark.parametrize("step, expected", [(0, 0.85), (150, 0.90), (300, 0.95), (301, 0.95), (1680, 0.95)])
def test_muon_momentum(step, expected):
    assert muon_momentum(step, CFG) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("step, expected", [
    (0, (1, 3)), (546, (1, 3)),  # 546 / 1641 < 1/3
    (547, (3, 7)), (1093, (3, 7)),  # 547 / 1641 = 1/3 exactly
    (1094, (5, 11)), (1640, (5, 11)), (1679, (5, 11)),  # x capped at 0.9999 through the extension
    (1680, (6, 13)),  # the final step: YaRN to 13 blocks, short window 6
])
def test_window_blocks(step, expected):
    assert window_blocks(step, CFG) == expected


def test_window_changes_happen_exactly_three_times():
    longs = [window_blocks(s, CFG)[1] for s in range(CFG.total_steps + 1)]
    changes = [(s, longs[s - 1], longs[s]) for s in range(1, len(longs)) if longs[s] != longs[s - 1]]
    assert changes == [(547, 3, 7), (1094, 7, 11), (1680, 11, 13)]
    assert CFG.ws_final_long == 20  # the final validation's long window (no YaRN step to it)


def test_warmup_cycles_every_window():
    assert [warmup_long_window(i, CFG) for i in range(7)] == [3, 7, 11, 3, 7, 11, 3]


def test_yarn_tables_and_scale_through_the_record_schedule():
    yarn = Yarn(head_dim=128, max_seq_len=4096, block_size=128)
    base = (1 / 1024) ** torch.linspace(0, 1, 32)
    assert torch.equal(yarn.angular_freq[:32], base) and (yarn.angular_freq[32:] == 0).all()
    assert yarn.cos.dtype == torch.bfloat16 and yarn.cos.shape == (4096, 64)
    assert torch.equal(yarn.cos[:, 32:], torch.ones(4096, 32, dtype=torch.bfloat16))  # zero frequencies
    theta = torch.outer(torch.arange(4096, dtype=torch.float32), yarn.angular_freq)
    assert torch.equal(yarn.sin, theta.sin().bfloat16())

    freq, scale = base.clone(), 0.1
    for old, new in [(3, 7), (7, 11), (11, 13)]:
        yarn.extend(old, new)
        rotations = 128 * old * freq / (2 * math.pi)
        weight = ((rotations - 1) / 31).clamp(0, 1)
        f = old / new
        freq = freq * (f + weight * (1 - f))
        scale *= 0.2 * math.log(new / old) + 1
        assert torch.allclose(yarn.angular_freq[:32], freq, rtol=1e-6)
        assert yarn.attn_scale == pytest.approx(scale, rel=1e-15)
    # fast frequencies (many rotations per window) are kept; the slowest are divided by new/old each time
    assert yarn.angular_freq[0].item() == base[0].item()
    assert yarn.angular_freq[31].item() == pytest.approx(base[31].item() * 3 / 13, rel=1e-5)
    assert yarn.attn_scale == pytest.approx(0.1 * (1 + 0.2 * math.log(7 / 3)) * (1 + 0.2 * math.log(11 / 7))
                                            * (1 + 0.2 * math.log(13 / 11)))
    yarn.reset()
    assert yarn.attn_scale == 0.1 and torch.equal(yarn.angular_freq[:32], base)


def test_scaled_schedule_for_short_runs():
    short = CFG.with_total_steps(160)
    assert (short.scheduled_steps, short.extension_steps, short.total_steps) == (156, 4, 160)
    assert short.muon_momentum_warmup_steps == 29
    assert window_blocks(160, short) == (6, 13) and window_blocks(159, short) == (5, 11)


def test_overrides_parse_types_and_name_bad_keys():
    cfg = apply_overrides(CFG, ["steps=160", "ws_schedule=3,5", "fp8=off", "seed=7", "val_tokens=524_288",
                                "val_batch_tokens=524288", "data_cycle=yes"])
    assert cfg == dataclasses.replace(CFG.with_total_steps(160), ws_schedule=(3, 5), fp8=False, seed=7,
                                      val_tokens=524288, val_batch_tokens=524288, data_cycle=True)
    for bad, fragment in [("fp8=maybe", "expected true/false"), ("num_layers=x", "expected an integer"),
                          ("layers=8", "unknown key"), ("num_layers", "expected key=value"),
                          ("val_tokens=1000", "multiple of val_batch_tokens"), ("attention=sdpa", "choose auto")]:
        with pytest.raises(ConfigError, match=fragment):
            apply_overrides(CFG, [bad])
    with pytest.raises(ConfigError, match="does not divide batch_slots=8"):
        CFG.grad_accum(3)
    assert [CFG.grad_accum(w) for w in (1, 2, 4, 8)] == [8, 4, 2, 1]
