"""The report's charts as plotly figures, each from the plain dicts of a run folder (the
doctor's --json, the training summary, TensorBoard scalars): the three rates on one axis,
the stage prefixes as a waterfall, findings' expected vs measured gains, --fix's trials,
input wait and examples/s over the steps, and eval metrics over checkpoints. Each returns
None when its data is missing."""

from __future__ import annotations

from html import escape
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from tfperf.runreport.events import Series
from tfperf.util.format import number

BLUE, ORANGE, GREEN, GREY, RED = "#1f77b4", "#ff7f0e", "#2ca02c", "#9e9e9e", "#d62728"
SLOWEST_MARK = "◀ slowest"
TRAIN_RATE, WAIT_FRACTION = "step/examples_per_sec", "input/wait_fraction"


def text(value: Any) -> str:
    """Text from a run's data as a chart shows it: plotly reads labels as HTML (a data value
    `<a href=...>` would be a live link), so its markup is escaped; plotly shows the
    entities as the characters they stand for."""
    return escape(str(value), quote=False)


def _layout(fig: go.Figure, title: str, height: int) -> go.Figure:
    fig.update_layout(
        title={"text": title, "x": 0, "font": {"size": 15}},
        template="plotly_white",
        height=height,
        margin={"l": 10, "r": 30, "t": 50, "b": 40},
        legend={"orientation": "h", "y": -0.18},
    )
    return fig


def rates_chart(diagnosis: dict[str, Any] | None, summary: dict[str, Any] | None) -> Any:
    """Examples/s of the pipeline alone, the compute limit and training (the doctor's, and
    the run's own from `tfperf train`), as bars on one axis."""
    rows: list[tuple[str, float, str]] = []
    if diagnosis:
        rows += [
            ("(a) pipeline alone", diagnosis["pipeline"]["examples_per_s"], BLUE),
            ("(b) compute limit", diagnosis["compute_limit"]["examples_per_s"], ORANGE),
            ("(c) training, timed by the doctor", diagnosis["training"]["examples_per_s"], GREEN),
        ]
    if summary and summary.get("examples_per_sec"):
        rows.append(("training run (tfperf train)", summary["examples_per_sec"], "#17becf"))
    if not rows:
        return None
    names, values, colors = zip(*rows, strict=True)
    bar = go.Bar(
        x=values,
        y=names,
        orientation="h",
        marker_color=colors,
        text=[f"{number(v)} ex/s" for v in values],
        textposition="auto",
        hovertemplate="%{y}: %{x:,.0f} examples/s<extra></extra>",
    )
    fig = go.Figure(bar)
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title="examples/s", rangemode="tozero")
    return _layout(fig, "examples/s: the pipeline alone, the compute limit and training", 300)


def stage_label(stage: dict[str, Any], slowest: str | None) -> str:
    label = text(stage["label"])
    return f"{label} {SLOWEST_MARK}" if stage["label"] == slowest else label


def stages_waterfall(diagnosis: dict[str, Any] | None) -> Any:
    """The pipeline cut after each stage: each bar the microseconds per example its stage
    adds (prefixes are nested, so they add up), labelled with the prefix's examples/s; the
    slowest stage in red and marked; last, the whole pipeline as timed alone."""
    stages = (diagnosis or {}).get("stages") or []
    if not diagnosis or not any(s.get("examples_per_s") for s in stages):
        return None
    slowest = diagnosis.get("slowest_stage")
    # Stages tied within noise are each marked (slowest_stage then names them all).
    marked = diagnosis.get("slowest_stages") or [slowest]
    rate = diagnosis["pipeline"]["examples_per_s"]
    whole = 1e6 / rate if rate else 0.0
    labels = [stage_label(s, s["label"] if s["label"] in marked else None) for s in stages]
    added = [s.get("us_per_example") or 0.0 for s in stages]
    text = [
        f"{number(s['examples_per_s'])} ex/s" if s.get("examples_per_s") else "not measured"
        for s in stages
    ]
    fig = go.Figure(
        go.Waterfall(
            orientation="h",
            y=[*labels, "pipeline alone"],
            x=[*added, whole],
            measure=["relative"] * len(stages) + ["absolute"],
            text=[*text, f"{number(rate)} ex/s ({number(whole)} us/example)"],
            textposition="outside",
            cliponaxis=False,
            increasing={"marker": {"color": BLUE}},
            totals={"marker": {"color": GREY}},
            decreasing={"marker": {"color": GREY}},
            connector={"line": {"color": "#bbbbbb"}},
            hovertemplate="%{y}<br>adds %{x:.1f} us per example<br>%{text}<extra></extra>",
        )
    )
    for i, s in enumerate(stages):  # the slowest bar: red, its own trace over the waterfall
        if s["label"] in marked:
            base = sum(added[:i])
            fig.add_trace(
                go.Bar(
                    y=[labels[i]],
                    x=[added[i]],
                    base=[base],
                    orientation="h",
                    marker_color=RED,
                    name="slowest stage",
                    hoverinfo="skip",
                )
            )
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(title="microseconds per example, added stage by stage")
    title = "stage prefixes: what each stage adds per example (labels: the prefix's examples/s)"
    _layout(fig, title, 120 + 34 * len(stages))
    fig.update_layout(showlegend=False, barmode="overlay", margin={"r": 110})
    return fig


def _gain_error(trial: dict[str, Any]) -> tuple[float, float]:
    return trial["high"] - trial["ratio"], trial["ratio"] - trial["low"]


def findings_chart(findings: list[dict[str, Any]], measured: dict[str, dict[str, Any]]) -> Any:
    """Each finding's expected training speedup beside the one its --fix trial measured
    (paired ratio, whiskers: the range of the pairs); `measured` maps codes to trials."""
    rows = [f for f in findings if f.get("expected_speedup") or f["code"] in measured]
    if not rows:
        return None
    codes = [f["code"] for f in rows]
    shown = [text(c) for c in codes]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            name="expected",
            x=shown,
            y=[f.get("expected_speedup") for f in rows],
            marker_color=GREY,
            hovertemplate="%{x}: expected %{y:.2f}x<extra></extra>",
        )
    )
    trials = [measured.get(c) for c in codes]
    errors = [_gain_error(t) if t else (0.0, 0.0) for t in trials]
    fig.add_trace(
        go.Bar(
            name="measured by --fix (paired ratio, range)",
            x=shown,
            y=[t["ratio"] if t else None for t in trials],
            marker_color=[GREEN if t and t["kept"] else ORANGE for t in trials],
            error_y={
                "type": "data",
                "array": [e[0] for e in errors],
                "arrayminus": [e[1] for e in errors],
            },
            hovertemplate="%{x}: measured %{y:.2f}x<extra></extra>",
        )
    )
    fig.add_hline(y=1.0, line_dash="dot", line_color="#666666")
    fig.update_yaxes(title="training speedup (x)", rangemode="tozero")
    fig.update_layout(barmode="group")
    return _layout(fig, "findings: expected vs measured gain in training examples/s", 340)


def trials_chart(fix: dict[str, Any] | None) -> Any:
    """--fix's trials: each change's measured ratio against the best pipeline so far (the
    median of the paired repeats, whiskers their range), green when kept, with the
    predicted gain as a diamond."""
    trials = [t for t in (fix or {}).get("trials", []) if t.get("ratio") is not None]
    if not trials:
        return None
    names = [text(t["change"]) for t in trials]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            name="measured (paired ratio, range)",
            y=names,
            x=[t["ratio"] for t in trials],
            orientation="h",
            marker_color=[GREEN if t["kept"] else GREY for t in trials],
            error_x={
                "type": "data",
                "array": [_gain_error(t)[0] for t in trials],
                "arrayminus": [_gain_error(t)[1] for t in trials],
            },
            text=["kept" if t["kept"] else "not kept" for t in trials],
            textposition="inside",
            hovertemplate="%{y}: %{x:.2f}x (%{text})<extra></extra>",
        )
    )
    predicted = [t.get("predicted") for t in trials]
    if any(predicted):
        fig.add_trace(
            go.Scatter(
                name="predicted",
                y=names,
                x=predicted,
                mode="markers",
                marker={"symbol": "diamond", "size": 11, "color": "#333333"},
                hovertemplate="%{y}: predicted %{x:.2f}x<extra></extra>",
            )
        )
    fig.add_vline(x=1.0, line_dash="dot", line_color="#666666")
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(title="training examples/s: candidate / best so far", rangemode="tozero")
    return _layout(
        fig, "--fix trials, each against the best pipeline so far", 140 + 40 * len(trials)
    )


def _xy(series: Series) -> tuple[list[int], list[float]]:
    return [s for s, _ in series], [v for _, v in series]


def training_chart(train: dict[str, Series]) -> Any:
    """Examples/s and the share of time waiting for input over the training steps."""
    if not train.get(TRAIN_RATE) and not train.get(WAIT_FRACTION):
        return None
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.12,
        subplot_titles=("examples/s", "input wait (% of the step time)"),
    )
    steps, rate = _xy(train.get(TRAIN_RATE, []))
    fig.add_trace(go.Scatter(x=steps, y=rate, name="examples/s", line_color=GREEN), 1, 1)
    steps, wait = _xy(train.get(WAIT_FRACTION, []))
    percent = [100 * w for w in wait]
    fig.add_trace(go.Scatter(x=steps, y=percent, name="input wait %", line_color=RED), 2, 1)
    fig.update_yaxes(rangemode="tozero")
    fig.update_xaxes(title="step", row=2, col=1)
    return _layout(fig, "training over the steps (logs/train)", 460)


def eval_chart(eval_: dict[str, Series], train: dict[str, Series]) -> Any:
    """Each eval metric over the checkpoints' steps, beside training's value of the same
    tag (loss, mae, accuracy ...) where logs/train has it."""
    tags = sorted(eval_, key=lambda t: (t != "loss", t))[:4]
    if not tags:
        return None
    titles = [text(t) for t in tags]
    fig = make_subplots(rows=1, cols=len(tags), subplot_titles=titles, horizontal_spacing=0.08)
    for col, tag in enumerate(tags, 1):
        if train.get(tag):
            x, y = _xy(train[tag])
            line = {"color": "#aec7e8"}
            fig.add_trace(go.Scatter(x=x, y=y, name=f"train {titles[col - 1]}", line=line), 1, col)
        x, y = _xy(eval_[tag])
        fig.add_trace(
            go.Scatter(
                x=x, y=y, name=f"eval {titles[col - 1]}", mode="lines+markers", line_color=BLUE
            ),
            1,
            col,
        )
        fig.update_xaxes(title="step", row=1, col=col)
    return _layout(fig, "eval metrics per checkpoint (logs/eval), training's alongside", 380)
