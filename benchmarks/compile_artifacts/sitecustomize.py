"""torch.compiler's portable cache artifacts ("mega-cache") for any program, without changing it.

Python imports this module at start-up when its folder is first on PYTHONPATH (benchmarks/sidebyside.py --site
benchmarks/compile_artifacts). In a torchrun worker of local rank 0, with the environment:
  REPRO_COMPILE_ARTIFACTS_LOAD=FILE  before the program runs: torch.compiler.load_cache_artifacts(FILE's bytes),
                                     which fills the local compile caches (Inductor, AOTAutograd, Triton,
                                     autotuning) as a run that compiled everything would have left them;
  REPRO_COMPILE_ARTIFACTS_SAVE=FILE  at exit: torch.compiler.save_cache_artifacts() written to FILE (atomically).
It prints one line per action, `[compile artifacts] ...`, with the seconds it took. A failure is printed and the
program runs on: a cache must never stop a run. Other processes (the launcher, other ranks) are left alone.
Run as a script (`python sitecustomize.py FILE`) it loads FILE once into the caches the environment names
(device_session.sh's carried artifacts) and exits 1 if it could not.
"""

import os
import sys
import time

_LOAD, _SAVE = os.environ.get("REPRO_COMPILE_ARTIFACTS_LOAD"), os.environ.get("REPRO_COMPILE_ARTIFACTS_SAVE")


def _say(text: str) -> None:
    print(f"[compile artifacts] {text}", file=sys.stderr, flush=True)


def _load(path: str) -> bool:
    import torch

    began = time.perf_counter()
    try:
        with open(path, "rb") as f:
            info = torch.compiler.load_cache_artifacts(f.read())
        if info is None:  # torch logs why and returns None when it cannot read them
            raise ValueError("torch.compiler.load_cache_artifacts returned None")
        _say(f"loaded {path} in {time.perf_counter() - began:.1f} s: {info}")
        return True
    except Exception as exc:  # noqa: BLE001 - any failure: say so, run uncached
        _say(f"could not load {path}: {type(exc).__name__}: {exc}")
        return False


def _save(path: str) -> None:
    import torch

    began = time.perf_counter()
    try:
        saved = torch.compiler.save_cache_artifacts()
        if saved is None:
            _say("nothing to save (this process compiled nothing)")
            return
        data, info = saved
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)
        _say(f"saved {len(data)} bytes to {path} in {time.perf_counter() - began:.1f} s: {info}")
    except Exception as exc:  # noqa: BLE001
        _say(f"could not save {path}: {type(exc).__name__}: {exc}")


if __name__ == "__main__":  # python sitecustomize.py FILE: load FILE into the caches once (exit 1: not loaded)
    sys.exit(0 if _load(sys.argv[1]) else 1)
elif os.environ.get("LOCAL_RANK") == "0" and (_LOAD or _SAVE):
    if _LOAD:
        _load(_LOAD)
    if _SAVE:
        import atexit

        atexit.register(_save, _SAVE)
