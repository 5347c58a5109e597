"""What the doctor times and how it stays safe doing it: the probes of the model and
pipeline (target.py), the time budget (budget.py), the copy it is safe to time, within the
RAM budget (bounded.py), a generator's data written to shards on a sample (generator_sample.py),
and the models handed over in Python (handed.py)."""
