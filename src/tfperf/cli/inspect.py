"""`tfperf inspect DIR`: what a converted dataset holds (splits, shards, record counts,
schema, one decoded example) and, with --verify, whether every shard is intact. Checks
live in tfperf.data.verify; this module only reads and prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from tfperf.cli.common import JsonOpt, print_json, stdout_console, user_errors
from tfperf.data.manifest import load_manifest
from tfperf.data.verify import RecordError, first_record, verify_dir


def _show_value(value: Any) -> str:
    if isinstance(value, bytes):
        return repr(value[:48]) + (f"... ({len(value)} bytes)" if len(value) > 48 else "")
    arr = np.asarray(value)
    # str() of numpy scalars: a float32 prints as float32 (0.1), not as the float64 that
    # format() and .item() widen it to (0.10000000149011612)
    if arr.ndim == 0:
        return f"{arr.dtype} {str(arr[()])}"
    flat = arr.reshape(-1)
    head = "[" + ", ".join(str(v) for v in flat[:8]) + "]"
    more = f" ... ({flat.size} values)" if flat.size > 8 else ""
    return f"{arr.dtype}{list(arr.shape)} {head}{more}"


def describe(root: str, split: str | None = None) -> dict[str, Any]:
    """Splits, shards and schema from the manifest, plus the first record decoded."""
    manifest = load_manifest(root)
    splits = [split] if split else list(manifest.splits)
    out: dict[str, Any] = {
        "root": root,
        "name": manifest.name,
        "compression": manifest.compression or "none",
        "source": manifest.source,
        "preprocess": manifest.preprocess,
        "workload": manifest.workload,
        "splits": {},
    }
    for sp in splits:
        manifest.shard_paths(root, sp)  # names the missing split
        info = manifest.splits[sp]
        schema = manifest.split_schema(sp)
        example = None
        for s in info.shards:
            try:
                data = first_record(
                    Path(manifest.shard_path(root, sp, s.file)), manifest.compression
                )
            except (RecordError, OSError) as exc:
                example = {"error": f"{s.file}: {exc}"}
                break
            if data is not None:
                example = {k: _show_value(v) for k, v in schema.decode_numpy(data).items()}
                break
        out["splits"][sp] = {
            "records": info.records,
            "rejected": info.rejected,
            "rejects_file": info.rejects_file,
            "bytes": sum(s.bytes for s in info.shards),
            "shards": [s.model_dump() for s in info.shards],
            "schema": schema.model_dump(mode="json")["features"],
            "example": example,
        }
    return out


def _print(desc: dict[str, Any], console: Console) -> None:
    from rich.table import Table

    pre = f", preprocess {desc['preprocess']}" if desc["preprocess"] else ""
    console.print(
        f"[bold]{escape(desc['root'])}[/]: dataset '{desc['name']}', compression "
        f"{desc['compression']}, source {escape(desc['source'] or '-')}{escape(pre)}",
        highlight=False,
    )
    for sp, info in desc["splits"].items():
        rej = f", {info['rejected']} rejected ({info['rejects_file']})" if info["rejected"] else ""
        console.print(
            f"\nsplit [bold]{sp}[/]: {info['records']:,} records, "
            f"{len(info['shards'])} shards, {info['bytes']:,} bytes{rej}",
            highlight=False,
        )
        shards = Table("shard", "records", "bytes", "sha256", box=None)
        for s in info["shards"]:
            shards.add_row(s["file"], f"{s['records']:,}", f"{s['bytes']:,}", s["sha256"][:12])
        console.print(shards)
        schema = Table("feature", "dtype", "shape", "storage", "example", box=None)
        example = info["example"] or {}
        for f in info["schema"]:
            shape = "varlen" if f["varlen"] else str(f["shape"])
            schema.add_row(
                f["name"],
                f["dtype"],
                shape,
                f["storage"] or "default",
                Text(str(example.get(f["name"], ""))),  # a value is text, never markup
            )
        console.print(schema)
        if example.get("error"):
            console.print(f"[red]first record unreadable: {escape(example['error'])}[/]")


def register(app: typer.Typer) -> None:
    @app.command("inspect")
    @user_errors
    def inspect_cmd(
        directory: Annotated[
            str,
            typer.Argument(help="A directory written by `tfperf convert` (holds manifest.json)."),
        ],
        split: Annotated[
            str | None, typer.Option(help="Show only this split. Default: all.", show_default=False)
        ] = None,
        verify: Annotated[
            bool,
            typer.Option(
                "--verify",
                help="Re-read every shard: TFRecord length/data CRCs, record "
                "counts, bytes and sha256 against the manifest; name each damaged file with "
                "the byte offset of its first bad record (for GZIP shards, an offset in the "
                "decompressed stream). Exit status 1 when anything is damaged.",
            ),
        ] = False,
        json_out: JsonOpt = False,
    ) -> None:
        """Show a converted dataset: splits, shards, record counts, schema and one
        decoded example; --verify checks every shard."""
        desc = describe(directory, split)
        report = None
        if verify:
            manifest = load_manifest(directory)
            if split:
                manifest.splits = {split: manifest.splits[split]}
            report = verify_dir(directory, manifest)
            desc["verify"] = report.to_dict()
        if json_out:
            print_json(desc)
        else:
            console = stdout_console()  # the report on stdout: `inspect DIR > f` works
            _print(desc, console)
            if report is not None:
                _print_report(report, console)
        if report is not None and not report.ok:
            raise typer.Exit(1)


def _print_report(report: Any, console: Console) -> None:
    n = len(report.shards)
    if report.ok:
        console.print(
            f"\n[green]verified {n} shards: framing CRCs, record counts, bytes "
            f"and sha256 all match the manifest[/]"
        )
    else:
        where = " (offsets in the decompressed GZIP stream)" if report.compression else ""
        console.print(f"\n[bold red]{len(report.damaged)} of {n} shards damaged{where}:[/]")
        for s in report.damaged:
            at = f" first bad record at byte {s.bad_offset};" if s.bad_offset is not None else ""
            console.print(f"  {s.file}:{at} {'; '.join(s.problems)}", highlight=False)
    if report.stray_files:
        console.print(
            f"[yellow]leftover temporary files (an interrupted convert; "
            f"`tfperf convert --resume` cleans them): "
            f"{', '.join(report.stray_files)}[/]"
        )
