"""MovieLens watch histories (variable-length id lists, padded) for next-movie recommendation.

Source: tensorflow/examples lite/examples/recommendation/ml/model/input_pipeline.py
(get_input_dataset: TFRecordDataset(input_files), shuffle(len(input_files)) -- a shuffle
of records with a buffer the size of the file list --, repeat(), shuffle(10000),
map(decode_example, num_parallel_calls=8), batch(batch_size, drop_remainder=True),
prefetch(1); decode_example: parse_single_example with a FixedLenFeature per configured
feature (the histories padded to their length with 0, 'UNK' or 0.0), a
StaticVocabularyTable lookup (vocabulary file, one OOV bucket) for the features that name
a vocabulary, int64 cast to int32), with the records written as
lite/examples/recommendation/ml/data/example_generation_movielens.py writes them: per
rating, the user's previous movies (up to 10: context_movie_id, context_movie_rating,
context_movie_year; their genres up to 32: context_movie_genre), padded, and the rated
movie as label_movie_id. The input config here: those four context features, the genre
and year looked up in vocabulary files, the label label_movie_id.

Flaw: each record parsed alone (four padded lists) and looked up in two hash tables per
example, at a fixed parallelism of 8; prefetch(1).
Twin: shuffle(10000), repeat, batch, then one parse_example and one lookup per feature per
batch in a parallel map, prefetch(AUTOTUNE).
Compared: one epoch (epochs=1) without dropping the last partial batch, ignoring order.
Batch size: ours (the launcher takes it as a flag).
"""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from ._shared import count, write_tfrecords

SOURCE = (
    "tensorflow/examples lite/examples/recommendation/ml/model/input_pipeline.py "
    "(on-device recommendation, MovieLens)"
)
FORMAT = "TFRecord of tf.train.Example (padded id, rating, genre and year histories)"
KIND = "recommendation"
FLAW = "parse_single_example + vocabulary lookups per record, map of 8, prefetch(1)"
TWIN = "shuffle, batch, one parse_example and lookup per batch in a parallel map, prefetch"
BATCH_SIZE = 64
SAME_KWARGS = {"epochs": 1, "drop_remainder": False}
# MovieLens 1M gives 994,169 examples (one per rating after a user's first); "full" writes
# 500,000 of them so that the writing takes about a minute.
FULL = 500_000
N_MOVIES = 3952
GENRES = ["Action", "Adventure", "Animation", "Children's", "Comedy", "Crime", "Documentary"]
GENRES += ["Drama", "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery", "Romance"]
GENRES += ["Sci-Fi", "Thriller", "War", "Western"]
MAX_CONTEXT_LEN = 10
MAX_GENRE_LEN = 32
# (name, type, length, vocabulary file)
FEATURES = [
    ("context_movie_id", "INT", MAX_CONTEXT_LEN, None),
    ("context_movie_rating", "FLOAT", MAX_CONTEXT_LEN, None),
    ("context_movie_genre", "STRING", MAX_GENRE_LEN, "movie_genre_vocab.txt"),
    ("context_movie_year", "INT", MAX_CONTEXT_LEN, "movie_year_vocab.txt"),
]
LABEL = "label_movie_id"
INT_DEFAULT_VALUE = 0
STRING_DEFAULT_VALUE = "UNK"
FLOAT_DEFAULT_VALUE = 0.0


def make_data(dir: str, size: str = "small") -> None:
    n = count(size, 2000, FULL)
    rng = np.random.default_rng(27)
    years = rng.integers(1919, 2001, N_MOVIES + 1)
    genres = [rng.choice(GENRES, int(rng.integers(1, 4)), replace=False) for _ in years]
    (Path(dir) / "movie_genre_vocab.txt").write_text("\n".join(GENRES) + "\n")
    (Path(dir) / "movie_year_vocab.txt").write_text(
        "\n".join(str(y) for y in range(1919, 2001)) + "\n"
    )

    def examples():
        for _ in range(n):
            k = int(min(rng.integers(1, 40), MAX_CONTEXT_LEN))  # short histories are padded
            ids = rng.integers(1, N_MOVIES + 1, k)
            pad = MAX_CONTEXT_LEN - k
            g = [str(x) for i in ids for x in genres[i]][:MAX_GENRE_LEN]
            yield {
                "context_movie_id": ids.tolist() + [INT_DEFAULT_VALUE] * pad,
                "context_movie_rating": rng.integers(1, 6, k).astype(float).tolist()
                + [FLOAT_DEFAULT_VALUE] * pad,
                "context_movie_year": years[ids].tolist() + [INT_DEFAULT_VALUE] * pad,
                "context_movie_genre": g + [STRING_DEFAULT_VALUE] * (MAX_GENRE_LEN - len(g)),
                LABEL: [int(rng.integers(1, N_MOVIES + 1))],
            }

    shards = 8 if size == "full" else 2
    write_tfrecords(str(Path(dir) / "train_movielens_1m.tfrecord-%05d-of-%05d"), examples(), shards)


# ---- input_pipeline.py ----------------------------------------------------------------------
def _prepare_feature_vocab_table(feature_type, vocab_path):
    num_oov_buckets = 1
    key_type = tf.string if feature_type == "STRING" else tf.int64
    return tf.lookup.StaticVocabularyTable(
        tf.lookup.TextFileInitializer(
            vocab_path,
            key_dtype=key_type,
            key_index=tf.lookup.TextFileIndex.WHOLE_LINE,
            value_dtype=tf.int64,
            value_index=tf.lookup.TextFileIndex.LINE_NUMBER,
            delimiter="\t",
        ),
        num_oov_buckets,
    )


def _vocabs(dir: str) -> dict:
    return {
        name: _prepare_feature_vocab_table(kind, str(Path(dir) / vocab))
        for name, kind, _, vocab in FEATURES
        if vocab
    }


def _get_feature_spec(feature_type, feature_length):
    if feature_type == "INT":
        dtype, default_value = tf.int64, INT_DEFAULT_VALUE
    elif feature_type == "STRING":
        dtype, default_value = tf.string, STRING_DEFAULT_VALUE
    elif feature_type == "FLOAT":
        dtype, default_value = tf.float32, FLOAT_DEFAULT_VALUE
    else:
        raise ValueError(f"Unsupported feature type {feature_type}")
    return tf.io.FixedLenFeature(
        shape=[feature_length], dtype=dtype, default_value=[default_value] * feature_length
    )


def _name_to_features():
    name_to_features = {LABEL: tf.io.FixedLenFeature([1], tf.int64)}
    for feature_name, kind, length, _ in FEATURES:
        name_to_features[feature_name] = _get_feature_spec(kind, length)
    return name_to_features


def decode_example(serialized_proto, vocabs_by_name, label_feature_name):
    record_features = tf.io.parse_single_example(serialized_proto, _name_to_features())
    features = {}
    for feature_name, feature_value in record_features.items():
        if feature_name in vocabs_by_name:
            features[feature_name] = vocabs_by_name[feature_name].lookup(feature_value)
        else:
            features[feature_name] = feature_value
    features = {k: v if v.dtype != tf.int64 else tf.cast(v, tf.int32) for k, v in features.items()}
    label_feature = features[label_feature_name]
    return features, label_feature


def _files(dir: str) -> list[str]:
    return sorted(str(p) for p in Path(dir).glob("train_movielens_1m.tfrecord-*"))


def original(
    dir: str, batch_size: int = BATCH_SIZE, epochs: int | None = None, drop_remainder: bool = True
) -> tf.data.Dataset:
    vocabs = _vocabs(dir)
    input_files = _files(dir)
    d = tf.data.TFRecordDataset(input_files)
    d = d.shuffle(len(input_files))
    d = d.repeat(epochs)
    d = d.shuffle(buffer_size=10000)
    d = d.map(lambda p: decode_example(p, vocabs, LABEL), num_parallel_calls=8)
    d = d.batch(batch_size, drop_remainder=drop_remainder)
    d = d.prefetch(1)
    return d


# ---- the hand-tuned twin --------------------------------------------------------------------
def tuned(
    dir: str, batch_size: int = BATCH_SIZE, epochs: int | None = None, drop_remainder: bool = True
) -> tf.data.Dataset:
    vocabs = _vocabs(dir)
    spec = _name_to_features()

    def decode_batch(records):
        parsed = tf.io.parse_example(records, spec)
        features = {k: vocabs[k].lookup(v) if k in vocabs else v for k, v in parsed.items()}
        features = {
            k: v if v.dtype != tf.int64 else tf.cast(v, tf.int32) for k, v in features.items()
        }
        return features, features[LABEL]

    d = tf.data.TFRecordDataset(_files(dir)).shuffle(10000).repeat(epochs)
    d = d.batch(batch_size, drop_remainder=drop_remainder)
    return d.map(decode_batch, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def model() -> keras.Model:
    """A small stand-in for the example's context encoder (bag-of-words embeddings of the
    history features, a dense layer) with a softmax over the movies in place of its
    dot-product similarity against the label encoder."""
    inputs = {LABEL: keras.Input(shape=(1,), dtype="int32", name=LABEL)}
    pooled = []
    for name, kind, length, vocab in FEATURES:
        dtype = "float32" if kind == "FLOAT" else "int32"
        inputs[name] = keras.Input(shape=(length,), dtype=dtype, name=name)
        if kind == "FLOAT":
            pooled.append(keras.layers.Dense(8)(inputs[name]))
            continue
        size = N_MOVIES + 1 if vocab is None else 128
        emb = keras.layers.Embedding(size, 16)(inputs[name])
        pooled.append(keras.layers.GlobalAveragePooling1D()(emb))
    x = keras.layers.Dense(32, activation="relu")(keras.layers.Concatenate()(pooled))
    m = keras.Model(inputs, keras.layers.Dense(N_MOVIES + 1)(x))
    m.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m
