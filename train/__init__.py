"""Native trainer of the NanoGPT speedrun record 2025-09-23 MuonCustomSizing.

Its math is checked against the record's own program on identical weights by tests/test_train_vs_record.py.

    torchrun --standalone --nproc_per_node=8 -m train --preset record --train-files ... --val-files ... \
        --log-file log.txt --metrics-file metrics.jsonl          (train/__main__.py lists every option)

config.py presets and overrides · model.py the GPT · attention.py FA3 / FlexAttention / dense · fp8.py the FP8 head
· kernels.py the optional kernels (loss.py, xent_triton.py, xent_kernels.py) · data.py shards and loaders ·
schedule.py lr, momentum, windows · log.py record-format log and metrics · profile.py --profile · loop.py the
run · adam.py, muon.py, newton_schulz.py, ns_triton.py the optimizers · program.py the files that make the
program (its identity). Measuring tools (the one-GPU benchmark, kernel checks and timings) are in benchmarks/.
"""
