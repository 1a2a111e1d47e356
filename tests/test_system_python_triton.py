"""`--python-env system` trains with the Python running repro: a torch and Triton there that do not compile the
program's own Triton kernels (by manifests/triton-kernels.yaml) are refused by `--plan` and by `reproduce` before
any stage. The installed versions are read from the packages' metadata (torch is never imported), so a real
`*.dist-info` folder put first on the path stands for an installed torch 2.11 with Triton 3.6.0, as on the H200."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.paths import REPO_ROOT

# triton_kernels.py of 2026-03-22_VarlenMaxDocs and 2026-04-08_PairedHeadMuon: its fused_softcapped_entropy_fwd_kernel
# does not compile with its Python floats typed fp64, as torch >= 2.11's inductor types them
KERNELS = {"name": "triton_kernels.py", "sha256": "cb0d6f4f1753eba0d5db606f8a2750b6ff16f429cb2dcb9ae9ee4464a168f32b"}
SNIPPET = ("import json, sys; from pipeline.reproduce.program_needs import installed_versions, system_refusal; "
           "print(json.dumps([installed_versions(), system_refusal(json.loads(sys.argv[1]))]))")


def _installed(tmp_path, torch: str, triton: str) -> list[str]:
    site = tmp_path / f"site-{torch}"
    for name, version in (("torch", torch), ("triton", triton)):
        info = site / f"{name}-{version.split('+')[0]}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return [str(site), str(REPO_ROOT)]


def _ask(paths: list[str]) -> list:
    env = {"PYTHONPATH": ":".join(paths), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", SNIPPET, json.dumps([KERNELS])], capture_output=True, text=True,
                          env=env, cwd=REPO_ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_torch_2_11_with_triton_3_6_is_refused_naming_the_kernel_and_the_cause(tmp_path):
    versions, why = _ask(_installed(tmp_path, "2.11.0+cu130", "3.6.0"))
    assert versions == ["2.11.0+cu130", "3.6.0"]
    assert why.startswith("environment: this Python's Triton 3.6.0 under torch 2.11.0+cu130 does not compile "
                          "triton_kernels.py's fused_softcapped_entropy_fwd_kernel")
    assert "fp64" in why and "drop --python-env system" in why


def test_the_records_own_torch_2_10_compiles_them(tmp_path):
    versions, why = _ask(_installed(tmp_path, "2.10.0+cu128", "3.6.0"))
    assert versions == ["2.10.0+cu128", "3.6.0"] and why == ""
