"""
scripts/reporting — the sections of results/REPORT.md, one module each, assembled by
scripts/report.py: header (the run and the machine), seed000 .. seed004 (one per seed
report), scaling, model (the alpha-beta model, scripts/model.py), pytorch, skipped, timings. Shared pieces: common (formatting, one
configuration's medians, the inputs of a results directory, the document being written)
and machine (the probes of the machine table). The seed reports' published numbers come
from scripts/seeds.py, the variant names from scripts/partrain.py.
"""
