"""Campaigns: many runs of one record on a scheduler, gathered into one verified bundle (`repro campaign`).

A campaign is a folder, on the filesystem every node shares:

    CAMPAIGN/
      campaign.yaml              what to run (record, runs wanted, trainer, runtime, data, Slurm options) and
                                 every submission made (engine, job ids, task indices, scripts)   model.py
      prepare.json               what the prepare step left: the data folder and its lock, the image  model.py
      data/<dataset>/            the shards, unless --data-dir names another folder
      image/<environment>.tar.gz the pinned image saved once, for nodes that do not have it (docker runtime)
      slurm/submit-N/*.sbatch    the generated, readable job scripts of submission N           slurm.py
      logs/                      each job's output (Slurm's %j / %A_%a files, or the local engine's)
      tasks/<i>-<job>.json       one file per task attempt: its node, job ids, run directory, outcome
      runs/<record>/<run-id>/    the run directories (`repro train`'s), each with node.json beside run.yaml
      bundles/*.tar.gz, report/  what `repro campaign collect` writes                          collect.py

Modules: model.py (the on-disk records), submit.py (a new campaign, or what an existing one misses),
work.py (the prepare step and one task: what a job runs), engines.py (the engine interface and the local
engine), slurm.py (the Slurm engine), status.py (per-task state from the scheduler and the run
directories; wait), collect.py (verdict, bundle, report and the per-node table).
"""

# The modules the CLI may import (tests/test_layers.py); the others (slurm, ...) are the campaign's own.
PUBLIC = ("model", "submit", "status", "collect", "work", "engines", "names")
