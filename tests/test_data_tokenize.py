"""`repro data tokenize`: GPT-2 ids from local tokenizer files, BOS per document, exact shard cuts."""

from __future__ import annotations

import gzip
import json
import signal
import subprocess
import sys

import numpy as np
import pytest

from pipeline.data.shards import BOS, read_tokens
from pipeline.data.tokenize import load_gpt2, start_pool, tokenize
from pipeline.data.verify import read_local_lock, verify_dir
from pipeline.errors import InputError
from tests.conftest import shared_path
from tests.paths import REPO_ROOT

DOCS = ["Hello world", "The quick brown fox jumps over the lazy dog.\n" * 30,
        "Text that spells <|endoftext|> is text, not a document boundary.", "ünïcödé — 日本語 🙂"]


@pytest.fixture(scope="module")
def tokenizer_dir():
    return shared_path("tokenizer", "gpt2")


@pytest.fixture(scope="module")
def enc(tokenizer_dir):
    return load_gpt2(tokenizer_dir)


def expected_stream(enc, docs) -> list[int]:
    out = []
    for doc in docs:
        out += [BOS] + enc.encode_ordinary(doc)
    return out


def test_gpt2_ids_from_the_shared_files(enc):
    assert enc.encode("Hello world") == [15496, 995]
    assert enc.encode("<|endoftext|>", allowed_special="all") == [50256] and enc.eot_token == 50256
    assert enc.n_vocab == 50257
    assert enc.decode(enc.encode(DOCS[3])) == DOCS[3]


def test_tokenizer_files_are_hash_checked(tmp_path, tokenizer_dir):
    (tmp_path / "encoder.json").write_bytes((tokenizer_dir / "encoder.json").read_bytes())
    (tmp_path / "vocab.bpe").write_bytes((tokenizer_dir / "vocab.bpe").read_bytes() + b"\n")
    with pytest.raises(InputError, match="vocab.bpe has sha256"):
        load_gpt2(tmp_path)
    with pytest.raises(InputError, match="does not exist"):
        load_gpt2(tmp_path / "nowhere")


def test_text_and_jsonl_become_one_bos_separated_stream(tmp_path, enc, tokenizer_dir):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text(DOCS[0])
    (tmp_path / "in" / "b.txt").write_text(DOCS[1])
    with gzip.open(tmp_path / "in" / "c.jsonl.gz", "wt") as f:
        f.write(json.dumps({"body": DOCS[2], "id": 1}) + "\n\n" + json.dumps({"body": DOCS[3]}) + "\n")
    result = tokenize([tmp_path / "in"], tmp_path / "out", tokenizer_dir=tokenizer_dir, field="body",
                      val_tokens=100, shard_tokens=150, workers=1, quiet=True)
    stream = expected_stream(enc, DOCS)
    assert result.documents == 4 and result.tokens == len(stream)
    names = [name for name, _, _ in result.shards]
    got = np.concatenate([read_tokens(tmp_path / "out" / n) for n in names]).tolist()
    assert got == stream
    # First 100 tokens are val; then train shards of 150, the last one shorter.
    assert result.shards[0] == ("fineweb_val_000000.bin", 100, "val")
    assert [n for _, n, _ in result.shards[1:-1]] == [150] * (len(result.shards) - 2)
    assert names[1] == "fineweb_train_000001.bin" and 0 < result.shards[-1][1] <= 150
    assert verify_dir(tmp_path / "out").ok and set(read_local_lock(tmp_path / "out").files) == set(names)


def test_output_does_not_depend_on_the_number_of_workers(tmp_path, tokenizer_dir):
    docs = tmp_path / "docs.jsonl"
    rng = np.random.default_rng(0)
    words = ["alpha", "beta", "gamma", "delta", "\n", "über", "42", "the"]
    docs.write_text("".join(json.dumps({"text": " ".join(rng.choice(words, rng.integers(1, 300)))}) + "\n"
                            for _ in range(400)))
    one = tokenize([docs], tmp_path / "one", tokenizer_dir=tokenizer_dir, val_tokens=5000, shard_tokens=20_000,
                   workers=1, quiet=True)
    two = tokenize([docs], tmp_path / "two", tokenizer_dir=tokenizer_dir, val_tokens=5000, shard_tokens=20_000,
                   workers=2, quiet=True)
    assert one.shards == two.shards and one.documents == 400
    for name, _, _ in one.shards:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()


def test_retokenizing_real_docs_v1_text_gives_the_same_ids(tmp_path, enc, tokenizer_dir):
    val = np.asarray(read_tokens(shared_path("data", "docs-v1", "fineweb_val_000000.bin")))
    starts = np.flatnonzero(val == BOS)[:41]
    for i in range(40):  # each docs-v1 document back to text, one file each
        (tmp_path / "in").mkdir(exist_ok=True)
        (tmp_path / "in" / f"{i:03d}.txt").write_text(enc.decode(val[starts[i] + 1:starts[i + 1]].tolist()))
    result = tokenize([tmp_path / "in"], tmp_path / "out", tokenizer_dir=tokenizer_dir, val_tokens=0,
                      workers=2, quiet=True)
    assert read_tokens(tmp_path / "out" / "fineweb_train_000001.bin").tolist() == val[:starts[40]].tolist()
    assert result.documents == 40


@pytest.mark.parametrize("content, message", [
    ('{"text": "ok"}\n{broken\n', "a.jsonl:2: not valid JSON"),
    ('{"body": "x"}\n', "no string field 'text' (has: body)"),
    ('{"text": "x", "n": ' + "9" * 5000 + "}\n", "a.jsonl:1: not valid JSON (Exceeds the limit"),  # was a traceback
    ('{"text": ' + "[" * 100_000 + "]" * 100_000 + "}\n", "a.jsonl:1: not valid JSON (nested too deeply)"),
])
def test_bad_jsonl_names_file_and_line(tmp_path, tokenizer_dir, content, message):
    (tmp_path / "a.jsonl").write_text(content)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        tokenize([tmp_path / "a.jsonl"], tmp_path / "out", tokenizer_dir=tokenizer_dir, workers=1, quiet=True)


def test_non_utf8_is_an_error_unless_replaced(tmp_path, tokenizer_dir):
    (tmp_path / "latin1.txt").write_bytes("café".encode("latin-1"))
    with pytest.raises(InputError, match="not UTF-8"):
        tokenize([tmp_path / "latin1.txt"], tmp_path / "out", tokenizer_dir=tokenizer_dir, workers=1, quiet=True)
    result = tokenize([tmp_path / "latin1.txt"], tmp_path / "out", tokenizer_dir=tokenizer_dir, workers=1,
                      quiet=True, errors="replace", val_tokens=0)
    assert result.documents == 1


def test_cli_tokenize_json(tmp_path, tokenizer_dir):
    (tmp_path / "a.txt").write_text(DOCS[1])
    proc = subprocess.run([sys.executable, "-m", "pipeline", "data", "tokenize", str(tmp_path / "a.txt"),
                           "--out", str(tmp_path / "out"), "--tokenizer-dir", str(tokenizer_dir),
                           "--val-tokens", "10", "--json"], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["documents"] == 1 and report["shards"][0] == ["fineweb_val_000000.bin", 10, "val"]
    missing = subprocess.run([sys.executable, "-m", "pipeline", "data", "tokenize", str(tmp_path / "none.txt"),
                              "--out", str(tmp_path / "o2"), "--tokenizer-dir", str(tokenizer_dir)],
                             cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 3 and "none.txt does not exist" in missing.stderr


def sigterm_as_ctrl_c(signum, frame):  # the CLI's handler (pipeline/cli/__init__.py)
    raise KeyboardInterrupt


def signal_handlers():
    return signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)


def test_workers_stop_on_sigterm_whatever_the_callers_handler(tokenizer_dir):
    """Under the CLI's Python handler, a worker that Pool.terminate() signalled between its fork and its start-up
    never got the signal (Python drops it) and the command hung; workers now take SIGTERM's default action and
    leave SIGINT to the parent, whose own handlers are back once they are forked."""
    previous = signal.signal(signal.SIGTERM, sigterm_as_ctrl_c)
    try:
        pool = start_pool(2, str(tokenizer_dir))
        try:
            assert {pool.apply(signal_handlers) for _ in range(4)} == {(signal.SIG_DFL, signal.SIG_IGN)}
        finally:
            pool.terminate()
            pool.join()
        assert signal_handlers() == (sigterm_as_ctrl_c, signal.default_int_handler)
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize("name, content", [("a.txt", "x" * 1001), ("a.jsonl", '{"text": "' + "x" * 1001 + '"}\n')])
def test_a_document_over_the_limit_is_refused_before_it_is_held(tmp_path, tokenizer_dir, monkeypatch, name, content):
    """A 200 MB text file without a newline took 9.8 GB to tokenize, a gzipped JSONL line of 1e9 characters
    2 GB before it was refused: each document is now read up to MAX_DOCUMENT_CHARS (64 Mi characters) and no
    further (here the limit is 1,000)."""
    monkeypatch.setattr("pipeline.data.tokenize.MAX_DOCUMENT_CHARS", 1000)
    (tmp_path / name).write_text(content)
    with pytest.raises(InputError, match="a document of more than 1,000 characters"):
        tokenize([tmp_path / name], tmp_path / "out", tokenizer_dir=tokenizer_dir, workers=1, quiet=True)
