"""A stand-in for FA3's `flash_attn_interface`, written on FlexAttention, for machines without FA3.

repro puts this folder first on PYTHONPATH of the record's program when `import flash_attn_interface`
fails in the training environment, and records it as a deviation ("attention: FlexAttention stand-in for
FA3"). It implements the one call the record's program makes:

    flash_attn_varlen_func(q, k, v, cu_seqlens_q=b, cu_seqlens_k=b, max_seqlen_q=n, max_seqlen_k=n,
                           causal=True, softmax_scale=s, window_size=(left, 0))      # (T, H, hd) -> (T, H, hd)

with FA3's meaning: query t sees key j when j <= t, t - j <= left, and both lie in the same sequence of
the packed batch (cu_seqlens: cumulative starts, 0 first, padded with T). The work is done by the native
trainer's FlexAttention path (train/attention.py), which builds the block mask from block-level bounds
instead of evaluating it on all T^2 pairs. Anything else FA3 accepts is refused loudly, never ignored.
Numerics against a dense float32 reference: tests/test_fa3_standin.py (CPU) and docs/device-runs (GPU).
"""

# Marks this module as a stand-in before anything imports it back: train/attention.py reads the mark and
# uses FlexAttention directly instead of calling "FA3".
REPRO_STANDIN = "flexattention"

import torch  # noqa: E402

from train.attention import FLEX_BLOCK, flex_attention_varlen  # noqa: E402


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None, max_seqlen_k=None,
                           softmax_scale=None, causal=False, window_size=(-1, -1), **other):
    if other:
        raise NotImplementedError(f"the FA3 stand-in does not implement {sorted(other)}")
    if not causal:
        raise NotImplementedError("the FA3 stand-in implements causal attention only")
    if cu_seqlens_k is not cu_seqlens_q and not torch.equal(cu_seqlens_q, cu_seqlens_k):
        raise NotImplementedError("the FA3 stand-in needs the same sequence bounds for queries and keys")
    left, right = window_size
    if right not in (0, -1):
        raise NotImplementedError(f"window_size right = {right}: a causal mask has no right window")
    if q.size(0) % FLEX_BLOCK:
        raise NotImplementedError(f"packed length {q.size(0)} is not a multiple of FlexAttention's {FLEX_BLOCK}")
    window = q.size(0) if left is None or left < 0 else left
    scale = q.size(-1) ** -0.5 if softmax_scale is None else softmax_scale
    return flex_attention_varlen(q, k, v, cu_seqlens_q, window, scale)
