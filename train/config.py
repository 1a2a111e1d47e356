"""Training configuration: one frozen dataclass, three presets, `--set key=value` overrides.

    python -m train --preset tiny --set num_layers=8 --set fp8=false ...   (see train/__main__.py)
    from train.config import preset, apply_overrides
    cfg = apply_overrides(preset("record"), ["val_tokens=524288", "data_cycle=true"])

`record` is everything of the 2025-09-23 record (trainer.md); `tiny` is for CPU tests; `demo` runs in about a
minute on two CPU cores and its loss falls clearly on generated data.

Layer topology for other depths (the record's 12 layers are the case L = 12 of these rules):
  - block 0 is empty (no attention, no MLP); the forward pass starts at block 1;
  - block L/2 + 1 has no attention (block 7 of 12), every other block from 1 on has attention and an MLP;
  - value embeddings ve1, ve2 feed blocks 1, 2 and ve0, ve1, ve2 feed the last three blocks;
  - the long window is used by blocks L/3 and L - 1 (4 and 11 of 12), all other attention uses the short one;
  - U-net: the outputs of blocks 1 .. L/2 - 1 are pushed, and popped (last in, first out) before blocks
    L/2 .. L - 2, weighted by sigmoid(s[i - L/2]).
Hence L must be even and at least 6 (three value-embedded blocks at the end must not overlap the first two).
"""

import dataclasses
import typing
from dataclasses import dataclass


class ConfigError(ValueError):
    """A configuration value is wrong; the message names the key and what to do."""


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    # model (head_dim = model_dim // num_heads)
    vocab_size: int = 50257  # GPT-2; the embeddings and head are padded to the next multiple of 128
    num_layers: int = 12
    model_dim: int = 768
    num_heads: int = 6
    # data: one step = train_batch_tokens tokens cut into batch_slots (rank, micro-step) slots, so each rank runs
    # grad_accum = batch_slots / world_size micro-steps of train_batch_tokens / batch_slots tokens at any world size
    train_files: str = "data/fineweb10B/fineweb_train_*.bin"
    val_files: str = "data/fineweb10B/fineweb_val_*.bin"
    train_batch_tokens: int = 2048 * 24 * 8
    batch_slots: int = 8
    train_max_seq_len: int = 2048
    val_batch_tokens: int = 4 * 64 * 1024 * 8
    val_tokens: int = 10_485_760
    data_cycle: bool = False  # start the training files again when they run out (small data sets only)
    # schedule
    scheduled_steps: int = 1640
    extension_steps: int = 40
    cooldown_frac: float = 0.5
    val_every: int = 125  # 0: only at the end
    block_size: int = 128  # tokens per window block
    ws_schedule: tuple[int, ...] = (3, 7, 11)  # long window in blocks over the thirds of training
    ws_final: int = 13  # window (blocks) of the final step's YaRN; the short window is half of it
    ws_final_long: int = 20  # long window of the final validation (no further YaRN)
    muon_momentum_warmup_steps: int = 300
    warmup_steps: int = 30  # untimed compile warm-up, undone before the timed run
    # optimizers
    adam_lr: float = 0.008
    muon_lr: float = 0.05
    embed_lr_mul: float = 75.0
    head_lr_mul: float = 1.0
    scalar_lr_mul: float = 5.0
    # systems
    fp8: bool = True  # FP8 head on CUDA; also off when the environment sets DISABLE_FP8=1
    bf16: bool = True  # embeddings and linear layers in bf16 (the record); false keeps the model in fp32 (tests)
    compile: bool = True
    attention: str = "auto"  # auto | fa3 | flex | dense
    # optional kernels (train/kernels.py swaps them in; what each was measured to buy: train/BENCHMARKS.md,
    # "The options' measurements"). fused_loss: the loss and its gradient in the forward pass (train/loss.py), on
    # CUDA by train/xent_triton.py's kernels
    fused_loss: bool = True
    # with fused_loss and fp8 on CUDA (ignored otherwise): the loss's second pass also writes dW's transposed FP8
    # gradient, in place of a copy that reads it back; both FP8 gradients live until the backward pass
    fused_loss_transpose: bool = True
    seed: int | None = None  # None: a seed drawn per run and logged (train/loop.py says why); tests set one

    # ---- derived sizes -------------------------------------------------------------------------------
    @property
    def head_dim(self) -> int:
        return self.model_dim // self.num_heads

    @property
    def padded_vocab(self) -> int:
        return -(-self.vocab_size // 128) * 128

    @property
    def total_steps(self) -> int:
        return self.scheduled_steps + self.extension_steps

    @property
    def train_tokens_per_slot(self) -> int:
        return self.train_batch_tokens // self.batch_slots

    @property
    def val_tokens_per_slot(self) -> int:
        return self.val_batch_tokens // self.batch_slots

    @property
    def rotary_len(self) -> int:
        """Positions the rotary tables cover: the longest micro-batch of one rank."""
        return max(self.train_batch_tokens, self.val_batch_tokens) // self.batch_slots

    def grad_accum(self, world_size: int) -> int:
        if world_size < 1 or self.batch_slots % world_size:
            raise ConfigError(
                f"world size {world_size} does not divide batch_slots={self.batch_slots}: every rank must run a "
                f"whole number of micro-steps. Use a world size that divides {self.batch_slots}, or "
                f"--set batch_slots=<a multiple of {world_size}> (this changes the per-rank micro-batch)")
        return self.batch_slots // world_size

    def validate(self) -> "TrainConfig":
        """Raise ConfigError naming the first inconsistent key; return self."""
        def need(ok: bool, msg: str) -> None:
            if not ok:
                raise ConfigError(msg)

        need(self.num_layers >= 6 and self.num_layers % 2 == 0,
             f"num_layers={self.num_layers}: the layer topology needs an even number >= 6")
        need(self.num_heads >= 1 and self.model_dim % self.num_heads == 0,
             f"model_dim={self.model_dim} must be a multiple of num_heads={self.num_heads}")
        need(self.head_dim % 4 == 0, f"head_dim={self.head_dim} must be a multiple of 4 (half-truncated RoPE)")
        need(self.model_dim >= 12, "model_dim must be >= 12: the gates read the first 12 channels")
        need(self.vocab_size > 50256, "vocab_size must exceed 50256: the data's BOS token is 50256")
        for key in ("train_batch_tokens", "val_batch_tokens"):
            value = getattr(self, key)
            need(value > 0 and value % self.batch_slots == 0,
                 f"{key}={value} must be a positive multiple of batch_slots={self.batch_slots}")
        need(self.val_tokens > 0 and self.val_tokens % self.val_batch_tokens == 0,
             f"val_tokens={self.val_tokens} must be a positive multiple of val_batch_tokens="
             f"{self.val_batch_tokens}: set both, e.g. --set val_tokens=524288 --set val_batch_tokens=524288")
        need(self.train_max_seq_len >= 2, "train_max_seq_len must be >= 2")
        need(self.scheduled_steps >= 1 and self.extension_steps >= 0, "scheduled_steps >= 1, extension_steps >= 0")
        need(0 < self.cooldown_frac <= 1, f"cooldown_frac={self.cooldown_frac} must be in (0, 1]")
        need(self.val_every >= 0, "val_every must be >= 0 (0: validate only at the end)")
        need(len(self.ws_schedule) >= 1 and all(w >= 1 for w in self.ws_schedule),
             "ws_schedule needs at least one window size >= 1 (blocks), e.g. ws_schedule=3,7,11")
        need(self.ws_final >= 1 and self.ws_final_long >= 1 and self.block_size >= 1,
             "ws_final, ws_final_long and block_size must be >= 1")
        need(self.warmup_steps >= 0 and self.muon_momentum_warmup_steps >= 0, "warm-up step counts must be >= 0")
        need(self.attention in ("auto", "fa3", "flex", "dense"),
             f"attention={self.attention!r}: choose auto, fa3, flex or dense")
        return self

    def with_total_steps(self, total: int) -> "TrainConfig":
        """The record's schedule scaled to `total` steps (scheduled, extension and Muon warm-up in proportion)."""
        if total < 2:
            raise ConfigError(f"--steps {total}: need at least 2 steps")
        record = TrainConfig()
        scheduled = max(1, round(record.scheduled_steps * total / record.total_steps))
        return dataclasses.replace(
            self, scheduled_steps=scheduled, extension_steps=total - scheduled,
            muon_momentum_warmup_steps=round(record.muon_momentum_warmup_steps * total / record.total_steps))


PRESETS: dict[str, dict] = {
    "record": {},
    # CPU presets keep fp32: CPUs without native bf16 (AVX2-only AMD EPYC) run bf16 matmuls far slower. They
    # leave fused_loss off: without the GPU kernels, eager, it is slower (train/BENCHMARKS.md).
    # CPU tests: 6 layers of width 64, 4 slots of 128 tokens, windows in 8-token blocks, 10 steps.
    "tiny": dict(num_layers=6, model_dim=64, num_heads=2, train_batch_tokens=512, batch_slots=4,
                 train_max_seq_len=128, val_batch_tokens=512, val_tokens=1024, scheduled_steps=8,
                 extension_steps=2, val_every=5, block_size=8, ws_final_long=16,
                 muon_momentum_warmup_steps=4, warmup_steps=2, fp8=False, compile=False, bf16=False,
                 fused_loss=False),
    # CPU demo (about a minute on 2 cores): 6 layers of width 128, 4 slots of 128 tokens, 40 steps.
    "demo": dict(num_layers=6, model_dim=128, num_heads=2, train_batch_tokens=512, batch_slots=4,
                 train_max_seq_len=128, val_batch_tokens=512, val_tokens=1024, scheduled_steps=36,
                 extension_steps=4, val_every=10, block_size=16, muon_momentum_warmup_steps=8,
                 warmup_steps=0, fp8=False, compile=False, bf16=False, fused_loss=False),
}


def preset(name: str) -> TrainConfig:
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    return TrainConfig(**PRESETS[name])


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _parse_value(key: str, text: str, kind) -> object:
    try:
        if kind is bool:
            if text.lower() in _TRUE + _FALSE:
                return text.lower() in _TRUE
            raise ValueError
        if kind == (int | None):
            return None if text.lower() == "none" else int(text)
        if kind is int:
            return int(text.replace("_", ""))
        if kind is float:
            return float(text)
        if typing.get_origin(kind) is tuple:
            return tuple(int(part) for part in text.split(",") if part.strip())
        return text
    except ValueError:
        example = {bool: "true/false", int: "an integer", float: "a number"}.get(kind, "comma-separated integers")
        raise ConfigError(f"--set {key}={text}: expected {example}") from None


def apply_overrides(cfg: TrainConfig, assignments: list[str]) -> TrainConfig:
    """Apply `key=value` strings; unknown keys and unparsable values raise ConfigError naming them.
    `steps=N` is not a field: it scales the schedule to N steps (TrainConfig.with_total_steps), after the rest."""
    hints = typing.get_type_hints(TrainConfig)
    changes: dict[str, object] = {}
    total_steps = None
    for item in assignments:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep:
            raise ConfigError(f"--set {item!r}: expected key=value, e.g. --set num_layers=8")
        if key == "steps":
            total_steps = _parse_value(key, text.strip(), int)
            continue
        if key not in hints:
            raise ConfigError(f"--set {key}: unknown key; known keys: steps, {', '.join(sorted(hints))}")
        changes[key] = _parse_value(key, text.strip(), hints[key])
    cfg = dataclasses.replace(cfg, **changes)
    if total_steps is not None:
        cfg = cfg.with_total_steps(total_steps)
    return cfg.validate()
