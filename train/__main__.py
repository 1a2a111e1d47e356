"""Command line of the native trainer.

    torchrun --standalone --nproc_per_node=8 -m train --preset record \
        --train-files 'data/fineweb10B/fineweb_train_*.bin' --val-files 'data/fineweb10B/fineweb_val_*.bin' \
        --log-file runs/x/log.txt --metrics-file runs/x/metrics.jsonl
    python -m train --preset tiny --set num_layers=8 --steps 20 --train-files ... --val-files ... --log-file ...

Plain `python -m train` is world size 1 (8 micro-steps per step for the record's batch). Options:
  --preset record|tiny|demo   the configuration (train/config.py)
  --set key=value             override a config key (repeatable), e.g. --set fp8=false --set data_cycle=true;
                              keys: the fields of train/config.py's TrainConfig, plus steps=N (as --steps)
  --steps N                   scale the record's schedule (scheduled + extension + Muon warm-up) to N steps
  --train-files / --val-files shard globs (override the preset's paths)
  --log-file / --metrics-file record-format log and JSON lines (rank 0 writes them)
  --save-model PATH           rank 0 saves the final model state_dict
  --profile DIR               torch.profiler over timed steps 6..8 (rank 0): DIR/profile.json, DIR/kernels.txt
Exit codes: 0 done, 3 bad configuration or data (one message says what and how to fix it), 1 anything else.
"""

import argparse
import os
import sys

# before torch initialises CUDA: the record's allocator setting (fewer fragmented segments)
os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")

EXIT_BAD_INPUT = 3


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m train", description="Native trainer of the record 2025-09-23.")
    ap.add_argument("--preset", default="record", help="record (default), tiny or demo")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override a config key; repeatable")
    ap.add_argument("--steps", type=int, default=None, help="scale the schedule to this many steps")
    ap.add_argument("--train-files", default=None, help="glob of training shards")
    ap.add_argument("--val-files", default=None, help="glob of validation shards")
    ap.add_argument("--log-file", default=None, help="record-format log (rank 0)")
    ap.add_argument("--metrics-file", default=None, help="metrics as JSON lines (rank 0)")
    ap.add_argument("--save-model", default=None, help="save the final model state_dict here (rank 0)")
    ap.add_argument("--profile", default=None, metavar="DIR", help="profile timed steps 6..8 into DIR (rank 0)")
    return ap.parse_args(argv)


def build_config(args: argparse.Namespace):
    from train.config import apply_overrides, preset

    cfg = preset(args.preset)
    paths = [f"train_files={args.train_files}"] if args.train_files else []
    paths += [f"val_files={args.val_files}"] if args.val_files else []
    cfg = apply_overrides(cfg, paths + args.overrides)
    if args.steps is not None:
        cfg = cfg.with_total_steps(args.steps).validate()
    return cfg


def _wait_for_every_rank() -> None:
    """After a finished run, before teardown: a rank that closes its connections while a peer's last collective
    is still in flight can abort that peer. Only on success: after an error a peer may never arrive."""
    import torch.distributed as dist

    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    from train.config import ConfigError
    from train.data import DataError
    from train.loop import train

    rank = os.environ.get("RANK", "0")
    try:
        cfg = build_config(args)
        train(cfg, args.log_file, args.metrics_file, save_model=args.save_model, profile_dir=args.profile)
        _wait_for_every_rank()
    except (ConfigError, DataError) as exc:
        prefix = f"[rank {rank}] " if os.environ.get("WORLD_SIZE", "1") != "1" else ""
        print(f"{prefix}error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    finally:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
