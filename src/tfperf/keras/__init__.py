"""tfperf for `model.fit` users: wrap the training dataset with `monitor(ds)` and add the
`InputMonitor` callback to see input wait, examples/s and tf.data's stage model in
TensorBoard under the tags `tfperf train` writes, and a verdict at the end of fit.

    import tfperf.keras
    mon = tfperf.keras.InputMonitor(log_dir="logs")
    model.fit(tfperf.keras.monitor(train_ds), epochs=3, callbacks=[mon])

Importing this module imports Keras (and TensorFlow).
"""

from tfperf.keras.input_monitor import FitInputSummary, InputMonitor
from tfperf.keras.meter import InputMeter, MeterReading, monitor

__all__ = ["FitInputSummary", "InputMeter", "InputMonitor", "MeterReading", "monitor"]
