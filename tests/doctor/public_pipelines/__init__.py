"""Input pipelines ported from public code (TensorFlow's tutorials and guides,
tensorflow/models, TFDS documentation, widely used books' notebooks, and training code
outside them: detection, segmentation, packing, bucketing, two-view, spectrogram and
recommendation inputs), each beside the hand-tuned twin an engineer would write in an
afternoon: the corpus of issue 19, section 4, and issue 30, section 5. keras-team/keras-io,
google/flax, google-research's vision_transformer, big_transfer and simclr, google/automl,
tensorflow/tpu, NVIDIA/DeepLearningExamples and google-deepmind/deepmind-research are left
out on purpose (an independent check).

Each module is one case (see cases.py for the registry and what a module defines); the
stand-in data is written by its `make_data(dir, size)` in the source's on-disk format:
small for the tests, or at the original's size (FULL examples) for the benchmark.
tests/doctor/test_public_pipelines.py checks them; benchmarks/bench_doctor_public.py
times the doctor on them.
"""
