"""Generated token shards with learnable structure, so demos and tests need no download.

    repro data synth --out data/synth --train-tokens 5000000 --val-tokens 500000 --seed 0

The tokens come from a random first-order Markov chain over a few hundred GPT-2 ids (below
50256) plus BOS: each token has `branching` likely successors (Dirichlet weights), and ends its
document with probability `end_prob`; after BOS a document starts from a start distribution.
A model that learns the transitions reaches the chain's conditional entropy H(X_t | X_t-1), far
below the unigram entropy H(X) that a model ignoring context is stuck at; both are printed (in
nats, the unit of the trainer's cross-entropy loss) and stored in data.lock.yaml.
Deterministic for a seed; numpy-vectorised over many chains at once. Memory is bounded whatever the
sizes: the chain is sparse (vocab x branching edges), tokens are sampled in blocks of CHAINS x
BLOCK_STEPS and streamed into the shards, and the val entropies are measured on the first
MEASURE_TOKENS val tokens.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import sparse

from pipeline.atomic import write_error
from pipeline.data.shards import BOS
from pipeline.data.tokenize import ShardWriter, check_prefix
from pipeline.data.verify import LockEntry, write_local_lock
from pipeline.errors import InputError
from pipeline.hashing import sha256_file

CHAINS = 4096  # chains sampled side by side; each starts with BOS
BLOCK_STEPS = 1024  # steps per block: memory is bounded by CHAINS x BLOCK_STEPS, whatever the token count
MEASURE_TOKENS = 8_000_000  # val tokens the empirical entropies are measured on (the first ones)


@dataclass(frozen=True)
class MarkovChain:
    """A sparse first-order chain: memory grows with vocab x branching, never vocab^2 (50255^2 floats is 20 GB)."""

    token_ids: np.ndarray  # (V+1,) token id of each state; the last state is BOS
    successors: np.ndarray  # (E,) destination state of each edge, edges grouped by source state
    bounds: np.ndarray  # (E,) source state + cumulative probability: row s spans (s, s+1]
    transition: sparse.csr_matrix  # (V+1, V+1) probabilities, for the entropies

    @property
    def states(self) -> int:
        return self.transition.shape[0]


def build_chain(seed: int, vocab: int, branching: int, end_prob: float, alpha: float = 0.5) -> MarkovChain:
    rng = np.random.default_rng(seed)
    bos = vocab
    token_ids = np.append(rng.choice(BOS, size=vocab, replace=False), BOS)
    rows = np.repeat(np.arange(vocab), branching)
    cols = rng.integers(0, vocab, size=vocab * branching)
    weights = rng.dirichlet(np.full(branching, alpha), size=vocab).ravel() * (1 - end_prob)
    start = rng.dirichlet(np.ones(vocab))  # documents start anywhere, unevenly
    all_rows = np.concatenate([rows, np.arange(vocab), np.full(vocab, bos)])
    all_cols = np.concatenate([cols, np.full(vocab, bos), np.arange(vocab)])
    all_p = np.concatenate([weights, np.full(vocab, end_prob), start])
    # COO -> CSR sums repeated (row, col) edges and sorts each row by column: edges grouped by source
    transition = sparse.csr_matrix((all_p, (all_rows, all_cols)), shape=(vocab + 1, vocab + 1))
    transition.sum_duplicates()
    transition.eliminate_zeros()
    indptr, successors = transition.indptr, transition.indices.astype(np.int64)
    cumulative = np.empty(transition.nnz)
    for state in range(vocab + 1):  # a loop over states (not tokens or edges): ~0.1 s at the largest vocab
        lo, hi = indptr[state], indptr[state + 1]
        cumulative[lo:hi] = np.cumsum(transition.data[lo:hi])
        cumulative[hi - 1] = 1.0  # close the row exactly: no float gap between rows
    sources = np.repeat(np.arange(vocab + 1), np.diff(indptr))
    return MarkovChain(token_ids, successors, sources + cumulative, transition)


def sample_blocks(chain: MarkovChain, tokens: int, seed: int, chains: int = CHAINS,
                  block_steps: int = BLOCK_STEPS):
    """`tokens` token ids as uint16 blocks: each block is `chains` independent walks from BOS, end to end."""
    rng = np.random.default_rng([seed, 1])
    bos_state = chain.states - 1
    left = tokens
    while left > 0:
        steps = min(-(-left // chains), block_steps) + 1  # one spare step: a walk may lose its opening BOS
        states = np.empty((steps, chains), dtype=np.int32)  # (T, M)
        states[0] = bos_state
        for t in range(1, steps):
            # Row s of `bounds` spans (s, s+1]: searching s + u picks an edge of s with its probability.
            edge = np.searchsorted(chain.bounds, states[t - 1] + rng.random(chains), side="right")
            states[t] = chain.successors[edge]
        walks = states.T  # (M, T): walk 0, then walk 1, ...
        keep = np.ones_like(walks, dtype=bool)
        keep[1:, 0] = walks[:-1, -1] != bos_state  # a walk ending in BOS already opened the next document
        block = chain.token_ids[walks[keep][:left]].astype(np.uint16)
        left -= block.size
        yield block


def sample(chain: MarkovChain, tokens: int, seed: int, chains: int = CHAINS) -> np.ndarray:
    """All `tokens` at once (small counts: tests and notebooks); synth itself streams sample_blocks."""
    return np.concatenate(list(sample_blocks(chain, tokens, seed, chains)))


def stationary(transition, iterations: int = 2000) -> np.ndarray:
    pi = np.full(transition.shape[0], 1.0 / transition.shape[0])
    transposed = transition.T.tocsr()
    for _ in range(iterations):
        nxt = transposed @ pi
        if np.abs(nxt - pi).sum() < 1e-13:
            break
        pi = nxt
    return pi / pi.sum()


def _entropy(p: np.ndarray, axis=None) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.sum(np.where(p > 0, p * np.log(p), 0.0), axis=axis)


def chain_entropies(chain: MarkovChain) -> tuple[float, float]:
    """(unigram entropy H(X), conditional entropy H(X_t | X_t-1)) of the stationary chain, in nats."""
    pi = stationary(chain.transition)
    t = chain.transition
    terms = np.where(t.data > 0, -t.data * np.log(np.where(t.data > 0, t.data, 1.0)), 0.0)
    row_entropy = np.add.reduceat(terms, t.indptr[:-1]) if t.nnz else np.zeros(t.shape[0])
    return float(_entropy(pi)), float(pi @ row_entropy)


def empirical_entropies(tokens: np.ndarray) -> tuple[float, float]:
    """Plug-in unigram and bigram-conditional entropies of a token sequence, in nats (memory ~ len(tokens))."""
    _, ids = np.unique(tokens, return_inverse=True)
    n = int(ids.max()) + 1
    unigram = np.bincount(ids, minlength=n) / ids.size
    _, pair_counts = np.unique(ids[:-1].astype(np.int64) * n + ids[1:], return_counts=True)  # sparse pairs
    joint = pair_counts / pair_counts.sum()
    prev = np.bincount(ids[:-1], minlength=n) / (ids.size - 1)
    return float(_entropy(unigram)), float(_entropy(joint) - _entropy(prev))


@dataclass(frozen=True, kw_only=True)
class SynthResult:
    out_dir: Path
    shards: tuple[tuple[str, int, str], ...]  # (file name, tokens, split)
    unigram_entropy: float  # nats: the best loss without context
    conditional_entropy: float  # nats: the best loss any model can reach
    val_unigram_entropy: float  # measured on the val tokens written
    val_conditional_entropy: float
    seconds: float
    params: dict


def synth(out_dir: Path, *, train_tokens: int = 5_000_000, val_tokens: int = 500_000, seed: int = 0,
          vocab: int = 512, branching: int = 8, end_prob: float = 1 / 256, shard_tokens: int | None = None,
          prefix: str = "fineweb") -> SynthResult:
    if train_tokens <= 0 or val_tokens <= 0:
        raise InputError("--train-tokens and --val-tokens must be > 0", "give positive token counts")
    if not 2 <= vocab < BOS or not 1 <= branching <= vocab or not 0 < end_prob < 1:
        raise InputError(f"need 2 <= vocab < {BOS}, 1 <= branching <= vocab, 0 < end-prob < 1",
                         "e.g. --vocab 512 --branching 8 --end-prob 0.004")
    check_prefix(prefix)
    start = time.perf_counter()
    chain = build_chain(seed, vocab, branching, end_prob)
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(out_dir, exc) from None
    writer = ShardWriter(out_dir, prefix, shard_tokens or train_tokens, val_tokens)
    measured: list[np.ndarray] = []  # the first val tokens, for the empirical entropies
    wanted = min(val_tokens, MEASURE_TOKENS)
    try:
        for block in sample_blocks(chain, val_tokens + train_tokens, seed):
            if wanted > 0:
                measured.append(block[:wanted].copy())
                wanted -= measured[-1].size
            writer.add(block)
        writer.close()
    except BaseException:
        writer.abort()  # a full disk or Ctrl-C: no partial shard and no incomplete set left behind
        raise
    unigram, conditional = chain_entropies(chain)
    val_unigram, val_conditional = empirical_entropies(np.concatenate(measured))
    params = {"kind": "markov1", "seed": seed, "vocab": vocab, "branching": branching, "end_prob": end_prob,
              "unigram_entropy_nats": round(unigram, 6), "conditional_entropy_nats": round(conditional, 6)}
    entries = [LockEntry(name=name, size=(out_dir / name).stat().st_size, sha256=sha256_file(out_dir / name), tokens=n,
                         source=f"synth markov1 seed={seed}") for name, n, _ in writer.written]
    write_local_lock(out_dir, out_dir.name, entries, generator=params, replace=True)
    return SynthResult(out_dir=out_dir, shards=tuple(writer.written), unigram_entropy=unigram,
                       conditional_entropy=conditional, val_unigram_entropy=val_unigram,
                       val_conditional_entropy=val_conditional,
                       seconds=time.perf_counter() - start, params=params)
