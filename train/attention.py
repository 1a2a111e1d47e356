"""The one attention function: causal, within each document, within a sliding window, scaled by YaRN.

    from train.attention import attention, select_backend
    backend = select_backend("auto", device)        # "fa3" | "flex" | "dense"
    y = attention(q, k, v, doc_bounds, window, scale, backend=backend, max_seqlen=2048)

q, k, v: (T, H, hd) bf16 for one rank's flat micro-batch; doc_bounds: (n,) int32 cumulative document starts,
0 first, padded at the end with T. Query t sees key s when s <= t, t - s <= window and both lie in the same
document. The softmax scale is YaRN's `attn_scale`, not 1/sqrt(hd).

Backends (chosen once at start):
- fa3: `flash_attn_interface.flash_attn_varlen_func`, as in the record. window and scale must be Python
  numbers (they become kernel arguments), so each window size compiles its own graph, like the record.
- flex: FlexAttention. window and scale may be 0-dim tensors, so one compiled graph serves every window size
  (the scale is applied by a score_mod, the kernel's own scale being 1). The block mask is built from
  block-level bounds (a (T/128)² grid) rather than by evaluating the mask on all T² token pairs.
- dense: a float32 reference that materialises the (T, T) mask; for CPU tests and tiny configs only.
"""

import torch
from torch import Tensor
from torch.nn.attention.flex_attention import BlockMask, flex_attention

try:  # FA3's hopper build; resolved at import so that compiled code calls a plain global
    import flash_attn_interface as _fa3

    # repro's FlexAttention stand-in (pipeline/runs/fa3_standin) is not FA3: use FlexAttention directly
    fa3_varlen = None if getattr(_fa3, "REPRO_STANDIN", None) else _fa3.flash_attn_varlen_func
except ImportError:
    fa3_varlen = None

FLEX_BLOCK = 128  # FlexAttention's default tile; the flat micro-batch length must be a multiple of it


def select_backend(requested: str, device: torch.device) -> str:
    """Resolve "auto" (FA3 when importable on CUDA, else FlexAttention on CUDA, else dense on CPU)."""
    if requested == "auto":
        if device.type == "cuda":
            return "fa3" if fa3_varlen is not None else "flex"
        return "dense"
    if requested == "fa3" and (device.type != "cuda" or fa3_varlen is None):
        raise ValueError("attention=fa3 needs CUDA and the flash_attn_interface module (FA3's hopper build); "
                         "use attention=flex or attention=auto")
    if requested not in ("fa3", "flex", "dense"):
        raise ValueError(f"attention={requested!r}: choose auto, fa3, flex or dense")
    return requested


def document_ids(doc_bounds: Tensor, length: int) -> Tensor:
    """(length,) index of the document each position belongs to (padding bounds equal `length`, never hit)."""
    positions = torch.arange(length, device=doc_bounds.device, dtype=doc_bounds.dtype)
    return torch.searchsorted(doc_bounds, positions, right=True)


def attention(q: Tensor, k: Tensor, v: Tensor, doc_bounds: Tensor, window, scale, *, backend: str,
              max_seqlen: int) -> Tensor:
    """(T, H, hd) x3 -> (T, H, hd). window: tokens (int or 0-dim tensor); scale: float or 0-dim tensor."""
    if backend == "fa3":
        out = fa3_varlen(q, k, v, cu_seqlens_q=doc_bounds, cu_seqlens_k=doc_bounds, max_seqlen_q=max_seqlen,
                             max_seqlen_k=max_seqlen, causal=True, softmax_scale=scale, window_size=(window, 0))
        return out[0] if isinstance(out, tuple) else out  # some FA3 builds also return the log-sum-exp
    if backend == "flex":
        return flex_attention_varlen(q, k, v, doc_bounds, window, scale)
    if backend == "dense":
        return _dense(q, k, v, doc_bounds, window, scale)
    raise ValueError(f"unknown attention backend {backend!r}")


def allowed_pairs(doc_bounds: Tensor, T: int, window) -> Tensor:
    """(T, T) bool, [query, key]: the mask's definition, materialised (dense backend and tests)."""
    docs = document_ids(doc_bounds, T)  # (T,)
    pos = torch.arange(T, device=doc_bounds.device)
    delta = pos[:, None] - pos[None, :]  # (T, T) query minus key position
    return (delta >= 0) & (delta <= window) & (docs[:, None] == docs[None, :])


def _dense(q: Tensor, k: Tensor, v: Tensor, doc_bounds: Tensor, window, scale) -> Tensor:
    allowed = allowed_pairs(doc_bounds, q.size(0), window)  # (T, T)
    scores = torch.einsum("thd,shd->hts", q.float(), k.float()) * scale  # (H, T, T)
    probs = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
    return torch.einsum("hts,shd->thd", probs, v.float()).to(q.dtype)


def block_mask_tables(docs: Tensor, window, block: int = FLEX_BLOCK) -> tuple[Tensor, Tensor]:
    """(full, partial) (nb, nb) bool tables over (query block, key block) for the mask of this module.

    full: every pair in the tile is allowed (no mask evaluated there); partial: some pair may be allowed (the
    kernel evaluates mask_mod per element). Tiles in neither are skipped. `partial` may include tiles that turn
    out empty; `full` is exact.
    """
    nb = docs.numel() // block
    blk = torch.arange(nb, device=docs.device)
    q_lo, q_hi = (blk * block)[:, None], (blk * block + block - 1)[:, None]  # (nb, 1) first/last query
    k_lo, k_hi = (blk * block)[None, :], (blk * block + block - 1)[None, :]  # (1, nb) first/last key
    doc_first, doc_last = docs[::block], docs[block - 1::block]  # (nb,) documents are non-decreasing
    full = (k_hi <= q_lo) & (q_hi - k_lo <= window) & (doc_first[None, :] == doc_last[:, None])
    maybe = (k_lo <= q_hi) & (q_lo - k_hi <= window) & (doc_last[None, :] >= doc_first[:, None])
    return full, maybe & ~full


def _to_block_lists(table: Tensor) -> tuple[Tensor, Tensor]:
    """(nb, nb) bool -> counts (1, 1, nb) and key-block indices (1, 1, nb, nb), allowed tiles first."""
    counts = table.sum(dim=-1, dtype=torch.int32)
    order = torch.argsort(table.to(torch.int8), dim=-1, descending=True, stable=True).to(torch.int32)
    return counts[None, None], order[None, None]


def flex_attention_varlen(q: Tensor, k: Tensor, v: Tensor, doc_bounds: Tensor, window, scale) -> Tensor:
    """The flex backend; also what the FA3 stand-in calls (pipeline/runs/fa3_standin)."""
    T = q.size(0)
    if T % FLEX_BLOCK:
        raise ValueError(f"FlexAttention needs the micro-batch length ({T}) to be a multiple of {FLEX_BLOCK}")
    docs = document_ids(doc_bounds, T)  # (T,)

    def mask_mod(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (q_idx - kv_idx <= window) & (docs[q_idx] == docs[kv_idx])

    def scale_mod(score, b, h, q_idx, kv_idx):
        return score * scale

    full, partial = block_mask_tables(docs, window)
    kv_num, kv_idx = _to_block_lists(partial)
    full_num, full_idx = _to_block_lists(full)
    block_mask = BlockMask.from_kv_blocks(kv_num, kv_idx, full_num, full_idx, BLOCK_SIZE=FLEX_BLOCK,
                                          mask_mod=mask_mod, seq_lengths=(T, T))
    # flex takes (B, H, T, hd); the kernel's own scale is 1 so that `scale` may be a tensor
    y = flex_attention(q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None],
                       score_mod=scale_mod, block_mask=block_mask, scale=1.0)  # (1, H, T, hd)
    return y[0].transpose(0, 1)

