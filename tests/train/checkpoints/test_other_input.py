"""A checkpoint whose iterator belongs to another pipeline (checkpoints/other_input.py), on
real checkpoints of one variable and a tf.data iterator: the same pipeline restores its
input; another pipeline's iterator is refused by TensorFlow, and then `auto` restores the
rest and says the input was not restored, `require` is one error naming train.restore_input,
`skip` never tries the input; a checkpoint whose variables do not read is damaged (the
OpError read_newest names as such)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfperf.train.checkpoints.damaged import read_newest
from tfperf.train.checkpoints.other_input import OtherInputError, reader, restarted_note


def pipeline(kind: str):
    import tensorflow as tf

    ds = tf.data.Dataset.range(100)
    if kind == "old":
        return ds.map(lambda x: x * 2).batch(4).prefetch(2)
    return ds.batch(4).map(lambda x: x * 2, num_parallel_calls=2).prefetch(2)  # --fix's order


@pytest.fixture
def saved(tmp_path: Path) -> str:
    import tensorflow as tf

    it = iter(pipeline("old"))
    next(it)
    return tf.train.Checkpoint(v=tf.Variable(7), iterator=it).save(str(tmp_path / "ckpt"))


def checkpoints(kind: str):
    import tensorflow as tf

    v, it = tf.Variable(0), iter(pipeline(kind))
    return v, it, tf.train.Checkpoint(v=v)


def test_the_same_pipeline_restores_its_input(saved):
    v, it, bare = checkpoints("old")
    assert reader(bare, it, "auto", "run.yaml")(saved) is True
    assert int(v.numpy()) == 7 and next(it).numpy().tolist() == [8, 10, 12, 14]


def test_another_pipelines_input_restores_the_rest_under_auto(saved):
    v, it, bare = checkpoints("new")
    assert reader(bare, it, "auto", "run.yaml")(saved) is False
    assert int(v.numpy()) == 7
    path, restored, damaged = read_newest(
        [saved], reader(bare, it, "auto", "run.yaml"), purpose="resuming", fix="f"
    )
    assert (path, restored, damaged) == (saved, False, [])  # not called damaged
    assert "starts from its beginning" in restarted_note(saved, 7)


def test_require_is_one_error_naming_the_key(saved):
    v, it, bare = checkpoints("new")
    with pytest.raises(OtherInputError) as err:
        reader(bare, it, "require", "run.yaml")(saved)
    text = str(err.value)
    assert text.startswith("train.restore_input: require, but ") and "another pipeline" in text
    assert "run.yaml" in text and "\n" not in text


def test_skip_never_restores_the_input(saved):
    v, it, bare = checkpoints("old")
    assert reader(bare, it, "skip", "run.yaml")(saved) is False
    assert int(v.numpy()) == 7 and next(it).numpy().tolist() == [0, 2, 4, 6]  # from the start


def test_real_damage_stays_damage(saved):
    import tensorflow as tf

    data = next(Path(saved).parent.glob(Path(saved).name + ".data-*"))
    flipped = bytearray(data.read_bytes())
    for i in range(0, len(flipped), 64):
        flipped[i] ^= 0xFF  # as test_damaged flips them
    data.write_bytes(bytes(flipped))
    _, it, bare = checkpoints("new")
    with pytest.raises(tf.errors.OpError):
        reader(bare, it, "auto", "run.yaml")(saved)
