"""Schedules of the record (trainer.md section 4): lr multiplier, Muon momentum, attention windows, YaRN steps.

    from train.schedule import lr_multiplier, muon_momentum, window_blocks, validates
    lr_multiplier(1640, cfg)   # 0.1 (approached)      window_blocks(1680, cfg) == (6, 13)

Pure functions of the step and the config; tests/test_train_schedule.py checks them at exact steps, and
tests/test_train_loop_vs_record.py checks what the loop applies from them against the record's own loop.
"""

from train.config import TrainConfig


def lr_multiplier(step: int, cfg: TrainConfig) -> float:
    """1 for the first (1 - cooldown_frac) of the scheduled steps, then linear towards 0.1."""
    x = min(0.9999, step / cfg.scheduled_steps)
    if x < 1 - cfg.cooldown_frac:
        return 1.0
    w = (1 - x) / cfg.cooldown_frac
    return w * 1.0 + (1 - w) * 0.1


def muon_momentum(step: int, cfg: TrainConfig) -> float:
    """Linear 0.85 -> 0.95 over the first muon_momentum_warmup_steps steps."""
    frac = min(step / cfg.muon_momentum_warmup_steps, 1) if cfg.muon_momentum_warmup_steps else 1
    return (1 - frac) * 0.85 + frac * 0.95


def window_blocks(step: int, cfg: TrainConfig) -> tuple[int, int]:
    """(short, long) attention windows in blocks for the training step `step` (and its validation)."""
    if step == cfg.total_steps:
        return cfg.ws_final // 2, cfg.ws_final
    x = min(step / (1 + cfg.scheduled_steps), 0.9999)
    ws_long = cfg.ws_schedule[int(len(cfg.ws_schedule) * x)]
    return ws_long // 2, ws_long


def validates(step: int, cfg: TrainConfig) -> bool:
    """Whether the timed loop validates before training step `step`: at 0, every val_every steps and at the end."""
    return step == cfg.total_steps or (cfg.val_every > 0 and step % cfg.val_every == 0)


def warmup_long_window(i: int, cfg: TrainConfig) -> int:
    """Long window of warm-up step i: cycles through the schedule so every window size is compiled."""
    return cfg.ws_schedule[i % len(cfg.ws_schedule)]

