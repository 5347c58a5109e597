"""`tfperf export-tfds DIR`: TFDS's metadata beside an already converted folder's shards, so
that `tfds.builder_from_directory(DIR)` loads them. The writing is data/tfds_export.py's."""

from __future__ import annotations

from typing import Annotated

import typer

from tfperf.cli.common import command, stdout_console

HELP = """Write TensorFlow Datasets' dataset_info.json and features.json beside the shards of
DIR (a folder made by `tfperf convert`), so that `tfds.builder_from_directory(DIR)` loads
every split with the same features. Shards keep their names; a split whose name holds a
'.' is exported under a name with '_' instead. GZIP shards cannot be read by TFDS.

Unlike `convert --tfds-metadata`, later converts into DIR do not refresh these files: run
this command again after adding a split."""


def register(app: typer.Typer) -> None:
    @command(app, "export-tfds", HELP, "Write TFDS metadata beside a converted folder's shards.")
    def export_tfds(
        directory: Annotated[str, typer.Argument(help="A folder with manifest.json.")],
    ) -> None:
        from tfperf.data.tfds_export import write_tfds_metadata

        view = write_tfds_metadata(directory)
        out = stdout_console()
        out.print(" and ".join(map(str, view.files)), markup=False)
        for note in view.notes():
            out.print(note, markup=False)
