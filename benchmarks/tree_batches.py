"""[generalize] TreeRNN as users write it: leaves marked by ``node.word is not None``, batches of any size.

The training step recurses over Python tree objects whose inner nodes hold ``word = None`` and
whose leaves hold an int, over a Python list of trees whose length changes (the tail batch of an
epoch is smaller). janus must serve every batch from one graph: the list travels as one pointer,
``for tree in batch`` becomes a loop over its run-time length, ``node.word`` an optional int.

Three variants, timed interleaved in one process (``benchmarks.harness.measure``):

* ``eager``: the step as written;
* ``janus``: the same step under ``janus.jit``;
* ``symbolic``: the hand-written ``tf.function`` of ``benchmarks.models.treernn`` (each batch
  linearised in Python, one ``tf.while_loop`` over its nodes).

Target (issue #16): janus ≥ 10× eager at batch 25, hidden 64, with one graph for every batch.
``python -m benchmarks.tree_batches [--quick]``.
"""

from __future__ import annotations

import argparse
import itertools

import tensorflow as tf

import janus
from benchmarks.harness import machine, measure, write_json
from benchmarks.models import treernn
from benchmarks.models import trees as tree_data

TAIL = 13  # the last batch of an epoch


class Encoder:
    """The model of ``benchmarks.models.treernn`` with the leaf test users write."""

    def __init__(self, hidden: int) -> None:
        self.model = treernn.TreeRNN(hidden)

    def encode(self, node: tree_data.Node) -> tf.Tensor:
        if node.word is not None:
            return tf.nn.embedding_lookup(self.model.embedding, [node.word])
        return self.model.combine(tf.concat([self.encode(node.left), self.encode(node.right)], axis=1))


def _step(encoder: Encoder, optimizer) -> callable:
    model = encoder.model

    def train_step(batch: list) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = 0.0
            for tree in batch:
                logits = model.classify(encoder.encode(tree))
                loss += tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits([tree.label], logits))
            loss = loss / len(batch)
        grads = tape.gradient(loss, model.variables)
        optimizer.apply_gradients(zip(grads, model.variables))
        return loss

    return train_step


def tree_batches(quick: bool = False) -> dict:
    batch, hidden = treernn.sizes(quick)
    tf.keras.utils.set_random_seed(0)
    full = tree_data.sst_batches(3 if quick else 6, batch, treernn.VOCAB, seed=0)
    tail = tree_data.sst_batches(1, TAIL if not quick else 3, treernn.VOCAB, seed=1)
    epoch = full + tail  # every variant sees the same cycle of batches
    programs = {}
    for name in ("eager", "janus", "symbolic"):
        program = treernn.build(quick, seed=0)
        program.batches = epoch
        encoder = Encoder(hidden)
        encoder.model = program.model
        programs[name] = (program, encoder)
    eager_program, eager_encoder = programs["eager"]
    janus_program, janus_encoder = programs["janus"]
    jitted = janus.jit(_step(janus_encoder, janus_program.optimizer))
    eager_step = _step(eager_encoder, eager_program.optimizer)
    cycles = {name: itertools.cycle(epoch) for name in ("eager", "janus")}
    variants = {
        "eager": lambda: eager_step(next(cycles["eager"])),
        "janus": lambda: jitted(next(cycles["janus"])),
        "symbolic": treernn.symbolic(programs["symbolic"][0]),
    }
    m = measure("tree_batches", variants, unit="trees/s", items_per_step=len(sum(epoch, [])) / len(epoch),
                warmup=len(epoch) + 2, repeats=5 if quick else 9, steps=len(epoch))  # fmt: skip
    stats = janus.stats(jitted)
    assert stats["graph_calls"] > 0, stats
    return {
        "name": "tree_batches",
        "machine": machine(),
        "batch": batch,
        "tail_batch": len(tail[0]),
        "hidden": hidden,
        "ms_per_step": {k: v * 1e3 for k, v in m.per_step.items()},
        "janus_over_eager": m.ratio("janus", "eager"),
        "janus_over_symbolic": m.ratio("janus", "symbolic"),
        "graphs_built": stats["graphs_built"],
        "graph_calls": stats["graph_calls"],
        "calls": stats["calls"],
        "build_seconds": stats["build_seconds"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    result = tree_batches(parser.parse_args().quick)
    print(result)
    print(f"wrote {write_json('tree_batches.json', result)}")


if __name__ == "__main__":
    main()
