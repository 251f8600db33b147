"""Whether a segment's graph pays for its call: a few of its first warm calls alternate with eager runs.

A graph call costs janus's guards, the argument flattening and TF's function call: tens of
microseconds. A segment of one or two ops between Python statements (``acc = acc + tf.reduce_sum(x)``
in a loop that logs ``float(acc)``) runs faster eagerly. The probe times ``SAMPLES`` eager runs
interleaved with as many graph calls, once, outside any GradientTape, and the driver keeps whichever was faster (eager's
statements give eager's answer either way). Each side is judged by its fastest sample: on a loaded
machine a call now and then waits milliseconds for a CPU (a graph call more often, as it hands over
to TF's thread pool), and a median of three kept a one-op segment's graph, or sent a conv net's loss
to eager for good, on such outliers.
"""

from __future__ import annotations

from tensorflow.python.eager import record

SAMPLES = 5


class CostProbe:
    """Times of a function's first warm graph calls and of eager runs between them."""

    def __init__(self, samples: int = SAMPLES) -> None:
        self.samples = samples
        self.eager: list[float] = []
        self.graph: list[float] = []

    @staticmethod
    def fair_now() -> bool:
        """Whether a call now can be timed: not while a GradientTape records, where eager's time
        leaves out its backward pass and the graph's is one recorded op (the graph keeps serving)."""
        return not record.could_possibly_record()

    def wants_eager(self) -> bool:
        """Whether the next call a graph could serve should run eagerly, to be timed."""
        return len(self.eager) < self.samples and len(self.eager) <= len(self.graph)

    def done(self) -> bool:
        return len(self.eager) >= self.samples and len(self.graph) >= self.samples

    def fastest(self) -> tuple[float, float]:
        """(graph, eager) fastest seconds: delays only ever add to a sample."""
        return min(self.graph), min(self.eager)
