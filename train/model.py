"""The record's GPT (trainer.md section 1): smear, value embeddings, U-net skips, QK-norm, half-truncated RoPE
with YaRN, attention and smear gates, relu² MLP, FP8 head, logit soft-cap 30·σ(x/7.5).

    from train.config import preset
    from train.model import GPT
    model = GPT(preset("tiny"), attention_backend="dense", fp8=False)
    loss = model(inputs, targets, doc_bounds, short_window, long_window, attn_scale)   # see forward()

Tested by tests/test_train_model.py. One rank's micro-batch is a flat sequence of T tokens (no batch dim);
documents are given by cumulative bounds. Block topology for other depths: train/config.py's docstring.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from train.attention import attention
from train.config import TrainConfig
from train.fp8 import fp8_linear
from train.kernels import Kernels, record_loss, select_kernels
from train.qk_rope import attention_inputs, rotary
from train.relu2_grad import record_mlp, relu2_mlp
from train.step_weights import StepWeights
from train.xent_triton import runs_triton

GATE_INPUTS = 12  # the gates read the first 12 channels of their input


def rms_norm(x: Tensor) -> Tensor:
    return F.rms_norm(x, (x.size(-1),))


@dataclass(frozen=True)
class LayerSpec:
    has_attn: bool
    has_mlp: bool
    value_embed: int | None  # which of the three value embeddings feeds this layer's attention
    long_window: bool


def layer_plan(num_layers: int) -> tuple[LayerSpec, ...]:
    """Per-layer topology; the record's 12 layers are the case L = 12 (rules in train/config.py)."""
    L = num_layers
    ve_map = {1: 1, 2: 2, L - 3: 0, L - 2: 1, L - 1: 2}
    no_attn = {0, L // 2 + 1}
    long = {L // 3, L - 1}
    return tuple(LayerSpec(has_attn=i not in no_attn, has_mlp=i != 0, value_embed=ve_map.get(i),
                           long_window=i in long) for i in range(L))


def uniform_init_bound(dim: int) -> float:
    """The record's init: uniform with std 0.5·dim^-½."""
    return math.sqrt(3) * 0.5 * dim ** -0.5


class Yarn(nn.Module):
    """Half-truncated RoPE tables (hd/4 frequencies then hd/4 zeros) with YaRN window extension."""

    def __init__(self, head_dim: int, max_seq_len: int, block_size: int):
        super().__init__()
        self.head_dim, self.max_seq_len, self.block_size = head_dim, max_seq_len, block_size
        self.register_buffer("cos", torch.empty(max_seq_len, head_dim // 2, dtype=torch.bfloat16), persistent=False)
        self.register_buffer("sin", torch.empty(max_seq_len, head_dim // 2, dtype=torch.bfloat16), persistent=False)
        self.reset()

    def reset(self) -> None:
        device = self.cos.device
        freq = (1 / 1024) ** torch.linspace(0, 1, steps=self.head_dim // 4, dtype=torch.float32, device=device)
        self.angular_freq = torch.cat([freq, freq.new_zeros(self.head_dim // 4)])  # (hd/2,)
        self._fill_tables()
        self.attn_scale = 0.1

    def _fill_tables(self) -> None:
        self.angular_freq = self.angular_freq.to(self.cos.device)  # a plain attribute: .to(device) skips it
        t = torch.arange(self.max_seq_len, dtype=torch.float32, device=self.angular_freq.device)
        theta = torch.outer(t, self.angular_freq)  # (max_seq_len, hd/2)
        with torch.no_grad():
            self.cos.copy_(theta.cos())
            self.sin.copy_(theta.sin())

    def extend(self, old_window: int, new_window: int, alpha: int = 1, beta: int = 32) -> None:
        """Extend from `old_window` to `new_window` blocks: interpolate the slow frequencies, raise attn_scale."""
        rotations = self.block_size * old_window * self.angular_freq / (2 * torch.pi)
        scaling_factor = old_window / new_window
        interpolation_weight = torch.clamp((rotations - alpha) / (beta - alpha), 0, 1)
        self.angular_freq = self.angular_freq * (scaling_factor + interpolation_weight * (1 - scaling_factor))
        self._fill_tables()
        self.attn_scale *= 0.2 * math.log(new_window / old_window) + 1


@dataclass(kw_only=True)
class AttnInputs:
    """What every attention layer of one forward pass shares."""

    doc_bounds: Tensor
    cos: Tensor
    sin: Tensor
    scale: object  # float (FA3) or 0-dim tensor
    backend: str
    max_seqlen: int


class Attention(nn.Module):
    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        self.dim, self.num_heads, self.head_dim = dim, num_heads, dim // num_heads
        # Q, K, V, O = qkvo.view(4, D, D); stored D×4D like the MLP matrices so Muon stacks both kinds
        self.qkvo = nn.Parameter(torch.empty(dim, 4 * dim))
        bound = uniform_init_bound(dim)
        with torch.no_grad():
            self.qkvo.view(4, dim, dim)[:3].uniform_(-bound, bound)
            self.qkvo.view(4, dim, dim)[3].zero_()
        self.gate = nn.Linear(GATE_INPUTS, num_heads, bias=False)
        nn.init.zeros_(self.gate.weight)
        self.qkvo_copy: Tensor | None = None  # qkvo in bf16 for this step (GPT.refresh_step_weights; lever 14)

    def forward(self, x: Tensor, ve: Tensor | None, sa_lambdas: Tensor, window, shared: AttnInputs) -> Tensor:
        T, H = x.size(0), self.num_heads
        if self.training and self.qkvo_copy is not None:
            w = self.qkvo_copy.view(4, self.dim, self.dim)
        else:  # the record's cast in every micro-step
            w = self.qkvo.view(4, self.dim, self.dim)
        qkv = F.linear(x, w[:3].flatten(end_dim=1).type_as(x)).view(T, 3 * H, -1)  # (T, 3H, hd)
        if runs_triton(qkv):  # QK-norm, rotary and the value mix as one op (train/qk_rope.py) writing dL/dqkv whole
            q, k, v, _ = attention_inputs(qkv, ve, sa_lambdas, shared.cos, shared.sin)
        else:  # QK-norm, rotary, the value mix
            q, k, v = qkv.chunk(3, dim=1)
            q, k = rotary(rms_norm(q), shared.cos, shared.sin), rotary(rms_norm(k), shared.cos, shared.sin)
            v = sa_lambdas[0] * v + sa_lambdas[1] * ve.view_as(v) if ve is not None else sa_lambdas[0] * v
        y = attention(q, k, v, shared.doc_bounds, window, shared.scale, backend=shared.backend,
                      max_seqlen=shared.max_seqlen)  # (T, H, hd)
        y = y * torch.sigmoid(self.gate(x[:, :GATE_INPUTS])).view(T, H, 1)
        y = y.contiguous().view(T, self.dim)
        return F.linear(y, w[3].type_as(y))


class MLP(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.fc = nn.Parameter(torch.empty(dim, 4 * dim))  # used as x·fc
        self.proj = nn.Parameter(torch.empty(dim, 4 * dim))  # used as h·projᵀ
        with torch.no_grad():
            bound = uniform_init_bound(dim)
            self.fc.uniform_(-bound, bound)
            self.proj.zero_()
        self.copies: tuple[Tensor, Tensor] | None = None  # (fc, proj) in bf16 for this step (lever 14)

    def forward(self, x: Tensor) -> Tensor:
        # relu(x·fc)²·projᵀ, (T, D); where Triton runs, ReLU²'s backward rides the grad GEMM (train/relu2_grad.py)
        fc, proj = self.copies if self.training and self.copies is not None else (self.fc.type_as(x),
                                                                                  self.proj.type_as(x))
        return relu2_mlp(x, fc, proj) if runs_triton(x) else record_mlp(x, fc, proj)


class Block(nn.Module):
    def __init__(self, dim: int, num_heads: int, spec: LayerSpec):
        super().__init__()
        self.spec = spec
        self.attn = Attention(dim, num_heads) if spec.has_attn else None
        self.mlp = MLP(dim) if spec.has_mlp else None

    def add(self, x: Tensor, delta: Tensor) -> Tensor:
        """x + delta, delta a GEMM's output (T, D). Inductor rewrites `x + mm` as one addmm, whose beta = 1 GEMM
        needs x in its output buffer first: a copy of x (75.5 MB, 37 us at the record's shape) per block. Written
        as a float32 sum rounded once, the values eager gives `x + delta`, it stays a pointwise add that fuses
        into the next kernel; folded, the GEMM's sum is rounded once where eager rounds delta first. Issue 41's
        lever 11: 593.7 against 596.3 ms per step at world size 1 (0.9956, 3 + 3 runs; train/BENCHMARKS.md)."""
        return (x.float() + delta.float()).type_as(x)

    def forward(self, x: Tensor, x0: Tensor, lambdas: Tensor, ve: Tensor | None, sa_lambdas: Tensor, window,
                shared: AttnInputs) -> Tensor:
        x = lambdas[0] * x + lambdas[1] * x0
        if self.attn is not None:
            x = self.add(x, self.attn(rms_norm(x), ve, sa_lambdas, window, shared))
        if self.mlp is not None:
            x = self.add(x, self.mlp(rms_norm(x)))
        return x


class Head(nn.Linear):
    """D -> Vp logits; FP8 in training when enabled, bf16 otherwise. Zero init."""

    def __init__(self, dim: int, vocab: int, fp8: bool):
        super().__init__(dim, vocab, bias=False)
        nn.init.zeros_(self.weight)
        self.fp8 = fp8
        self.scales = dict(x_s=dim ** 0.5 / 448, w_s=2 ** -9, grad_s=1 / 448)

    def forward(self, x: Tensor) -> Tensor:
        if self.fp8 and self.training:
            return fp8_linear(x, self.weight, **self.scales)
        return F.linear(x, self.weight.type_as(x))


class GPT(nn.Module):
    def __init__(self, cfg: TrainConfig, attention_backend: str = "dense", fp8: bool = False, world_size: int = 1):
        super().__init__()
        L, D, V = cfg.num_layers, cfg.model_dim, cfg.padded_vocab
        self.cfg, self.attention_backend = cfg, attention_backend
        self.plan = layer_plan(L)
        self.embed = nn.Embedding(V, D)
        self.smear_gate = nn.Linear(GATE_INPUTS, 1, bias=False)
        nn.init.zeros_(self.smear_gate.weight)
        self.value_embeds = nn.ModuleList([nn.Embedding(V, D) for _ in range(3)])
        self.kernels: Kernels = select_kernels(cfg)  # the optional kernels switched on (train/kernels.py)
        self.blocks = nn.ModuleList([Block(D, cfg.num_heads, spec) for spec in self.plan])
        self.yarn = Yarn(cfg.head_dim, cfg.rotary_len, cfg.block_size)
        self.head = Head(D, V, fp8)
        # [0:L] skip weights, [L:3L] block lambdas (1, 0), [3L:5L] SA lambdas (0.5, 0.5), [5L:6L] zeros with the
        # smear lambda at 5L; padded with ones to a multiple of the world size for the sharded Adam (never read)
        pad = (-6 * L) % world_size
        self.scalars = nn.Parameter(torch.cat([
            -1.5 * torch.ones(L), torch.tensor([1.0, 0.0]).repeat(L), torch.tensor([0.5, 0.5]).repeat(L),
            torch.zeros(L), torch.ones(pad)]))
        for module in self.modules():
            if cfg.bf16 and isinstance(module, (nn.Embedding, nn.Linear)):
                module.bfloat16()
        self.step_weights: StepWeights | None = None  # built on the model's device by refresh_step_weights

    def refresh_step_weights(self) -> None:
        """With bf16 (issue 41's lever 14): attention's qkvo and the MLPs' fc and proj cast to bf16 once, for
        every micro-step of the coming step, their gradients summed into the float32 .grad (train/step_weights.py);
        the record casts the same bits again in each micro-step (8 at world size 1). Call before each step's
        micro-steps, after any change to the weights. Never called, each micro-step casts as the record does; in
        float32 it does nothing."""
        if not self.cfg.bf16:
            return
        attn = [b.attn for b in self.blocks if b.attn is not None]
        mlps = [b.mlp for b in self.blocks if b.mlp is not None]
        matrices = [a.qkvo for a in attn] + [p for m in mlps for p in (m.fc, m.proj)]
        if self.step_weights is None or self.step_weights.copies[0].device != matrices[0].device:
            self.step_weights = StepWeights(matrices, torch.bfloat16)
            for a in attn:
                a.qkvo_copy = self.step_weights.of(a.qkvo)
            for m in mlps:
                m.copies = (self.step_weights.of(m.fc), self.step_weights.of(m.proj))
        self.step_weights.refresh()

    # ---- parameter sets for the optimizers ------------------------------------------------------------
    def muon_params(self) -> tuple[list[nn.Parameter], list[str]]:
        """Muon's matrices in module order: smear gate, attention gates, attention qkvo, MLP fc/proj per layer."""
        attn = [b.attn for b in self.blocks if b.attn is not None]
        mlps = [b.mlp for b in self.blocks if b.mlp is not None]
        params = [self.smear_gate.weight] + [a.gate.weight for a in attn] + [a.qkvo for a in attn]
        params += [p for m in mlps for p in (m.fc, m.proj)]
        kinds = ["gate"] * (1 + len(attn)) + ["attn"] * len(attn) + ["mlp"] * (2 * len(mlps))
        return params, kinds

    def adam_groups(self) -> list[dict]:
        """DistAdam groups with the record's per-parameter lr multipliers."""
        cfg = self.cfg
        return [dict(params=[self.scalars], lr_mul=cfg.scalar_lr_mul),
                dict(params=[self.head.weight], lr_mul=cfg.head_lr_mul),
                dict(params=[self.embed.weight, *(e.weight for e in self.value_embeds)], lr_mul=cfg.embed_lr_mul)]

    # ---- forward --------------------------------------------------------------------------------------
    def forward(self, inputs: Tensor, targets: Tensor, doc_bounds: Tensor, short_window, long_window,
                attn_scale) -> Tensor:
        """inputs (T,) int32, targets (T,) int64, doc_bounds (n,) int32; windows in tokens and attn_scale as
        Python numbers (FA3) or 0-dim tensors (flex, dense). Returns the summed CE in training, the mean in eval."""
        L = len(self.blocks)
        ve = [emb(inputs) for emb in self.value_embeds]  # 3 x (T, D)
        x = self.embed(inputs)  # (T, D) bf16

        # smear: each token takes a gated share of the previous token's embedding
        smear_lambda = self.scalars[5 * L]
        smear = smear_lambda * torch.sigmoid(self.smear_gate(x[1:, :GATE_INPUTS]))  # (T-1, 1)
        x = torch.cat([x[:1], x[1:] + smear * x[:-1]])
        x = x0 = rms_norm(x)

        skip_weights = self.scalars[:L]
        lambdas = self.scalars[L:3 * L].view(L, 2)
        sa_lambdas = self.scalars[3 * L:5 * L].view(L, 2)
        shared = AttnInputs(doc_bounds=doc_bounds, cos=self.yarn.cos, sin=self.yarn.sin, scale=attn_scale,
                            backend=self.attention_backend,
                            max_seqlen=self.cfg.train_max_seq_len if self.training else self.cfg.val_tokens_per_slot)
        half, skips = L // 2, []
        for i in range(1, L):
            spec = self.plan[i]
            if half <= i < L - 1:
                x = x + torch.sigmoid(skip_weights[i - half]) * skips.pop()
            ve_i = ve[spec.value_embed] if spec.value_embed is not None else None
            window = long_window if spec.long_window else short_window
            x = self.blocks[i](x, x0, lambdas[i], ve_i, sa_lambdas[i], window, shared)
            if i < half:
                skips.append(x)

        if self.training:
            return self.kernels.train_loss(rms_norm(x), self.head, targets)
        return record_loss(rms_norm(x), self.head, targets, reduction="mean")
