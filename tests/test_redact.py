"""pipeline/redact.py: one list of secret names and value shapes, used by every scrubber."""

from __future__ import annotations

from pipeline.preflight.parse import allowed_environment
from pipeline.redact import REDACTED, Redactor, is_secret_name, public_url, scrub_urls, without_secrets


def test_secret_values_all_digits_and_paths_are_redacted():
    env = {"DB_PASSWORD": "8675309123", "GOOGLE_APPLICATION_CREDENTIALS": "/home/me/.keys/gcp.json",
           "HF_TOKEN": "hf_" + "x" * 30, "PATH": "/usr/bin", "API_KEY": "12345678"}
    text = ("password 8675309123 then /home/me/.keys/gcp.json opened; key=12345678; "
            "PATH is /usr/bin\n")
    clean, count = Redactor.from_environ(env).text(text)
    for value in ("8675309123", "/home/me/.keys/gcp.json", "12345678"):
        assert value not in clean
    assert "/usr/bin" in clean and count == 3


def test_short_secret_values_are_redacted_where_they_are_assigned():
    env = {"PIN_SECRET": "42"}
    clean, count = Redactor.from_environ(env).text("PIN_SECRET=42 step 42 loss 3.42 DB_PASS: 7\n")
    assert clean == f"PIN_SECRET={REDACTED} step 42 loss 3.42 DB_PASS: {REDACTED}\n" and count == 2


def test_flag_words_stay_and_already_redacted_values_are_not_counted_twice():
    env = {"TOKENIZERS_PARALLELISM": "false", "HF_TOKEN": "hf_" + "a" * 25}
    clean, count = Redactor.from_environ(env).text(f"parallel false HF_TOKEN={env['HF_TOKEN']}")
    assert clean == f"parallel false HF_TOKEN={REDACTED}" and count == 1


def test_one_name_list_for_recording_and_redacting():
    for name in ("HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "GH_AUTH", "SESSION_COOKIE", "MY_CREDS"):
        assert is_secret_name(name)
    env = {"NCCL_DEBUG": "INFO", "NCCL_AUTH_KEY": "x", "PATH": "/bin"}
    assert allowed_environment(env) == {"NCCL_DEBUG": "INFO"}
    assert without_secrets(env) == {"NCCL_DEBUG": "INFO", "PATH": "/bin"}


def test_urls_lose_credentials_and_signed_queries():
    assert public_url("https://user:pw@host:8443/a/b?X-Amz-Signature=abc") == "https://host:8443/a/b"
    assert public_url("https://tok@host/simple?x=1", keep_query=True) == "https://host/simple?x=1"
    assert scrub_urls("proxy http://u:p@proxy:3128 down") == f"proxy http://{REDACTED}@proxy:3128 down"


def test_all_digit_and_path_secrets_never_reach_a_bundle(tmp_path):
    """The issue's case end to end: values of secret variables in stdout.txt and run.yaml, archived."""
    import tarfile

    import yaml

    from tests.test_bundle import make_bundle, make_data_dir, make_run

    digits, path = "4815162342", "/home/alice/.config/gcloud/key-7f3a.json"
    environ = {"DB_PASSWORD": digits, "GOOGLE_APPLICATION_CREDENTIALS": path, "PATH": "/usr/bin"}
    data = make_data_dir(tmp_path)
    run = make_run(tmp_path, "20261129T105700Z-aaaa", data_dir=data,
                   stdout=f"db password {digits}\ncredentials at {path}\nDB_PASSWORD={digits}\n")
    meta = yaml.safe_load((run / "run.yaml").read_text())
    meta["command"].append(f"--credentials={path}")
    (run / "run.yaml").write_text(yaml.safe_dump(meta))
    bundle = make_bundle([run, make_run(tmp_path, "20261129T110500Z-bbbb", loss=3.2799, data_dir=data)],
                         tmp_path / "bundles", environ=environ)
    with tarfile.open(bundle) as tar:
        members = {m.name.partition("/")[2]: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    for name, blob in members.items():
        assert digits.encode() not in blob and path.encode() not in blob, name
    assert b"DB_PASSWORD=[REDACTED]" in members["runs/20261129T105700Z-aaaa/stdout.txt"]
