"""janus benchmarks: eager vs janus vs hand-written tf.function, in one process, interleaved."""
