"""Run a record's program with inductor typing Python float kernel arguments fp32 (pipeline/runs/float_args.py).

    torchrun --standalone --nproc_per_node=8 .../launchers/fp32_floats.py train_gpt.py [ARGS]

torchrun starts this file in the program's place. It sets the one flag, then runs the program as `__main__`
exactly as `python train_gpt.py` would: its argv (programs log their own source by reading the file sys.argv[0] names),
its folder first on the path (the 2026 records import `triton_kernels` from beside themselves), its `__file__`.
This folder holds nothing else, so nothing of repro is importable from here.
"""

import os
import runpy
import sys

import torch._inductor.config as inductor_config

if not hasattr(inductor_config, "_use_fp64_for_unbacked_floats"):
    sys.exit("fp32_floats: this torch's inductor has no _use_fp64_for_unbacked_floats; run the program directly")
inductor_config._use_fp64_for_unbacked_floats = False
if len(sys.argv) < 2:
    sys.exit("usage: fp32_floats.py PROGRAM [ARGS]")
if os.environ.get("RANK", "0") == "0":  # in the run's output, marked as repro's, once
    print("[repro] inductor: Python float kernel arguments typed fp32, as the record's torch did "
          "(torch._inductor.config._use_fp64_for_unbacked_floats = False)", file=sys.stderr, flush=True)
sys.argv = sys.argv[1:]
sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
