"""The CPU of starting TensorFlow in a fresh process, as every `tfperf` command, data-service
server, evaluator and test worker does: a plain `import tensorflow` vs the import as tfperf's
command line makes it (`quiet_tensorflow`'s hook: start-up lines filtered, the garbage
collector's passes off during the import and its objects frozen after; util/startup.py).
Fresh interpreters, the two variants interleaved, CPU (user + sys) of each child; the ratio
is the median of the per-pair ratios.

    python benchmarks/bench_startup.py [--quick] [--repeats N]
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys

from common import machine, parse_args, say, table

VARIANTS = {
    "plain `import tensorflow`": "import tensorflow",
    "through tfperf's hook": (
        "from tfperf.cli.common import quiet_tensorflow; quiet_tensorflow(); import tensorflow"
    ),
}


def child_cpu(code: str) -> float:
    """CPU seconds (user + sys) of `python -c code` in a fresh interpreter."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    args = parse_args(__doc__)
    repeats = args.repeats or (3 if args.quick else 11)
    cpu: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for r in range(repeats):
        for name, code in VARIANTS.items():
            cpu[name].append(child_cpu(code))
        say(f"repeat {r + 1}/{repeats} done")
    plain, hooked = (cpu[name] for name in VARIANTS)
    ratios = sorted(h / p for p, h in zip(plain, hooked, strict=True))
    rows = [
        [name, f"{statistics.median(v):.2f} s [{min(v):.2f}-{max(v):.2f}]"]
        for name, v in cpu.items()
    ]
    print("## Start-up: importing TensorFlow in a fresh process (bench_startup.py)\n")
    print(machine() + "\n")
    print(table(["variant", f"CPU, median [min-max] of {repeats}"], rows))
    print(
        f"\nThrough the hook / plain, paired run by run: {statistics.median(ratios):.2f}x "
        f"[{ratios[0]:.2f}-{ratios[-1]:.2f}]"
    )


if __name__ == "__main__":
    main()
