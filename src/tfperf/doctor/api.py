"""The doctor on any tf.data.Dataset from Python, without a run file: `diagnose(dataset,
model)` gives the findings, `optimize(dataset, model)` the dataset with the rewrites that
measurably help (the same trials as `tfperf doctor --fix`) and its report, and
`apply_rewrites(dataset, names)` replays kept rewrites on a fresh dataset (what the module
--fix writes calls). What a run file would say (batch size, RAM budget, model, loss,
precision, label) is a keyword here, inferred from the dataset and model when left out."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfperf.config import RunConfig, config_from_dict
from tfperf.doctor.diagnosis.diagnose import diagnose as diagnose_run
from tfperf.doctor.evidence.findings import Diagnosis
from tfperf.doctor.fix.dataset import fix_dataset, replay
from tfperf.doctor.fix.runfile import compile_kwargs, withheld
from tfperf.doctor.fix.trials import FixResult
from tfperf.doctor.graph import lint
from tfperf.doctor.probes import handed, step_fn
from tfperf.doctor.probes.budget import (
    DOCTOR_SECONDS,
    FIRST_ELEMENT,
    FIX_SECONDS,
    Abandoned,
    Budget,
    first_within,
    progress_text,
)
from tfperf.errors import UserError
from tfperf.measure import leading_dim
from tfperf.train.model_names import check_names
from tfperf.util.format import cut
from tfperf.util.imports import load_object
from tfperf.util.progress import progress_bar

if TYPE_CHECKING:
    import keras
    import tensorflow as tf

Tick = Callable[[str], None]


@dataclass
class OptimizeReport:
    """What `optimize` measured and kept: the diagnosis, every trial, the final check."""

    diagnosis: Diagnosis
    fix: FixResult

    @property
    def compile_kwargs(self) -> dict[str, Any]:
        """The measured compute winners that keep the results, as keyword arguments of
        model.compile (e.g. {"jit_compile": True, "steps_per_execution": 30}); empty when
        none was measured."""
        return dict(self.fix.compile_kwargs)

    @property
    def kept(self) -> list[str]:
        """Names of the kept rewrites, in order (what `apply_rewrites` takes)."""
        return list(self.fix.pipeline_changes)

    @property
    def speedup(self) -> float:
        """Training examples/s of the returned dataset over the original's (1.0: nothing
        helped and the original came back)."""
        return self.fix.speedup

    def __str__(self) -> str:
        f = self.fix
        # The --fix report's own headline and rows: the figures the CLI, --json and HTML show.
        if self.kept:
            head = f"{f.headline}; kept: {', '.join(self.kept)}"
        else:
            head = (
                "nothing helped: no rewrite made training measurably faster "
                f"({f.headline}); the original dataset is returned"
            )
        trials = [
            f"  {r['change']}: {r['status']} ({r['examples_per_s_text']}, {r['ratio_text']}; "
            f"{r['note']})"
            if r["ratio_text"] not in ("", "-")
            else f"  {r['change']}: {r['status']} ({r['note']})"
            for r in f.rows()[1:]
        ]
        extra = []
        if self.compile_kwargs:
            args = ", ".join(f"{k}={v!r}" for k, v in self.compile_kwargs.items())
            extra.append(f"for model.fit: model.compile(..., {args})")
        extra += [f"withheld: {line}" for line in f.withheld]
        return "\n".join([self.diagnosis.headline, head, *trials, *extra])

    def to_dict(self) -> dict[str, Any]:
        return {"diagnosis": self.diagnosis.to_dict(), "fix": self.fix.to_dict()}

    def to_html(self, path: str | Path) -> Path:
        """Writes the report as one self-contained HTML file (charts and scripts inlined,
        nothing fetched when viewed): the verdict, the three rates, the stage prefixes, the
        findings with expected vs measured gain, and every trial. Returns the path."""
        from tfperf.runreport.page import write_doctor_report

        return write_doctor_report(path, self.diagnosis.to_dict(), self.fix.to_dict())


# ---- the public functions ------------------------------------------------------------------
@dataclass(frozen=True)
class Keywords:
    """What a run file would tell the doctor, for a dataset handed over in Python; each is
    inferred when left out (see `_session`). The public functions' keywords, documented
    there."""

    batch_size: int | None = None
    loss: Any = None
    precision: str = "float32"
    label: str | None = None
    ram_budget_mb: float | None = None
    budget_s: float | None = None
    overrides: Sequence[str] = ()
    progress: bool | None = None
    target: float | None = None
    step: Callable[[Any], Any] | None = None
    convert: Callable[[Any], Any] | None = None


def _keywords(args: dict[str, Any]) -> Keywords:
    """The Keywords among a public function's arguments (its `locals()`)."""
    names = Keywords.__dataclass_fields__
    kw = {k: v for k, v in args.items() if k in names}
    return Keywords(**kw | {"overrides": tuple(kw.get("overrides", ()))})


KEYWORDS_DOC = """
    Keywords (each inferred when left out):
      step: instead of a model, any callable that takes one batch and does one training
        step (e.g. a `jax.jit`-compiled Flax/JAX step carrying its state in a closure). It
        gets each batch as `ds.as_numpy_iterator()` yields it, passed through `convert`
        when given (e.g. `jax.device_put`); its result is waited for (`block_until_ready`).
        The compute limit is `step` fed one batch from memory.
      convert: turns a numpy batch into the step's arrays (timed as input, as in your loop).
      batch_size: examples per batch (default: the batch stage's, else the first element's).
      loss: a name, Loss or function (default: the compiled loss, else from the labels).
      precision: the train step's Keras dtype policy ("float32").
      label: for dict elements, the feature that is the label.
      ram_budget_mb: the RAM a shuffle buffer or cache may take (pipeline.shuffle_ram_mb).
      budget_s: the whole call's wall time (default 90 s for diagnose, 300 s for optimize);
        below 60 s measurements are also shorter, two repeats.
      overrides: `--set` items, e.g. ["doctor.repeats=5"].
      progress: the probe, trial and seconds left on stderr (None: when stderr is a tty).
      target: the examples/s the accelerator will consume (doctor.target): the pipeline
        alone is judged against it and the trials time the pipeline's own rate.
      tick: called with a probe's name after each timed repeat.
"""


def diagnose(
    dataset: tf.data.Dataset | RunConfig,
    model: keras.Model | str | None = None,
    *,
    step: Callable[[Any], Any] | None = None,
    convert: Callable[[Any], Any] | None = None,
    batch_size: int | None = None,
    loss: Any = None,
    precision: str = "float32",
    label: str | None = None,
    ram_budget_mb: float | None = None,
    budget_s: float | None = None,
    overrides: Sequence[str] = (),
    progress: bool | None = None,
    target: float | None = None,
    tick: Tick | None = None,
    compute_variants: bool = True,
) -> Diagnosis:
    """The doctor's findings (a Diagnosis) for `dataset`: a tf.data.Dataset of (features,
    labels) batches, consumed by `model` (a keras.Model of any Keras backend, a
    'module:function' that builds one, or None for a stand-in that costs nothing: only the
    pipeline is judged) or by `step`; or a RunConfig, as `tfperf doctor RUNFILE` (then
    only budget_s, tick and compute_variants apply)."""
    if isinstance(dataset, RunConfig):
        budget = Budget(budget_s) if budget_s is not None else None
        return diagnose_run(dataset, tick=tick, budget=budget, compute_variants=compute_variants)
    kw = _keywords(locals())
    with _progress(kw, kw.budget_s or DOCTOR_SECONDS) as (budget, show):
        with _session(dataset, model, kw, budget) as (cfg, ds):
            diag = diagnose_run(
                cfg, dataset=ds, tick=tick or show, budget=budget, compute_variants=compute_variants
            )
    diag.source = "tf.data.Dataset"
    return diag


def optimize(
    dataset: tf.data.Dataset,
    model: keras.Model | str | None = None,
    *,
    step: Callable[[Any], Any] | None = None,
    convert: Callable[[Any], Any] | None = None,
    batch_size: int | None = None,
    loss: Any = None,
    precision: str = "float32",
    label: str | None = None,
    ram_budget_mb: float | None = None,
    budget_s: float | None = None,
    overrides: Sequence[str] = (),
    progress: bool | None = None,
    target: float | None = None,
    tick: Tick | None = None,
) -> tuple[tf.data.Dataset, OptimizeReport]:
    """(the optimized dataset, its report); `model`, `step` and the keywords as for
    `diagnose`. Each rewrite `tfperf doctor --fix` knows is tried on top of those kept,
    timed against the current pipeline with the model's real train step (or `step`) in
    paired, interleaved repeats and kept only when faster beyond the noise (and, for a
    finite deterministic pipeline, when it yields the same examples); the result is then
    timed beside the original. It is never slower: when nothing helps, `dataset` itself
    comes back and the report says so. With `label`, dict elements are split into
    (features, labels), the returned ones too."""
    kw = _keywords(locals())
    total = kw.budget_s or FIX_SECONDS
    with _progress(kw, total) as (budget, show), _session(dataset, model, kw, budget) as (cfg, ds):
        # The diagnosis takes at most a third of the budget (and DOCTOR_SECONDS), as --fix.
        part = budget.part(min(DOCTOR_SECONDS, total / 3))
        diag = diagnose_run(cfg, dataset=ds, tick=tick or show, budget=part)
        diag.source = "tf.data.Dataset"
        if budget.abandoned:
            # A repeat outlasted the whole budget: no time is left for a trial.
            result = FixResult(0.0, 0.0, [], [], dataset=dataset)
            result.before_source = "not measured (a repeat outlasted the time budget)"
        else:
            result = fix_dataset(
                cfg, diag, ds, tick=tick or show, train_changes=False, budget=budget
            )
        result.compile_kwargs = compile_kwargs(diag, cfg.doctor.steps)
        result.withheld = withheld(cfg, diag, run_file=False)
    return result.dataset, OptimizeReport(diag, result)


diagnose.__doc__ = (diagnose.__doc__ or "") + KEYWORDS_DOC
optimize.__doc__ = (optimize.__doc__ or "") + KEYWORDS_DOC


def apply_rewrites(
    dataset: tf.data.Dataset, names: Sequence[str], *, strict: bool = True
) -> tf.data.Dataset:
    """`dataset` with the named rewrites applied in order, each on the graph the previous
    one left (names as `optimize`'s report and `tfperf doctor --fix` print them). A rewrite
    that does not apply to this dataset (its pipeline changed since) is a UserError, or
    skipped with strict=False."""
    return replay(dataset, list(names), None, strict=strict)


@contextlib.contextmanager
def _progress(kw: Keywords, seconds: float) -> Iterator[tuple[Budget, Tick]]:
    """(the call's Budget, a tick) with the probe or trial being timed and the seconds left
    shown on stderr, as `tfperf doctor` shows them (when kw.progress, or on a terminal)."""
    shown = sys.stderr.isatty() if kw.progress is None else kw.progress
    with progress_bar("measuring", unit="measurements", enabled=shown, transient=True) as bar:

        def on_probe(label: str, left: float) -> None:
            bar.update(description=progress_text(label), info=f"{left:,.0f} s left")

        yield Budget(seconds, on_probe=on_probe), lambda _: bar.advance(1)


# ---- the run file these stand for ----------------------------------------------------------
def doctor_settings(budget_s: float | None) -> dict[str, Any]:
    """The doctor section for a time budget: shorter measurements and fewer repeats for a
    small one (the defaults from about 60 s up)."""
    if budget_s is None or budget_s >= 60:
        return {}
    scale = max(budget_s, 1.0) / 60
    # Two repeats are the fewest that `compare` can judge.
    return {
        "steps": max(4, int(30 * scale)),
        "warmup": max(1, int(5 * scale)),
        "repeats": 2,
        "min_seconds": round(0.5 * scale, 3),
    }


def _first_rows(ds: tf.data.Dataset, budget: Budget) -> int:
    """Examples in the first element, pulled within the budget; 1 for one slower than the
    whole budget (abandoned and recorded in it: the diagnosis then says "not measured",
    without pulling it again)."""
    try:
        return leading_dim(first_within(ds, budget, FIRST_ELEMENT)())
    except Abandoned:
        return 1


@contextlib.contextmanager
def _session(
    dataset: tf.data.Dataset, model: keras.Model | str | None, kw: Keywords, budget: Budget
) -> Iterator[tuple[RunConfig, tf.data.Dataset]]:
    """(a run file standing for the keywords, the dataset as (features, labels)); a handed
    model is registered meanwhile and its weights are restored after."""
    import tensorflow as tf

    if not isinstance(dataset, tf.data.Dataset):
        raise UserError(
            f"tfperf: expected a tf.data.Dataset (or a RunConfig for diagnose), found "
            f"{type(dataset).__name__}"
        )
    ds = _split_label(dataset, kw.label) if kw.label else dataset
    spec = ds.element_spec
    if not isinstance(spec, tuple) or len(spec) not in (2, 3):
        raise UserError(
            f"tfperf: the doctor trains on (features, labels) or (features, labels, "
            f"sample_weight) batches; the dataset yields {cut(str(spec))}: pass label='NAME' "
            "for dict elements, or map it to (features, labels)"
        )
    batch = kw.batch_size or lint.read_graph(ds).batch_size or _first_rows(ds, budget)
    data: dict[str, Any] = {
        "pipeline": {"batch_size": int(batch)},
        "train": {"precision": kw.precision},
        "doctor": {**doctor_settings(kw.budget_s), "target": kw.target},
    }
    if kw.ram_budget_mb is not None:
        data["pipeline"]["shuffle_ram_mb"] = kw.ram_budget_mb
    name, restore = _consumer_entry(model, kw, spec[1], data)
    try:
        yield config_from_dict(data, list(kw.overrides), "tfperf.optimize"), ds
    finally:
        if name is not None:
            handed.unregister(name)
        restore()


def _consumer_entry(
    model: keras.Model | str | None, kw: Keywords, labels_spec: Any, data: dict[str, Any]
) -> tuple[str | None, Callable[[], None]]:
    """Sets data["model"] for what consumes the batches: a user's step, a Keras model on a
    backend other than TensorFlow (its own train step, through step_fn.py), or a model for
    tfperf's TensorFlow train step (`_model_entry`)."""

    if kw.step is not None or kw.convert is not None:
        if model is not None:
            raise UserError(
                "tfperf: pass either model or step (a training step that takes one batch), "
                f"not both: found model={type(model).__name__} and step="
                f"{type(kw.step).__name__}"
            )
        if kw.step is None:
            raise UserError("tfperf: convert applies to a step: pass step=your_train_step too")
        step_fn.check_step(kw.step, kw.convert)
        consumer = step_fn.StepFn(kw.step, step_fn.step_name(kw.step), kw.convert)
    elif step_fn.backend() != "tensorflow":
        built = _built(model)
        if built is None:  # the stand-in: a step that costs nothing, on any backend
            consumer = step_fn.StepFn(_no_step, "no model")
        else:
            consumer = step_fn.keras_step(built, kw.loss)
    else:
        return _model_entry(model, kw.loss, labels_spec, data)
    # A user's step is timed as it is: no compute what-ifs of tfperf's own train step.
    data["doctor"]["what_ifs"] = []
    data["model"] = {"name": handed.register_step(consumer)}
    return data["model"]["name"], lambda: None


def _no_step(batch: Any) -> None:
    """The stand-in step: the batch is all it reads (training runs at the pipeline's pace)."""


def _built(model: keras.Model | str | None) -> keras.Model | None:
    """`model` as a keras.Model (a 'module:function' called), None for None."""
    import keras

    if isinstance(model, str):
        built = load_object(model, field="model")
        model = built() if callable(built) and not isinstance(built, keras.Model) else built
    if model is not None and not isinstance(model, keras.Model):
        raise UserError(
            f"tfperf: model: expected a keras.Model, a 'module:function' or None, found "
            f"{type(model).__name__}"
        )
    return model


def _model_entry(
    model: keras.Model | str | None, loss: Any, labels_spec: Any, data: dict[str, Any]
) -> tuple[str | None, Callable[[], None]]:
    """Sets data["model"] for `model` (and `loss`); returns the registered name (None for a
    'module:function') and what restores the user's model afterwards."""
    import keras

    section: dict[str, Any] = {}
    data["model"] = section
    if isinstance(model, str):
        section["name"] = model
        built = _built(model)
        loss = loss if loss is not None else handed.compiled_loss(built)
        if isinstance(loss, str) or loss is None:
            section["loss"] = loss or handed.infer_loss(labels_spec)
            return None, lambda: None
        raise UserError(
            "tfperf: a model given as 'module:function' takes its loss by name (loss='mse'); "
            "pass the keras.Model itself for a loss object"
        )
    if model is None:
        section["name"] = handed.register(handed.standin_factory())
        data["doctor"]["what_ifs"] = []  # a stand-in's compute has nothing to tell
        return section["name"], lambda: None
    if not isinstance(model, keras.Model):
        raise UserError(
            f"tfperf: model: expected a keras.Model, a 'module:function' or None, found "
            f"{type(model).__name__}"
        )
    check_names(model, "tfperf: model")  # TensorFlow's scope names: a named error, no traceback
    loss = loss if loss is not None else handed.compiled_loss(model)
    if loss is None or isinstance(loss, str):
        section["loss"] = loss or handed.infer_loss(labels_spec)
    # A clone does not keep another precision policy: precision is not timed. fit's own
    # steps per call is what the steps what-if times.
    data["doctor"].setdefault("what_ifs", ["batch", "xla", "steps"])
    data["doctor"]["fit_steps_per_execution"] = int(getattr(model, "steps_per_execution", 1))
    section["name"] = handed.register(handed.clone_factory(model, loss))
    weights = model.get_weights() if model.built else None
    return section["name"], lambda: model.set_weights(weights) if weights is not None else None


def _split_label(ds: tf.data.Dataset, label: str) -> tf.data.Dataset:
    """Dict elements as (the other features, the `label` feature)."""
    if not isinstance(ds.element_spec, dict) or label not in ds.element_spec:
        raise UserError(
            f"tfperf: label='{label}': expected dict elements holding '{label}', found "
            f"{ds.element_spec}"
        )

    def split(element: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        return {k: v for k, v in element.items() if k != label}, element[label]

    return ds.map(split)
