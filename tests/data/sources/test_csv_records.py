"""data/sources/csv_records.py: CSV records with the byte offset and the line they start on
(a quoted cell spanning lines counts its lines; blank lines are no records), unreadable
records kept with what was wrong, and the one scan that indexes a file every BLOCK rows so
that a reader seeks straight to its rows; a header that cannot name the columns refused."""

from __future__ import annotations

import io

import pytest

from tfperf.data.sources.csv_records import BLOCK, CsvFormatError, records, scan


def test_records_know_their_offset_and_line():
    text = b'a,b\n1,"two\nlines"\n\n3,x\n'
    got = [(off, r.line, r.cells) for off, r in records(io.BytesIO(text))]
    assert got == [(0, 1, ["a", "b"]), (4, 2, ["1", "two\nlines"]), (19, 5, ["3", "x"])]
    assert text[19:].startswith(b"3,x")  # the offset is where the record starts


def test_text_that_is_not_utf8_is_a_record_that_cannot_be_read():
    (first, bad, last) = [r for _, r in records(io.BytesIO(b"a\n\xff\xfe\nok\n"))]
    assert first.cells == ["a"] and last.cells == ["ok"] and last.line == 3
    assert (bad.cells, bad.line, bad.expected) == (None, 2, "UTF-8 text")


def test_scan_indexes_every_block_and_samples_the_first_rows(tmp_path):
    path = tmp_path / "d.csv"
    rows = BLOCK * 2 + 5
    path.write_text("\ufeffid,v\n" + "".join(f"{i},{i * 2}\n" for i in range(rows)))
    index, sample = scan(str(path), sample_rows=3)
    assert index.names == ["id", "v"]  # the byte-order mark is not part of the name
    assert index.rows == rows and len(index.marks) == 3
    assert [r.cells for r in sample] == [["0", "0"], ["1", "2"], ["2", "4"]]
    offset, line, first = index.start_of(BLOCK + 7)
    assert (line, first) == (BLOCK + 2, BLOCK)  # row BLOCK is on line BLOCK + 2
    with open(path, "rb") as f:
        f.seek(offset)
        assert next(records(f, line))[1].cells == [str(BLOCK), str(2 * BLOCK)]


@pytest.mark.parametrize(
    ("header", "problem"),
    [
        ("", "expected a header row of names"),
        ("a,,c\n", "header column 2 has no name"),
        ("a,b,a\n", r"header names \['a'\] appear more than once"),
    ],
)
def test_a_header_that_cannot_name_the_columns_is_refused(tmp_path, header, problem):
    (tmp_path / "d.csv").write_text(header + "1,2,3\n" if header else "")
    with pytest.raises(CsvFormatError, match=problem):
        scan(str(tmp_path / "d.csv"), 10)
