"""The separate evaluator (seed C): a process of its own that evaluates the checkpoints the
training loop writes, so evaluation never pauses training.

It reads only finished checkpoints (listed in the manager's state file, with their .index
and every data shard on disk), catches up by jumping to the newest (or, with
all_checkpoints, takes every one), writes eval/* scalars at the checkpoint's step, appends
eval_results.jsonl, keeps best/ by eval.metric and eval.mode, and stops after the
checkpoint named by the FINAL marker. It never writes into checkpoints/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from tfperf.config import RunConfig, load_config
from tfperf.errors import UserError

console = Console(stderr=True, soft_wrap=True)  # log lines stay whole (greppable)

STATE_FILE = "checkpoint"  # tf.train.CheckpointManager's state file
FINAL_NAME = "FINAL"  # same name as tfperf.train.checkpoint.FINAL_NAME
RESULTS_NAME = "eval_results.jsonl"
BEST_DIR = "best"
# A checkpoint that fails to read this many polls in a row is given up (it was likely
# deleted by the manager's max_to_keep, or is corrupt).
MAX_READ_FAILURES = 3
_DATA_RE = re.compile(r"\.data-(\d+)-of-(\d+)$")
_PATHS_RE = re.compile(r'^(all_model_checkpoint_paths|model_checkpoint_path):\s*"(.*)"\s*$')
_STEP_RE = re.compile(r"-(\d+)$")


class CheckpointMismatchError(UserError):
    """A checkpoint whose variables do not fit the run file's model."""


@dataclass(frozen=True)
class CheckpointInfo:
    """One checkpoint prefix and its step (the N of ckpt-N)."""

    step: int
    path: str


@dataclass
class EvalRecord:
    """One evaluated checkpoint: a line of eval_results.jsonl."""

    step: int
    checkpoint: str
    metrics: dict[str, float]
    skipped: int = 0  # newer checkpoints passed over to catch up (0 with all_checkpoints)
    seconds: float = 0.0  # evaluation time
    examples: int = 0
    best: bool = False  # this checkpoint became best/
    time: float = field(default_factory=time.time)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


# ---- finding finished checkpoints (pure file reads, no TensorFlow) ------------------------


def checkpoint_step(path: str) -> int | None:
    m = _STEP_RE.search(Path(path).name)
    return int(m.group(1)) if m else None


def is_complete(prefix: str | Path) -> bool:
    """True when the prefix's .index and all of its data shards are on disk."""
    prefix = Path(prefix)
    index = Path(f"{prefix}.index")
    try:
        if not index.is_file() or index.stat().st_size == 0:
            return False
        shards = [p for p in prefix.parent.iterdir() if p.name.startswith(prefix.name + ".data-")]
    except OSError:
        return False
    matches = [_DATA_RE.search(p.name) for p in shards]
    totals = {int(m.group(2)) for m in matches if m}
    if len(totals) != 1:
        return False
    total = totals.pop()
    present = {int(m.group(1)) for m in matches if m}
    return present >= set(range(total))


def listed_checkpoints(checkpoint_dir: str | Path) -> list[str]:
    """Prefixes listed in the manager's state file, oldest first (absolute paths)."""
    d = Path(checkpoint_dir)
    try:
        text = (d / STATE_FILE).read_text()
    except OSError:
        return []
    all_paths, latest = [], None
    for line in text.splitlines():
        m = _PATHS_RE.match(line.strip())
        if not m:
            continue
        p = m.group(2)
        p = p if Path(p).is_absolute() else str(d / p)
        if m.group(1) == "model_checkpoint_path":
            latest = p
        else:
            all_paths.append(p)
    if latest and latest not in all_paths:
        all_paths.append(latest)
    return all_paths


def ready_checkpoints(checkpoint_dir: str | Path) -> list[CheckpointInfo]:
    """Listed and complete checkpoints, by step; never a half-written one."""
    out = []
    for p in listed_checkpoints(checkpoint_dir):
        step = checkpoint_step(p)
        if step is not None and is_complete(p):
            out.append(CheckpointInfo(step, p))
    return sorted(out, key=lambda c: c.step)


def read_final(checkpoint_dir: str | Path) -> CheckpointInfo | None:
    """The FINAL marker (training ended normally), or None; a torn file counts as absent."""
    d = Path(checkpoint_dir)
    try:
        data = json.loads((d / FINAL_NAME).read_text())
        step = int(data["step"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    path = data.get("checkpoint") or str(d / f"ckpt-{step}")
    if not Path(f"{path}.index").exists() and not Path(path).is_absolute():
        path = str(d / Path(path).name)  # written relative to the trainer's working dir
    return CheckpointInfo(step, str(path))


def latest_ready(checkpoint_dir: str | Path) -> CheckpointInfo | None:
    ready = ready_checkpoints(checkpoint_dir)
    return ready[-1] if ready else None


def plan_catch_up(
    ready: list[CheckpointInfo], last_step: int, all_checkpoints: bool
) -> tuple[list[CheckpointInfo], int]:
    """(checkpoints to evaluate now, how many newer ones are skipped): every unseen one
    with all_checkpoints, else only the newest."""
    new = [c for c in ready if c.step > last_step]
    if all_checkpoints or not new:
        return new, 0
    return new[-1:], len(new) - 1


# ---- evaluating one checkpoint ------------------------------------------------------------


def run_paths(cfg: RunConfig) -> tuple[Path, Path, Path]:
    """(out_dir, checkpoints dir, eval log dir), as the training loop lays them out."""
    from tfperf.train.checkpoint import run_dirs

    dirs = run_dirs(cfg)
    return dirs.out_dir, dirs.checkpoint_dir, dirs.eval_logs


def _per_example(values: Any) -> Any:
    """Loss or metric values reduced to one number per example."""
    import tensorflow as tf

    values = tf.cast(values, tf.float32)
    if values.shape.rank == 0:
        return tf.reshape(values, [1])
    return tf.reduce_mean(tf.reshape(values, [tf.shape(values)[0], -1]), axis=1)


class Evaluator:
    """The run file's model and eval data, built once; `evaluate(prefix)` restores a
    checkpoint into the model and returns the mean loss and metrics over the eval split."""

    def __init__(self, cfg: RunConfig, *, max_steps: int | None = None, progress: bool = False):
        import tensorflow as tf

        from tfperf.inputs.datasets import make_input_dataset
        from tfperf.train.step import adapt_features, build_model_and_loss

        self.cfg = cfg
        self.progress = progress
        self.steps = max_steps or cfg.eval.steps
        self.model, self.loss_fn, self.metric_fns = build_model_and_loss(cfg)
        self._adapt = adapt_features
        self.dataset = make_input_dataset(
            cfg, training=False, batch_size=cfg.eval.batch_size or cfg.pipeline.batch_size
        )
        if self.dataset.cardinality() == tf.data.INFINITE_CARDINALITY and self.steps is None:
            raise UserError(
                "eval.steps: the eval dataset repeats forever; set eval.steps (batches per "
                "evaluation) or make data.pipeline return one epoch when training=False"
            )
        self._build()
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False)
        # Only model and step: the evaluator never needs the optimizer or the iterator.
        self.checkpoint = tf.train.Checkpoint(model=self.model, step=self.step)
        # Batch shapes vary (the last batch of an epoch): trace generically, not per shape.
        self._batch_fn = tf.function(self._batch, reduce_retracing=True)

    def _build(self) -> None:
        import tensorflow as tf

        if self.model.built and self.model.weights:
            return
        features_spec = self.dataset.element_spec[0]

        def zeros(spec: Any) -> Any:
            return tf.zeros([1 if d is None else d for d in spec.shape.as_list()], spec.dtype)

        self.model(self._adapt(self.model, tf.nest.map_structure(zeros, features_spec)))

    def _batch(self, features: Any, labels: Any) -> dict[str, Any]:
        import tensorflow as tf

        pred = self.model(self._adapt(self.model, features), training=False)
        per = _per_example(self.loss_fn(labels, pred))
        out = {"_n": tf.cast(tf.shape(per)[0], tf.float32), "loss": tf.reduce_sum(per)}
        for name, fn in self.metric_fns.items():
            out[name] = tf.reduce_sum(_per_example(fn(labels, pred)))
        return out

    def check_fits(self, prefix: str) -> None:
        """Raises CheckpointMismatchError unless every model variable's shape is in the
        checkpoint. Shapes, not names: Keras names unnamed layers per process (dense_3)."""
        from collections import Counter

        from tfperf.train.warm_start import read_checkpoint_variables

        saved = Counter(shape for _, shape in read_checkpoint_variables(prefix).values())
        wanted = Counter(tuple(v.shape) for v in self.model.weights)
        lacking = wanted - saved
        if lacking:
            shapes = ", ".join(str(s) for s in list(lacking)[:5])
            raise CheckpointMismatchError(
                f"{prefix}: does not fit the model of {self.cfg.source or 'the run file'}: "
                f"no saved variable of shape {shapes}; was it written by this run file?"
            )

    def restore(self, prefix: str) -> int:
        """Loads model weights and step from `prefix`; returns the saved step."""
        self.check_fits(prefix)
        self.checkpoint.read(prefix).expect_partial()
        return int(self.step.numpy())

    def evaluate(self, prefix: str) -> tuple[int, dict[str, float], int]:
        """(step, {'loss': ..., metric: ...}, examples) of one checkpoint."""
        step = self.restore(prefix)
        sums: dict[str, float] = {}
        ds = self.dataset.take(self.steps) if self.steps else self.dataset
        with self._progress(step) as advance:
            for features, labels in ds:
                for k, v in self._batch_fn(features, labels).items():
                    sums[k] = sums.get(k, 0.0) + float(v)
                advance()
        n = sums.pop("_n", 0.0)
        if n == 0:
            raise UserError(f"data.eval_split: '{self.cfg.data.eval_split}' gave no examples")
        return step, {k: v / n for k, v in sums.items()}, int(n)

    def _progress(self, step: int) -> Any:
        from contextlib import contextmanager

        @contextmanager
        def bar() -> Any:
            if not self.progress:
                yield lambda: None
                return
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            with Progress(TextColumn("eval step {task.fields[step]}"), BarColumn(),
                          MofNCompleteColumn(), console=console, transient=True) as p:  # fmt: skip
                task = p.add_task("eval", total=self.steps, step=step)
                yield lambda: p.advance(task)

        return bar()


def evaluate_checkpoint(cfg: RunConfig, path: str) -> dict[str, float]:
    """Mean eval loss and metrics of one checkpoint (a ckpt-N prefix or a checkpoints dir)."""
    prefix = resolve_prefix(path)
    _, metrics, _ = Evaluator(cfg).evaluate(prefix)
    return metrics


def resolve_prefix(path: str | Path) -> str:
    """A ckpt-N prefix from a prefix, a checkpoints dir or a run dir (newest ready one)."""
    p = Path(path)
    if Path(f"{p}.index").exists():
        if not is_complete(p):
            raise UserError(f"--checkpoint {p}: incomplete (data files missing)")
        return str(p)
    for d in (p / "checkpoints", p):
        latest = latest_ready(d)
        if latest:
            return latest.path
    raise UserError(f"--checkpoint {p}: expected a ckpt-N prefix or a folder of checkpoints, "
                    "found no finished checkpoint there")  # fmt: skip


# ---- outputs: summaries, results file, best/ ----------------------------------------------


class _Outputs:
    """eval/* TensorBoard scalars, eval_results.jsonl and best/ of one run."""

    def __init__(self, cfg: RunConfig, out_dir: Path, log_dir: Path):
        import tensorflow as tf

        self.cfg = cfg
        self.out_dir = out_dir
        self.results = out_dir / RESULTS_NAME
        self.best_dir = out_dir / BEST_DIR
        log_dir.mkdir(parents=True, exist_ok=True)
        self.writer = tf.summary.create_file_writer(str(log_dir))
        self.best = self._read_best()

    def _read_best(self) -> dict[str, Any] | None:
        try:
            best = json.loads((self.best_dir / "best.json").read_text())
        except (OSError, ValueError):
            return None
        # A best/ chosen by another metric or mode says nothing about this one.
        if best.get("metric") != self.cfg.eval.metric or best.get("mode") != self.cfg.eval.mode:
            return None
        return best

    def evaluated_steps(self) -> list[int]:
        """Steps already in eval_results.jsonl (a restarted evaluator does not redo them)."""
        try:
            lines = self.results.read_text().splitlines()
        except OSError:
            return []
        steps = []
        for line in lines:
            try:
                steps.append(int(json.loads(line)["step"]))
            except (ValueError, KeyError, TypeError):
                continue  # a torn last line from a killed evaluator
        return steps

    def write(self, record: EvalRecord) -> None:
        import tensorflow as tf

        if self.cfg.eval.metric not in record.metrics:  # checked before anything is written
            raise UserError(
                f"eval.metric: expected one of {sorted(record.metrics)}, "
                f"found '{self.cfg.eval.metric}'"
            )
        with self.writer.as_default():
            for name, value in record.metrics.items():
                tf.summary.scalar(f"eval/{name}", value, step=record.step)
        self.writer.flush()
        record.best = self._update_best(record)
        with self.results.open("a") as f:
            f.write(record.to_json() + "\n")

    def _update_best(self, record: EvalRecord) -> bool:
        metric, mode = self.cfg.eval.metric, self.cfg.eval.mode
        value = record.metrics[metric]
        if self.best is not None:
            old = float(self.best["value"])
            if (value >= old) if mode == "min" else (value <= old):
                return False
        self._copy_best(record, value)
        return True

    def _copy_best(self, record: EvalRecord, value: float) -> None:
        """Copies the checkpoint's files into best/ via a temp dir and renames, so best/
        always holds one whole checkpoint."""
        src = Path(record.checkpoint)
        tmp = self.out_dir / f".{BEST_DIR}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for f in src.parent.iterdir():
            if f.name == src.name + ".index" or f.name.startswith(src.name + ".data-"):
                shutil.copy2(f, tmp / f.name)
        # A state file makes tf.train.latest_checkpoint(best/) work.
        (tmp / STATE_FILE).write_text(
            f'model_checkpoint_path: "{src.name}"\nall_model_checkpoint_paths: "{src.name}"\n'
        )
        self.best = {"metric": self.cfg.eval.metric, "mode": self.cfg.eval.mode,
                     "value": value, "step": record.step, "checkpoint": src.name,
                     "source": str(src)}  # fmt: skip
        (tmp / "best.json").write_text(json.dumps(self.best, indent=2) + "\n")
        old = self.out_dir / f".{BEST_DIR}.old-{os.getpid()}"
        if self.best_dir.exists():
            os.replace(self.best_dir, old)
        os.replace(tmp, self.best_dir)
        shutil.rmtree(old, ignore_errors=True)


# ---- the watch loop ---------------------------------------------------------------------


def _read_error_types() -> tuple[type[BaseException], ...]:
    import tensorflow as tf

    # A checkpoint deleted by max_to_keep or caught mid-write fails like this: retry later.
    return (tf.errors.OpError, OSError, ValueError)


def _parent_alive(pid: int | None, was_parent: bool) -> bool:
    if pid is None:
        return True
    import psutil

    if was_parent and os.getppid() != pid:
        return False  # we were re-parented: the trainer is gone
    return psutil.pid_exists(pid)


def watch(
    cfg: RunConfig,
    *,
    all_checkpoints: bool = False,
    poll: float = 2.0,
    timeout: float | None = None,
    max_steps: int | None = None,
    parent_pid: int | None = None,
    progress: bool = False,
    on_record: Callable[[EvalRecord], None] | None = None,
) -> list[EvalRecord]:
    """Evaluates each new finished checkpoint of the run once until the FINAL checkpoint
    is done (or `timeout` seconds pass, or process `parent_pid` exits); returns the
    records of this call. Checkpoints already in eval_results.jsonl are not redone."""
    out_dir, ckpt_dir, log_dir = run_paths(cfg)
    out_dir.mkdir(parents=True, exist_ok=True)
    evaluator = Evaluator(cfg, max_steps=max_steps, progress=progress)
    outputs = _Outputs(cfg, out_dir, log_dir)
    read_errors = _read_error_types()
    done = outputs.evaluated_steps()
    last_step = max(done) if done else -1
    failures: dict[str, int] = {}
    given_up: set[str] = set()
    records: list[EvalRecord] = []
    deadline = None if timeout is None else time.monotonic() + timeout
    was_parent = parent_pid is not None and os.getppid() == parent_pid
    last_pass = False
    final_misses = 0  # polls on which FINAL named a checkpoint that is not on disk
    while True:
        final = read_final(ckpt_dir)
        ready = [c for c in ready_checkpoints(ckpt_dir) if c.path not in given_up]
        if final and final.path not in given_up and is_complete(final.path):
            if all(c.step != final.step for c in ready):
                ready = sorted([*ready, final], key=lambda c: c.step)
        elif final and final.step > last_step:
            final_misses += 1
            if final_misses > MAX_READ_FAILURES:  # moved or deleted: waiting cannot help
                console.print(f"[yellow]evaluator: FINAL names {final.path}, which is not on "
                              "disk; stopping[/]")  # fmt: skip
                given_up.add(final.path)
        todo, skipped = plan_catch_up(ready, last_step, all_checkpoints)
        if skipped:
            console.print(f"evaluator: behind by {skipped + 1} checkpoints; evaluating the "
                          f"newest (step {todo[-1].step}), skipped {skipped}")  # fmt: skip
        progressed = failed = False
        for ckpt in todo:
            t0 = time.monotonic()
            try:
                step, metrics, examples = evaluator.evaluate(ckpt.path)
            except UserError:
                raise  # a wrong run file or metric: retrying cannot help
            except read_errors as exc:
                failures[ckpt.path] = failures.get(ckpt.path, 0) + 1
                msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                if failures[ckpt.path] >= MAX_READ_FAILURES:
                    given_up.add(ckpt.path)
                    console.print(f"[yellow]evaluator: giving up on {ckpt.path}: {msg}[/]")
                else:
                    console.print(f"evaluator: cannot read {ckpt.path} yet ({msg}); will retry")
                failed = True
                break  # the rest of the list is re-planned at the next poll
            rec = EvalRecord(step=ckpt.step, checkpoint=ckpt.path, metrics=metrics,
                             skipped=skipped, seconds=time.monotonic() - t0,
                             examples=examples)  # fmt: skip
            if step != ckpt.step:
                console.print(f"[yellow]evaluator: {ckpt.path} holds step {step}[/]")
            outputs.write(rec)
            records.append(rec)
            last_step = ckpt.step
            progressed = True
            if on_record is not None:
                on_record(rec)
        if final is not None and (last_step >= final.step or final.path in given_up):
            break
        if last_pass:
            console.print("[yellow]evaluator: the trainer exited without FINAL; stopping[/]")
            break
        if progressed and not failed:
            continue  # more may have arrived while evaluating; a failure waits a poll
        if deadline is not None and time.monotonic() >= deadline:
            console.print(f"[yellow]evaluator: no FINAL after {timeout:g} s; stopping[/]")
            break
        if not _parent_alive(parent_pid, was_parent):
            last_pass = True  # one more look: the trainer may have saved as it stopped
            continue
        time.sleep(poll)
    return records


# ---- the child process the training loop starts --------------------------------------------


def spawn_evaluator(
    runfile: str, overrides: list[str], *, log_path: str | Path | None = None
) -> subprocess.Popen:
    """Starts `tfperf evaluate RUNFILE --watch` as a child process on the CPU (GPUs hidden
    before TensorFlow loads), logging to {out_dir}/logs/evaluator.log by default. It exits
    by itself after the FINAL checkpoint, or when this process exits."""
    if log_path is None:
        cfg = load_config(runfile, overrides)
        out_dir, _, _ = run_paths(cfg)
        log_path = out_dir / "logs" / "evaluator.log"
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "tfperf.cli.main", "evaluate", str(runfile), "--watch",
           "--parent-pid", str(os.getpid())]  # fmt: skip
    for item in overrides:
        cmd += ["--set", item]
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2")
    with log_path.open("ab") as log:
        return subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
