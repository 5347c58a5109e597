"""The TFRecord framing, read and checked in Python: each record is an 8-byte length, the
masked crc32c of the length, the data and the masked crc32c of the data. `verify_dir`
checks every shard of a manifest (framing CRCs, record counts, bytes, sha256) and names
the byte offset of the first bad record. GZIP shards are checked after decompression:
their offsets count bytes of the decompressed stream.
"""

from __future__ import annotations

import hashlib
import io
import struct
import zlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import google_crc32c

from tfperf.data.manifest import Manifest, load_manifest

_MASK_DELTA = 0xA282EAD8
HEADER_BYTES = 12  # length (8) + its masked crc (4)
FOOTER_BYTES = 4  # masked crc of the data


def masked_crc(data: bytes) -> int:
    """TFRecord's masked crc32c (rotate right by 15, add a constant)."""
    crc = google_crc32c.value(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def frame(data: bytes) -> bytes:
    """One record as TFRecord writes it."""
    length = struct.pack("<Q", len(data))
    return b"".join(
        (length, struct.pack("<I", masked_crc(length)), data, struct.pack("<I", masked_crc(data)))
    )


class RecordError(Exception):
    """A damaged record: `offset` is where the bad record starts."""

    def __init__(self, offset: int, reason: str):
        self.offset, self.reason = offset, reason
        super().__init__(f"bad record at byte {offset}: {reason}")


class _GzipStream:
    """Decompresses a GZIP file incrementally; a truncated or damaged stream yields every
    byte that could be decompressed, then short reads (so offsets stay exact) and
    `damage` says why."""

    def __init__(self, f: BinaryIO, chunk: int = 2**16):
        self.f, self.raw, self.chunk = f, f, chunk
        self.z = zlib.decompressobj(wbits=31)
        self.buf = bytearray()
        self.damage: str | None = None
        self.done = False

    def _fill(self, n: int) -> None:
        while len(self.buf) < n and not self.done:
            data = self.z.unconsumed_tail or self.f.read(self.chunk)
            if not data:
                if not self.z.eof:
                    self.damage = "the gzip stream ends early (truncated file)"
                self.done = True
                break
            before = self.z.copy()  # a failing call returns nothing: replayed from here
            try:
                self.buf += self.z.decompress(data, self.chunk * 4)
            except zlib.error as exc:
                self.buf += _salvage(before, data)
                self.damage = f"the gzip stream is damaged ({exc})"
                self.done = True
                break
            if self.z.eof:
                rest = self.z.unused_data + self.f.read()
                if rest:  # concatenated gzip members
                    self.z = zlib.decompressobj(wbits=31)
                    self.f = io.BytesIO(rest)

    def read(self, n: int) -> bytes:
        self._fill(n)
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def close(self) -> None:
        self.raw.close()

    def __enter__(self) -> _GzipStream:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _salvage(z: Any, data: bytes) -> bytes:
    """What `z` decompresses of `data` before its error, fed a byte at a time (error path
    only), so that a damaged GZIP shard names the record at the damage, not record 0."""
    out = bytearray()
    for i in range(len(data)):
        try:
            out += z.decompress(data[i : i + 1])
        except zlib.error:
            break
    return bytes(out)


def open_stream(path: str | Path, compression: str = "") -> Any:
    f = open(path, "rb")
    if compression.upper() == "GZIP":
        return _GzipStream(f)
    return f


def sniff_compression(path: str | Path) -> str:
    """'GZIP' when the file starts with gzip's magic bytes, else '' (no manifest at hand)."""
    with open(path, "rb") as f:
        return "GZIP" if f.read(2) == b"\x1f\x8b" else ""


def read_records(
    path: str | Path, compression: str = "", *, check_crc: bool = True
) -> Iterator[tuple[int, bytes]]:
    """(offset, data) for each record; raises RecordError at the first damaged one.

    For GZIP files the offsets count bytes of the decompressed stream. check_crc=False
    trusts the checksums (framing and truncation are still checked): the baselines' path.
    """
    with open_stream(path, compression) as stream:
        offset = 0
        while True:
            head = stream.read(HEADER_BYTES)
            why = f"; {stream.damage}" if getattr(stream, "damage", None) else ""
            if not head:
                if why:
                    raise RecordError(offset, why[2:])
                return
            if len(head) < HEADER_BYTES:
                raise RecordError(offset, f"truncated header ({len(head)} of 12 bytes){why}")
            (length,) = struct.unpack("<Q", head[:8])
            (length_crc,) = struct.unpack("<I", head[8:])
            if check_crc and masked_crc(head[:8]) != length_crc:
                raise RecordError(offset, "length crc mismatch")
            body = stream.read(length + FOOTER_BYTES)
            why = f"; {stream.damage}" if getattr(stream, "damage", None) else ""
            if len(body) < length + FOOTER_BYTES:
                raise RecordError(
                    offset,
                    f"truncated record ({len(body)} of {length + 4} bytes after the header){why}",
                )
            data = body[:length]
            if check_crc and masked_crc(data) != struct.unpack("<I", body[length:])[0]:
                raise RecordError(offset, "data crc mismatch")
            yield offset, data
            offset += HEADER_BYTES + length + FOOTER_BYTES


def first_record(path: str | Path, compression: str = "") -> bytes | None:
    for _, data in read_records(path, compression):
        return data
    return None


def file_sha256(path: str | Path) -> tuple[str, int]:
    """(hex sha256, size) of a file, read in 1 MiB blocks."""
    h, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(2**20), b""):
            h.update(block)
            size += len(block)
    return h.hexdigest(), size


@dataclass
class ShardReport:
    file: str
    split: str
    ok: bool = True
    records: int = 0
    bad_offset: int | None = None  # first bad record (decompressed stream for GZIP)
    problems: list[str] = field(default_factory=list)


@dataclass
class VerifyReport:
    root: str
    compression: str
    shards: list[ShardReport]
    stray_files: list[str]  # temporary files left by an interrupted convert

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.shards)

    @property
    def damaged(self) -> list[ShardReport]:
        return [s for s in self.shards if not s.ok]

    def to_dict(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "ok": self.ok,
            "compression": self.compression,
            "offsets": "decompressed stream" if self.compression else "file",
            "shards": [asdict(s) for s in self.shards],
            "stray_files": self.stray_files,
        }


def verify_shard(root: Path, split: str, info: Any, compression: str) -> ShardReport:
    """Checks one shard against its manifest entry (framing, count, bytes, sha256)."""
    path = root / info.file
    rep = ShardReport(file=info.file, split=split)
    if not path.exists():
        rep.ok = False
        rep.problems.append("missing file")
        return rep
    try:
        for _ in read_records(path, compression):
            rep.records += 1
    except RecordError as exc:
        rep.ok = False
        rep.bad_offset = exc.offset
        where = " of the decompressed stream" if compression else ""
        rep.problems.append(f"record {rep.records} at byte {exc.offset}{where}: {exc.reason}")
    if rep.ok and rep.records != info.records:
        rep.ok = False
        rep.problems.append(f"expected {info.records} records, found {rep.records}")
    sha, size = file_sha256(path)
    if size != info.bytes:
        rep.ok = False
        rep.problems.append(f"expected {info.bytes} bytes, found {size}")
    if sha != info.sha256:
        rep.ok = False
        rep.problems.append(
            f"sha256 differs from the manifest ({sha[:12]}... != {info.sha256[:12]}...)"
        )
    return rep


def verify_dir(root: str | Path, manifest: Manifest | None = None) -> VerifyReport:
    """Re-reads every shard in DIR/manifest.json; never raises for damaged shards."""
    root = Path(root)
    manifest = manifest or load_manifest(root)
    reports = [
        verify_shard(root, split, info, manifest.compression)
        for split, s in manifest.splits.items()
        for info in s.shards
    ]
    stray = sorted(p.name for p in root.iterdir() if ".tmp-" in p.name or p.name.endswith(".tmp"))
    return VerifyReport(str(root), manifest.compression, reports, stray)


def scan_file(path: str | Path, compression: str = "") -> tuple[int, RecordError | None]:
    """(good records, first error) for any TFRecord file, with or without a manifest."""
    n = 0
    try:
        for _ in read_records(path, compression):
            n += 1
    except RecordError as exc:
        return n, exc
    return n, None


def iter_tfrecord(path: str) -> Iterator[bytes]:
    """Every record of one TFRecord file (plain or GZIP), read in plain Python.

    CRCs are not checked: this is the slow Python path of the baselines, which trust
    their files; the tuned pipeline's TFRecordDataset checks them.
    """
    try:
        for _, data in read_records(path, sniff_compression(path), check_crc=False):
            yield data
    except RecordError as exc:
        raise ValueError(f"{path}: {exc}") from None


def index_tfrecord(path: str) -> list[tuple[int, int]]:
    """(offset, length) of each record's data in an uncompressed TFRecord file; seeks past
    the data instead of reading it."""
    out = []
    with open(path, "rb") as f:
        offset = 0
        while header := f.read(HEADER_BYTES):
            if len(header) < HEADER_BYTES:
                raise ValueError(f"{path}: truncated TFRecord header")
            (length,) = struct.unpack("<Q", header[:8])
            out.append((offset + HEADER_BYTES, length))
            offset += HEADER_BYTES + length + FOOTER_BYTES
            f.seek(offset)
    return out
