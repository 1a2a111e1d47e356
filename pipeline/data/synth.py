"""Generated token shards with learnable structure, so demos and tests need no download.

    repro data synth --out data/synth --train-tokens 5000000 --val-tokens 500000 --seed 0

The tokens come from a random first-order Markov chain over a few hundred GPT-2 ids (below
50256) plus BOS: each token has `branching` likely successors (Dirichlet weights), and ends its
document with probability `end_prob`; after BOS a document starts from a start distribution.
A model that learns the transitions reaches the chain's conditional entropy H(X_t | X_t-1), far
below the unigram entropy H(X) that a model ignoring context is stuck at; both are printed (in
nats, the unit of the trainer's cross-entropy loss) and stored in data.lock.yaml.
Deterministic for a seed; numpy-vectorised over many chains at once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.data.shards import BOS
from pipeline.data.tokenize import ShardWriter
from pipeline.data.verify import LockEntry, write_local_lock
from pipeline.errors import InputError
from pipeline.hashing import sha256_file

CHAINS = 4096  # chains sampled side by side; each starts with BOS


@dataclass(frozen=True)
class MarkovChain:
    token_ids: np.ndarray  # (V+1,) token id of each state; the last state is BOS
    successors: np.ndarray  # (E,) destination state of each edge, edges grouped by source state
    bounds: np.ndarray  # (E,) source state + cumulative probability: row s spans (s, s+1]
    transition: np.ndarray  # (V+1, V+1) dense probabilities, for the entropies

    @property
    def states(self) -> int:
        return self.transition.shape[0]


def build_chain(seed: int, vocab: int, branching: int, end_prob: float, alpha: float = 0.5) -> MarkovChain:
    rng = np.random.default_rng(seed)
    bos = vocab
    token_ids = np.append(rng.choice(BOS, size=vocab, replace=False), BOS)
    dense = np.zeros((vocab + 1, vocab + 1))
    rows = np.repeat(np.arange(vocab), branching)
    cols = rng.integers(0, vocab, size=vocab * branching)
    weights = rng.dirichlet(np.full(branching, alpha), size=vocab).ravel() * (1 - end_prob)
    np.add.at(dense, (rows, cols), weights)
    dense[:vocab, bos] = end_prob
    dense[bos, :vocab] = rng.dirichlet(np.ones(vocab))  # documents start anywhere, unevenly
    src, dst = np.nonzero(dense)  # row-major: edges grouped by source, ascending
    cumulative = np.zeros(src.size)
    for state in range(vocab + 1):  # small loop over states, not over tokens
        edge = src == state
        cumulative[edge] = np.cumsum(dense[state, dst[edge]])
        cumulative[np.flatnonzero(edge)[-1]] = 1.0  # close the row exactly: no float gap between rows
    return MarkovChain(token_ids, dst, src + cumulative, dense)


def sample(chain: MarkovChain, tokens: int, seed: int, chains: int = CHAINS) -> np.ndarray:
    """`tokens` token ids: `chains` independent walks from BOS, laid end to end."""
    rng = np.random.default_rng([seed, 1])
    steps = -(-tokens // chains) + 1  # one spare step: a walk may lose its opening BOS below
    states = np.empty((steps, chains), dtype=np.int64)  # (T, M)
    states[0] = chain.states - 1  # BOS
    for t in range(1, steps):
        # Row s of `bounds` spans (s, s+1]: searching s + u picks an edge of s with its probability.
        edge = np.searchsorted(chain.bounds, states[t - 1] + rng.random(chains), side="right")
        states[t] = chain.successors[edge]
    walks = states.T  # (M, T): walk 0, then walk 1, ...
    keep = np.ones_like(walks, dtype=bool)
    keep[1:, 0] = walks[:-1, -1] != chain.states - 1  # a walk ending in BOS already opened the next document
    return chain.token_ids[walks[keep][:tokens]].astype(np.uint16)


def stationary(transition: np.ndarray, iterations: int = 2000) -> np.ndarray:
    pi = np.full(transition.shape[0], 1.0 / transition.shape[0])
    for _ in range(iterations):
        nxt = pi @ transition
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
    return float(_entropy(pi)), float(pi @ _entropy(chain.transition, axis=1))


def empirical_entropies(tokens: np.ndarray) -> tuple[float, float]:
    """Plug-in unigram and bigram-conditional entropies of a token sequence, in nats."""
    _, ids = np.unique(tokens, return_inverse=True)
    n = int(ids.max()) + 1
    unigram = np.bincount(ids, minlength=n) / ids.size
    pairs = np.bincount(ids[:-1] * n + ids[1:], minlength=n * n).reshape(n, n).astype(float)
    joint = pairs / pairs.sum()
    prev = joint.sum(axis=1)
    return float(_entropy(unigram)), float(_entropy(joint) - _entropy(prev))


@dataclass(frozen=True)
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
    start = time.perf_counter()
    chain = build_chain(seed, vocab, branching, end_prob)
    tokens = sample(chain, val_tokens + train_tokens, seed)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    writer = ShardWriter(out_dir, prefix, shard_tokens or train_tokens, val_tokens)
    writer.add(tokens)
    writer.close()
    unigram, conditional = chain_entropies(chain)
    val_unigram, val_conditional = empirical_entropies(tokens[:val_tokens])
    params = {"kind": "markov1", "seed": seed, "vocab": vocab, "branching": branching, "end_prob": end_prob,
              "unigram_entropy_nats": round(unigram, 6), "conditional_entropy_nats": round(conditional, 6)}
    entries = [LockEntry(name, (out_dir / name).stat().st_size, sha256_file(out_dir / name), n,
                         f"synth markov1 seed={seed}") for name, n, _ in writer.written]
    write_local_lock(out_dir, out_dir.name, entries, generator=params, replace=True)
    return SynthResult(out_dir, tuple(writer.written), unigram, conditional, val_unigram, val_conditional,
                       time.perf_counter() - start, params)
