"""A stand-in for the record's train_gpt.py in tests: no torch, the same contract with its surroundings.

Like the record's program it runs under torchrun in a folder holding data/fineweb10B/, prints its own
source, a line of 100 '=', the versions and the step lines into logs/<uuid>.txt (rank 0 only), and
echoes them to stdout. Options come from data/fineweb10B/standin.json, so a test steers it through
the data it mounts: {"steps": 20, "step_s": 0.0, "fail_at": null, "exit_code": 3, "loss": 3.275,
"makes_logs": true}.
It also counts its runs in $TORCHINDUCTOR_CACHE_DIR, so a reused compile cache is visible.
"""
import glob
import json
import os
import resource
import sys
import time
import uuid

with open(sys.argv[0]) as f:
    code = f.read()
rank = int(os.environ.get("RANK", "0"))
world_size = int(os.environ.get("WORLD_SIZE", "1"))
data = "data/fineweb10B"
options_file = os.path.join(data, "standin.json")
options = json.load(open(options_file)) if os.path.exists(options_file) else {}
steps = int(options.get("steps", 20))
step_s = float(options.get("step_s", 0.0))
fail_at = options.get("fail_at")
train_files = sorted(glob.glob(os.path.join(data, "fineweb_train_*.bin")))
assert train_files, f"no training shards in {os.path.abspath(data)}"

logfile = None
if rank == 0:
    if options.get("makes_logs", True):  # false: like 2024-12-17_SparsifyEmbeds, rely on the checkout's logs/
        os.makedirs("logs", exist_ok=True)
    logfile = f"logs/{uuid.uuid4()}.txt"
    print(logfile, flush=True)


def print0(s, console=True):
    if rank == 0:
        with open(logfile, "a") as f:
            print(s, file=f)
        if console:
            print(s, flush=True)


print0(code, console=False)
print0("=" * 100)
print0(f"Running Python {sys.version}")
print0("Running PyTorch 0.0.0+standin compiled for CUDA none")
print0("Running Triton version 0.0.0")
print0(f"(stand-in: {world_size} process(es), {len(train_files)} training shard(s), no nvidia-smi)")
memlock, stack = (resource.getrlimit(limit)[1] for limit in (resource.RLIMIT_MEMLOCK, resource.RLIMIT_STACK))
print0(f"limits: memlock {memlock} stack {stack}")
print0("=" * 100)

cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
if rank == 0 and cache:
    os.makedirs(cache, exist_ok=True)
    marker = os.path.join(cache, "standin-runs.txt")
    earlier = open(marker).read().count("\n") if os.path.exists(marker) else 0
    print(f"compile cache: {earlier} earlier run(s) in {cache}", flush=True)
    with open(marker, "a") as f:
        f.write(f"{uuid.uuid4()}\n")

train_ms = 0.0
for step in range(steps + 1):
    if step == 0 or step == steps:
        loss = float(options.get("loss", 3.275)) if step == steps else 10.83
        print0(f"step:{step}/{steps} val_loss:{loss:.4f} train_time:{train_ms:.0f}ms "
               f"step_avg:{train_ms / max(step, 1):.2f}ms")
    if step == steps:
        break
    if fail_at is not None and step == int(fail_at):
        print(f"stand-in: failing at step {step} as asked", file=sys.stderr, flush=True)
        sys.exit(int(options.get("exit_code", 1)))
    time.sleep(step_s)
    train_ms += 89.1
    print0(f"step:{step + 1}/{steps} train_time:{train_ms:.0f}ms step_avg:{train_ms / (step + 1):.2f}ms")
print0("peak memory allocated: 30760 MiB reserved: 45914 MiB")
