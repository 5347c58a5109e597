"""CPU, RAM and (through NVML, when present) GPU sampling during training: a background
thread samples every `interval_s`; the training thread writes what was sampled to
TensorBoard at the current step as system/cpu_percent, system/ram_used (MiB),
system/gpu_util (%) and system/gpu_mem (MiB).

Free when off: nothing exists until the hook's on_train_begin (the loop adds the hook only
with train.monitor_system). A missing or failing NVML never fails a run.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from tfperf.hooks import Hook, RunState

log = logging.getLogger(__name__)
THREAD_NAME = "tfperf-system-monitor"


class _Nvml:
    """GPU utilisation and memory from nvidia-ml-py; `available` is False without it."""

    def __init__(self) -> None:
        self.handles: list[Any] = []
        self.lib: Any = None
        try:
            import pynvml

            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            self.lib = pynvml
        except Exception as exc:  # noqa: BLE001 - no driver, no library: CPU-only sampling
            log.debug("NVML unavailable: %s", exc)

    @property
    def available(self) -> bool:
        return bool(self.handles)

    def sample(self) -> dict[str, float]:
        out: dict[str, float] = {}
        try:
            utils = [self.lib.nvmlDeviceGetUtilizationRates(h).gpu for h in self.handles]
            mems = [self.lib.nvmlDeviceGetMemoryInfo(h).used for h in self.handles]
        except Exception as exc:  # noqa: BLE001 - a GPU that stops answering is skipped
            log.debug("NVML sample failed: %s", exc)
            return out
        out["system/gpu_util"] = sum(utils) / len(utils)
        out["system/gpu_mem"] = sum(mems) / 2**20
        return out

    def close(self) -> None:
        if self.lib is not None:
            try:
                self.lib.nvmlShutdown()
            except Exception:  # noqa: BLE001, S110 - shutting down a broken NVML is moot
                pass


def sample_system(nvml: _Nvml | None = None) -> dict[str, float]:
    """One sample: CPU % since the previous call (all cores), RAM used, GPU if any."""
    import psutil

    out = {
        "system/cpu_percent": float(psutil.cpu_percent(interval=None)),
        "system/ram_used": psutil.virtual_memory().used / 2**20,
    }
    if nvml is not None and nvml.available:
        out.update(nvml.sample())
    return out


class SystemMonitorHook(Hook):
    """Samples in a daemon thread; writes the mean of new samples at each loop end."""

    def __init__(self, interval_s: float = 1.0):
        self.interval_s = interval_s
        self._pending: list[dict[str, float]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml: _Nvml | None = None
        self.written = 0  # scalars written (for tests and the run summary)

    def on_train_begin(self, run: RunState) -> None:
        import psutil

        self._nvml = _Nvml()
        psutil.cpu_percent(interval=None)  # primes the counter: the next call measures from now
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=THREAD_NAME, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                s = sample_system(self._nvml)
            except Exception as exc:  # noqa: BLE001 - sampling must never end training
                log.debug("system sample failed: %s", exc)
                continue
            with self._lock:
                self._pending.append(s)

    def on_loop_end(self, run: RunState, step: int, logs: dict[str, float]) -> None:
        self._flush(run, step)

    def on_train_end(self, run: RunState, logs: dict[str, float]) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        # One last sample, so that even a run shorter than the interval is recorded.
        with self._lock:
            self._pending.append(sample_system(self._nvml))
        self._flush(run, run.step)
        if self._nvml is not None:
            self._nvml.close()

    def _flush(self, run: RunState, step: int) -> None:
        with self._lock:
            samples, self._pending = self._pending, []
        if not samples or run.train_writer is None:
            return
        import tensorflow as tf

        means = {
            k: sum(s[k] for s in samples if k in s) / sum(1 for s in samples if k in s)
            for k in {k for s in samples for k in s}
        }
        with run.train_writer.as_default():
            for tag, value in sorted(means.items()):
                tf.summary.scalar(tag, value, step=step)
                self.written += 1


def peak_memory() -> dict[str, Any]:
    """Peak memory per device where TF reports it ('unavailable' on CPU)."""
    import tensorflow as tf

    out: dict[str, Any] = {}
    for dev in tf.config.list_logical_devices():
        if dev.device_type not in ("GPU", "TPU"):
            out[dev.name] = "unavailable (TF does not track CPU memory)"
            continue
        try:
            out[dev.name] = int(tf.config.experimental.get_memory_info(dev.name)["peak"])
        except (ValueError, RuntimeError) as exc:
            out[dev.name] = f"unavailable ({exc})"
    return out
