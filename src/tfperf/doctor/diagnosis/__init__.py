"""`tfperf doctor`'s diagnosis: the pipeline, the model and both together measured side by
side (diagnose.py), stage by stage (stages.py), with what-ifs (what_ifs.py) and with --fix's
first rewrites (rewritten.py), gathered into the `Evidence` that the rules judge."""
