"""`repro data synth`: deterministic, well-formed shards whose structure a model can learn."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from pipeline.data.shards import BOS, read_tokens
from pipeline.data.synth import synth
from pipeline.data.verify import read_local_lock, verify_dir
from pipeline.errors import InputError
from tests.paths import REPO_ROOT


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth") / "s"
    return synth(out, train_tokens=2_000_000, val_tokens=200_000, seed=3, shard_tokens=1_000_000)


def test_shards_are_deterministic_per_seed(tmp_path, generated):
    again = synth(tmp_path / "again", train_tokens=2_000_000, val_tokens=200_000, seed=3, shard_tokens=1_000_000)
    other = synth(tmp_path / "other", train_tokens=2_000_000, val_tokens=200_000, seed=4, shard_tokens=1_000_000)
    names = [name for name, _, _ in generated.shards]
    assert names == ["fineweb_val_000000.bin", "fineweb_train_000001.bin", "fineweb_train_000002.bin"]
    for name in names:
        assert (generated.out_dir / name).read_bytes() == (again.out_dir / name).read_bytes()
        assert (generated.out_dir / name).read_bytes() != (other.out_dir / name).read_bytes()


def test_shards_are_well_formed_documents(generated):
    assert verify_dir(generated.out_dir).ok
    lock = read_local_lock(generated.out_dir)
    assert lock.generator["kind"] == "markov1" and lock.generator["seed"] == 3
    train = np.concatenate([read_tokens(generated.out_dir / f"fineweb_train_00000{i}.bin") for i in (1, 2)])
    val = read_tokens(generated.out_dir / "fineweb_val_000000.bin")
    assert val[0] == BOS and train.size == 2_000_000 and val.size == 200_000
    ids = np.unique(train)
    assert ids.size <= 513 and ids[-1] == BOS and ids[-2] < BOS
    # BOS: every document's end (p = 1/256) plus the start of each of the 4096 walks (1 in 538 tokens here).
    assert 1 / 256 + 1 / 538 - 0.0005 < np.mean(train == BOS) < 1 / 256 + 1 / 538 + 0.0005
    assert not np.any((train[:-1] == BOS) & (train[1:] == BOS))  # no empty documents


def test_entropies_leave_a_wide_learnable_gap(generated):
    assert generated.unigram_entropy > generated.conditional_entropy + 3.5
    assert abs(generated.val_unigram_entropy - generated.unigram_entropy) < 0.05
    assert abs(generated.val_conditional_entropy - generated.conditional_entropy) < 0.1


def test_a_trained_model_beats_the_unigram_entropy(generated):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: extra threads only fight other work for the cores
    train = np.asarray(read_tokens(generated.out_dir / "fineweb_train_000001.bin"), dtype=np.int64)
    val = np.asarray(read_tokens(generated.out_dir / "fineweb_val_000000.bin"), dtype=np.int64)
    vocab = np.unique(np.concatenate([train, val]))
    x_train = torch.from_numpy(np.searchsorted(vocab, train))  # compact ids in [0, V)
    x_val = torch.from_numpy(np.searchsorted(vocab, val))
    logits_table = torch.zeros(vocab.size, vocab.size, requires_grad=True)  # (V, V) next-token logits
    opt = torch.optim.Adam([logits_table], lr=0.3)
    try:
        for _ in range(40):
            idx = torch.randint(0, x_train.numel() - 1, (16384,))
            # cross-entropy of the next token: normalise the (V, V) table once, then pick (B,) entries
            loss = -logits_table.log_softmax(dim=1)[x_train[idx], x_train[idx + 1]].mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            val_loss = -logits_table.log_softmax(dim=1)[x_val[:-1], x_val[1:]].mean().item()
    finally:
        torch.set_num_threads(threads)
    assert val_loss < generated.unigram_entropy - 3.0
    assert val_loss < generated.conditional_entropy + 0.3


def test_a_rerun_leaves_no_stale_shards(tmp_path):
    synth(tmp_path / "s", train_tokens=40_000, val_tokens=1000, shard_tokens=10_000)
    synth(tmp_path / "s", train_tokens=40_000, val_tokens=1000, shard_tokens=20_000)
    assert sorted(p.name for p in (tmp_path / "s").glob("*.bin")) == [
        "fineweb_train_000001.bin", "fineweb_train_000002.bin", "fineweb_val_000000.bin"]
    assert verify_dir(tmp_path / "s").ok and all(f.hash_checked for f in verify_dir(tmp_path / "s").files)


def test_bad_parameters_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="vocab"):
        synth(tmp_path / "x", vocab=60000)
    with pytest.raises(InputError, match="> 0"):
        synth(tmp_path / "x", train_tokens=0)


def test_cli_synth_prints_both_entropies(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pipeline", "data", "synth", "--out", str(tmp_path / "s"),
                           "--train-tokens", "300000", "--val-tokens", "30000", "--json"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["unigram_entropy"] > report["conditional_entropy"] + 3
    human = subprocess.run([sys.executable, "-m", "pipeline", "data", "synth", "--out", str(tmp_path / "h"),
                            "--train-tokens", "1000", "--val-tokens", "100"],
                           cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert "unigram entropy" in human.stdout and "conditional entropy" in human.stdout
