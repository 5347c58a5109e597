"""Helpers shared by the tests, imported as `helpers.<module>` (pyproject's pytest
`pythonpath` puts tests/ on sys.path; tests/conftest.py puts it on PYTHONPATH too, so that a
`tfperf` subprocess can import a run file's `helpers.slow_pipelines:clean`).

trainkit: tiny data, models and run files for training; service_cluster and servicekit: real
tf.data service processes; clikit: `tfperf` as a subprocess; reportkit and browser: one real
run and its report opened in Chromium; testingkit: pipelines for tfperf.testing;
slow_pipelines: slow pipelines and tiny models named by the doctor's run files;
doctorkit: small pipelines and run files of the doctor's tests;
user_pipelines: the suite of users' slow pipelines (also read by benchmarks/)."""
