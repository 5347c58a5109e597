"""What the doctor shows and leaves: rich tables for people and dicts for --json
(render.py), and doctor.json in the run folder for `tfperf report` (saved.py)."""
