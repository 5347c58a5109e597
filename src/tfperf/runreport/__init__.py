"""The HTML report of a run: what tfperf left in a run folder (the training summary, the
doctor's result, TensorBoard logs, eval results) read into plain dicts (`run_dir`,
`events`), drawn with plotly (`charts`) and laid out as one self-contained page (`tables`,
`page`). It measures nothing and knows nothing of TensorFlow's objects, only of the files."""
