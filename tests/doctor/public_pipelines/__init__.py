"""Input pipelines ported from public code (TensorFlow's tutorials and guides,
tensorflow/models, TFDS documentation, widely used books' notebooks), each beside the
hand-tuned twin an engineer would write in an afternoon: the corpus of issue 19, section 4.
keras-team/keras-io is left out on purpose (an independent check).

Each module is one case (see cases.py for the registry and what a module defines); the
stand-in data is written by its `make_data(dir)`, small, in the source's on-disk format.
tests/doctor/test_public_pipelines.py checks them; benchmarks/bench_doctor_public.py
times the doctor on them.
"""
