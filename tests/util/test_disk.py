"""util/disk: a full disk recognised however it is reported, sizes and free space in words."""

from __future__ import annotations

import errno
import shutil

from tfperf.util.disk import NO_SPACE, DiskFullError, free_text, is_disk_full, size_text


def test_full_disk_and_quota_errors_are_recognised_and_others_are_not():
    assert is_disk_full(OSError(errno.ENOSPC, "full"))
    assert is_disk_full(OSError(errno.EDQUOT, "quota"))
    # TensorFlow's ResourceExhaustedError carries only the OS's words.
    assert is_disk_full(RuntimeError(f"write failed: {NO_SPACE}"))
    assert not is_disk_full(OSError(errno.EACCES, "Permission denied"))
    assert not is_disk_full(ValueError("bad value"))


def test_disk_full_error_is_a_user_error():
    from tfperf.errors import UserError

    assert issubclass(DiskFullError, UserError)


def test_sizes_in_the_largest_unit_below_1024():
    assert size_text(512) == "0.5 KiB"
    assert size_text(3 * 1024**2) == "3.0 MiB"
    assert size_text(1536 * 1024**2) == "1.5 GiB"
    assert size_text(5000 * 1024**3) == "5000.0 GiB"  # GiB is the largest unit


def test_free_text_reads_the_nearest_existing_folder(tmp_path):
    usage = shutil.disk_usage(tmp_path)
    text = free_text(tmp_path / "not" / "made" / "yet")
    assert text.endswith(f"free of {size_text(usage.total)}")
    assert " free of " in text
