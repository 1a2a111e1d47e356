"""`--python-env system` trains with the Python running repro: a torch and Triton there that do not compile the
program's own Triton kernels (by manifests/triton-kernels.yaml) are refused by `--plan` and by `reproduce` before
any stage, unless the run types the program's Python floats back as the record's own torch did (torch >= 2.11
against a record of torch <= 2.10: pipeline/runs/float_args.py), which it then declares. The installed versions
are read from the packages' metadata (torch is never imported), so a real `*.dist-info` folder put first on the
path stands for an installed torch 2.11 with Triton 3.6.0, as on the H200."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.paths import REPO_ROOT

# triton_kernels.py of 2026-03-22_VarlenMaxDocs and 2026-04-08_PairedHeadMuon: its fused_softcapped_entropy_fwd_kernel
# does not compile with its Python floats typed fp64, as torch >= 2.11's inductor types them
KERNELS = {"name": "triton_kernels.py", "sha256": "cb0d6f4f1753eba0d5db606f8a2750b6ff16f429cb2dcb9ae9ee4464a168f32b"}
SNIPPET = ("import json, sys; from pipeline.reproduce.program_needs import installed_versions, system_refusal, "
           "system_float_args as floats; files, torch = json.loads(sys.argv[1]), sys.argv[2]; "
           "print(json.dumps([installed_versions(), system_refusal(files, torch), floats(b'@triton.jit', torch)]))")
PAIRED_HEAD_MUON_TORCH = "2.10.0+cu126"  # its logs' header


def _installed(tmp_path, torch: str, triton: str) -> list[str]:
    site = tmp_path / f"site-{torch}"
    for name, version in (("torch", torch), ("triton", triton)):
        info = site / f"{name}-{version.split('+')[0]}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return [str(site), str(REPO_ROOT)]


def _ask(paths: list[str], record_torch: str) -> list:
    env = {"PYTHONPATH": ":".join(paths), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", SNIPPET, json.dumps([KERNELS]), record_torch], capture_output=True,
                          text=True, env=env, cwd=REPO_ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_torch_2_11_types_a_torch_2_10_records_floats_back_and_says_so(tmp_path):
    versions, why, floats = _ask(_installed(tmp_path, "2.11.0+cu130", "3.6.0"), PAIRED_HEAD_MUON_TORCH)
    assert versions == ["2.11.0+cu130", "3.6.0"] and why == ""
    assert floats.startswith("torch 2.11.0+cu130's inductor types a Python float kernel argument fp64, the record's "
                             "torch 2.10.0+cu126 typed it fp32: the run sets "
                             "torch._inductor.config._use_fp64_for_unbacked_floats = False")


def test_where_the_typings_agree_the_failing_kernel_is_refused_naming_it(tmp_path):
    # a record that ran torch 2.11 itself: no typing to give back, so Triton 3.6.0's fp64 failure stands
    versions, why, floats = _ask(_installed(tmp_path, "2.11.0+cu130", "3.6.0"), "2.11.0+cu128")
    assert floats == ""
    assert why.startswith("environment: this Python's Triton 3.6.0 under torch 2.11.0+cu130 does not compile "
                          "triton_kernels.py's fused_softcapped_entropy_fwd_kernel")
    assert "fp64" in why and "drop --python-env system" in why


def test_the_records_own_torch_2_10_compiles_them_as_they_are(tmp_path):
    versions, why, floats = _ask(_installed(tmp_path, "2.10.0+cu128", "3.6.0"), PAIRED_HEAD_MUON_TORCH)
    assert versions == ["2.10.0+cu128", "3.6.0"] and why == "" and floats == ""
