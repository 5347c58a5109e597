"""tf.train.Example's messages (feature.proto, example.proto) built from their field
numbers in a private descriptor pool, so that writing Examples needs only protobuf: a
`convert` worker process then never imports TensorFlow (~5 s of CPU each). The bytes are
those of TensorFlow's own classes (same field numbers and packing; tested)."""

from __future__ import annotations

from functools import cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto


def _field(msg: Any, name: str, number: int, kind: int, label: int, type_name: str = "") -> Any:
    f = msg.field.add(name=name, number=number, type=kind, label=label)
    if type_name:
        f.type_name = type_name
    return f


def _file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(
        name="tfperf/example.proto", package="tensorflow", syntax="proto3"
    )
    rep, opt = _F.LABEL_REPEATED, _F.LABEL_OPTIONAL
    lists = (
        ("bytes_list", "BytesList", _F.TYPE_BYTES),
        ("float_list", "FloatList", _F.TYPE_FLOAT),
        ("int64_list", "Int64List", _F.TYPE_INT64),
    )
    feature = fd.message_type.add(name="Feature")
    feature.oneof_decl.add(name="kind")
    for number, (field, name, kind) in enumerate(lists, start=1):
        values = _field(fd.message_type.add(name=name), "value", 1, kind, rep)
        if kind != _F.TYPE_BYTES:
            values.options.packed = True  # as in feature.proto: numbers are packed
        _field(feature, field, number, _F.TYPE_MESSAGE, opt, f".tensorflow.{name}").oneof_index = 0
    features = fd.message_type.add(name="Features")
    entry = features.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    _field(entry, "key", 1, _F.TYPE_STRING, opt)
    _field(entry, "value", 2, _F.TYPE_MESSAGE, opt, ".tensorflow.Feature")
    _field(features, "feature", 1, _F.TYPE_MESSAGE, rep, ".tensorflow.Features.FeatureEntry")
    example = fd.message_type.add(name="Example")
    _field(example, "features", 1, _F.TYPE_MESSAGE, opt, ".tensorflow.Features")
    return fd


@cache
def messages() -> dict[str, Any]:
    """{name: message class} for Example, Features, Feature, BytesList, FloatList, Int64List."""
    pool = descriptor_pool.DescriptorPool()  # private: no clash with TensorFlow's own
    pool.Add(_file())
    names = ("Example", "Features", "Feature", "BytesList", "FloatList", "Int64List")
    return {
        n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"tensorflow.{n}"))
        for n in names
    }
