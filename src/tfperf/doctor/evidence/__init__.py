"""What the rules read and what they conclude, as plain data: the `Evidence` (evidence.py),
a `Finding` and the whole `Diagnosis` (findings.py), and the cost model that turns measured
rates and CPU times into training speed (cost_model.py). Nothing here measures."""
