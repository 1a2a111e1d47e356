"""records stage: record manifests and what reads records (logs, program identity, published logs).

PUBLIC lists the modules other packages may import (tests/test_layers.py holds every import to it);
the others are this stage's own. Names, not imports: importing the package loads nothing.
"""

PUBLIC = ("model", "logparse", "logfacts", "identity", "program", "published", "patch", "importer",
          "environment_choice", "history_plot", "nvidia_smi_table", "program_files", "selection", "smoke_cut",
          "upstream_table", "data_need", "triton_launches", "triton_compile", "eras", "log_cache", "val_window",
          "import_memo", "world_size")
