"""`tfperf convert`: raw data (npz/npy/csv/parquet/image folder) or a built-in workload's
generated data -> sharded TFRecord + manifest.json. Option parsing only; the work is
tfperf.data.convert.run.convert and tfperf.inputs.workload_data.write_workload_data.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from pydantic import ValidationError
from rich.markup import escape

from tfperf.cli.common import JsonOpt, print_json, stdout_console, user_errors
from tfperf.data.convert.options import parse_column_types
from tfperf.data.manifest import Manifest
from tfperf.data.schema import SchemaError, schema_from_dict
from tfperf.data.shards import parse_size
from tfperf.data.tfds_export import tfds_view
from tfperf.errors import UserError
from tfperf.util.format import quoted
from tfperf.util.yaml_load import load_yaml
from tfperf.workloads import WORKLOAD_NAMES, get_workload


def load_schema_file(path: str) -> Any:
    """A schema from JSON/YAML: {"features": [...]}, a list of features, or a manifest."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"--schema {p}: no such file")
    try:
        text = p.read_text()
        data = json.loads(text) if p.suffix == ".json" else load_yaml(text, f"--schema {p}")
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise UserError(f"--schema {p}: not valid JSON/YAML: {exc}") from None
    if isinstance(data, dict) and "schema" in data and "features" not in data:
        data = data["schema"]  # a manifest.json: reuse its schema
    if not isinstance(data, (dict, list)):
        raise UserError(
            f"--schema {p}: expected {{features: [...]}} or a list of features, "
            f"found {type(data).__name__}"
        )
    try:
        return schema_from_dict(data)
    except SchemaError as exc:
        raise UserError(f"--schema {p}: {exc}") from None
    except ValidationError as exc:
        lines = []
        for e in exc.errors():
            loc = ".".join(str(x) for x in e["loc"])
            lines.append(
                f"--schema {p}: {loc or '(top level)'}: {e['msg']}; found {quoted(e.get('input'))}"
            )
        raise UserError("\n".join(lines)) from None


def _image_size(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*[xX,]\s*(\d+)\s*", text)
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise UserError(f"--image-size: expected HxW such as 64x64, found {quoted(text)}")
    return int(m.group(1)), int(m.group(2))


def summary(manifest: Any, out: str, split: str) -> dict[str, Any]:
    """What `--json` prints: the converted split and the splits beside it."""
    info = manifest.splits[split]
    return {
        "out": out,
        "name": manifest.name,
        "split": split,
        "records": info.records,
        "shards": len(info.shards),
        "bytes": sum(s.bytes for s in info.shards),
        "rejected": info.rejected,
        "rejects_file": info.rejects_file,
        "compression": manifest.compression or "none",
        "schema": manifest.split_schema(split).model_dump(mode="json")["features"],
        "splits": {k: v.records for k, v in manifest.splits.items()},
        "manifest": str(Path(out) / "manifest.json"),
    }


def register(app: typer.Typer) -> None:
    @app.command("convert")
    @user_errors
    def convert_cmd(
        source: Annotated[
            str | None,
            typer.Argument(
                help="Raw data: .npz (arrays = features), .npy (one feature), .csv (header = "
                "names), .parquet, or a folder of images with one subfolder per label. "
                "Omit with --workload.",
                show_default=False,
            ),
        ] = None,
        out: Annotated[
            str | None,
            typer.Option(
                "--out",
                "-o",
                help="Output directory (manifest.json + shards). Default with "
                "--workload: runs/<workload>/data.",
                show_default=False,
            ),
        ] = None,
        workload: Annotated[
            str | None,
            typer.Option(
                help="Generate and convert a built-in workload's data instead of SOURCE "
                "(splits train and eval, plus *_raw when its original pipeline needs raw "
                "data).",
                show_default=False,
            ),
        ] = None,
        examples: Annotated[
            int, typer.Option(help="With --workload: rows in split train.")
        ] = 100_000,
        eval_examples: Annotated[
            int, typer.Option(help="With --workload: rows in split eval.")
        ] = 10_000,
        seed: Annotated[
            int,
            typer.Option(
                help="With --workload: generator seed. Image folders: seed of the shuffled "
                "file order (so that --max-examples and every shard mix the classes)."
            ),
        ] = 0,
        schema: Annotated[
            str | None,
            typer.Option(
                help="Schema of the written records: JSON/YAML file with {features: [...]} "
                "(or a manifest.json to copy). Default: inferred from the source, or from "
                "the first preprocessed row.",
                show_default=False,
            ),
        ] = None,
        name: Annotated[
            str | None,
            typer.Option(
                help="Dataset name in shard file names. Default: the source's file stem.",
                show_default=False,
            ),
        ] = None,
        split: Annotated[
            str,
            typer.Option(help="Split to write; another split into the same --out is added beside."),
        ] = "train",
        column_types: Annotated[
            str | None,
            typer.Option(
                help="CSV: declare some columns' dtypes, e.g. 'zip=bytes,n=int32' (dtypes: "
                "float32, float64, int64, int32, uint8, int8, bool, bytes). Otherwise columns are "
                "typed as the dataset already in --out (same columns), else from the first "
                "10,000 rows: mostly numbers -> int64 or float32 (the other cells are bad "
                "rows), else bytes.",
                show_default=False,
            ),
        ] = None,
        overwrite: Annotated[
            bool,
            typer.Option(
                "--overwrite",
                help="Replace the splits of --out whose records have another schema (their "
                "shards are removed). Without it such a convert is refused.",
            ),
        ] = False,
        tfds_metadata: Annotated[
            bool,
            typer.Option(
                "--tfds-metadata",
                help="Also write TFDS's dataset_info.json and features.json, so that "
                "tfds.builder_from_directory(OUT) loads the shards (kept up to date by later "
                "converts into OUT).",
            ),
        ] = False,
        preprocess: Annotated[
            str | None,
            typer.Option(
                help="'module:function' applied to every row while converting (heavy work "
                "done once); it takes and returns a dict of features.",
                show_default=False,
            ),
        ] = None,
        shard_size: Annotated[
            str,
            typer.Option(
                help="Target shard size before compression (e.g. 128MiB, 64MB, 4096); "
                "records per shard are estimated from the first rows."
            ),
        ] = "128MiB",
        workers: Annotated[
            int | None,
            typer.Option(help="Writer processes. Default: min(4, CPU count).", show_default=False),
        ] = None,
        compression: Annotated[str, typer.Option(help="Shard compression: none or gzip.")] = "none",
        resume: Annotated[
            bool,
            typer.Option(
                "--resume",
                help="Continue an interrupted run: keep finished shards whose "
                "sha256 checks out and write the rest (same result as one run).",
            ),
        ] = False,
        on_bad_row: Annotated[
            str,
            typer.Option(
                help="error: stop at the first bad row (exit 2; finished shards stay). "
                "skip: write bad rows to NAME-SPLIT.rejects.jsonl and count them in the "
                "manifest."
            ),
        ] = "error",
        image_size: Annotated[
            str | None,
            typer.Option(
                help="Image folders: HxW every image is resized to (e.g. 64x64).",
                show_default=False,
            ),
        ] = None,
        channels: Annotated[
            int, typer.Option(help="Image folders: 1 (gray), 3 (RGB) or 4 (RGBA).")
        ] = 3,
        max_examples: Annotated[
            int | None,
            typer.Option(help="Debug limit: convert only the first N rows.", show_default=False),
        ] = None,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
        json_out: JsonOpt = False,
    ) -> None:
        """Convert raw data to sharded TFRecord files plus manifest.json (heavy
        preprocessing done once, offline). Shards are written in parallel, each under a
        temporary name until complete, so an interrupted run can --resume."""
        # The writer (worker pool, readers) is imported on first use: `tfperf --help` loads
        # every command module, and most runs of it never convert.
        from tfperf.data.convert.run import convert

        try:
            shard_bytes = parse_size(shard_size)
        except ValueError as exc:
            raise UserError(f"--shard-size: {exc}") from None
        if workers is not None and workers < 1:
            raise UserError(f"--workers: expected a number >= 1, found {workers}")
        loaded = load_schema_file(schema) if schema else None
        if workload is not None:
            if source is not None:
                raise UserError("give either SOURCE or --workload, not both")
            for flag, given in (
                ("--overwrite", overwrite),
                ("--column-types", column_types),
                ("--tfds-metadata", tfds_metadata),
            ):
                if given:
                    raise UserError(
                        f"{flag}: only with SOURCE; a workload's data is regenerated by "
                        f"converting it into a new --out"
                    )
            from tfperf.inputs.workload_data import write_workload_data

            if workload not in WORKLOAD_NAMES:
                raise UserError(
                    f"--workload: expected one of {sorted(WORKLOAD_NAMES)}, "
                    f"found {quoted(workload)}"
                )
            if examples < 1 or eval_examples < 0:
                raise UserError("--examples must be >= 1 and --eval-examples >= 0")
            if max_examples is not None:
                examples = min(examples, max_examples)
                eval_examples = min(eval_examples, max_examples)
            out = out or str(Path("runs") / workload / "data")
            manifest = write_workload_data(
                get_workload(workload),
                out,
                examples=examples,
                eval_examples=eval_examples,
                seed=seed,
                progress=not quiet,
                workers=workers,
                shard_bytes=shard_bytes,
                compression=compression,
                resume=resume,
            )
            split = "train"
        else:
            if source is None:
                raise UserError("missing SOURCE (a file or folder) or --workload NAME")
            if out is None:
                raise UserError("--out: expected an output directory, found nothing")
            manifest = convert(
                source,
                out,
                schema=loaded,
                name=name,
                split=split,
                preprocess=preprocess,
                shard_bytes=shard_bytes,
                workers=workers,
                compression=compression,
                resume=resume,
                on_bad_row=on_bad_row,
                max_examples=max_examples,
                progress=not quiet,
                image_size=_image_size(image_size),
                channels=channels,
                column_types=parse_column_types(column_types) if column_types else None,
                overwrite=overwrite,
                seed=seed,
                tfds_metadata=tfds_metadata,
            )
        result = summary(manifest, out, split)
        if json_out:
            print_json(result)
            return
        _print_report(manifest, out)


def _print_report(manifest: Manifest, out: str) -> None:
    """The splits now in OUT, on stdout (progress went to stderr)."""
    report = stdout_console()
    for sp, info in manifest.splits.items():
        rej = f", {info.rejected} rejected -> {info.rejects_file}" if info.rejected else ""
        report.print(
            f"{escape(out)}: split [bold]{escape(sp)}[/]: {info.records:,} records in "
            f"{len(info.shards)} shards{escape(rej)}",
            highlight=False,
        )
    if manifest.tfds_metadata:
        view = tfds_view(out, manifest)
        files = " and ".join(str(f) for f in view.files)
        report.print(f"TFDS: {files} (tfds.builder_from_directory)", markup=False)
        for note in view.notes():
            report.print(f"  {note}", markup=False, highlight=False)
