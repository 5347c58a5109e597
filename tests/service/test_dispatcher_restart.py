"""A dispatcher started with --work-dir is fault tolerant: stopped (SIGTERM) and restarted
with the same --work-dir and --port in the middle of a distributed_epoch job, the job goes
on where it was: the client reads every element once, none twice. Real processes."""

from __future__ import annotations

from helpers.servicekit import free_port, processes, run_tfperf, start, stop


def test_restarted_dispatcher_resumes_its_job(tmp_path):
    import tensorflow as tf

    work_dir, port = tmp_path / "journal", free_port()
    n = 400
    with processes() as procs:
        args = ("dispatcher", "--port", port, "--work-dir", work_dir)
        dispatcher = start(procs, tmp_path, *args)
        # One journal, one dispatcher: a second one on the same --work-dir is refused.
        res = run_tfperf(
            "data-service", "dispatcher", "--port", free_port(), "--work-dir", work_dir
        )
        assert res.returncode == 2 and "--work-dir" in res.stderr and "in use by" in res.stderr
        for _ in range(2):
            start(procs, tmp_path, "worker", "--dispatcher", dispatcher.target, "--timeout", 120)
        ds = tf.data.Dataset.range(n).apply(
            tf.data.experimental.service.distribute(
                "distributed_epoch", service=dispatcher.address, job_name="resume"
            )
        )
        it = ds.as_numpy_iterator()
        before = [int(next(it)) for _ in range(50)]

        assert stop(dispatcher) == 0, dispatcher.err()
        again = start(procs, tmp_path, *args)
        assert again.address == dispatcher.address
        after = [int(x) for x in it]

    got = before + after
    assert len(got) == len(set(got)), "an element was served twice: the job started over"
    assert set(got) == set(range(n))
