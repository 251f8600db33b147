"""SST-shaped synthetic parse trees, and their linearisation for the symbolic baselines.

The Stanford Sentiment Treebank has binary parse trees over sentences of about 19 words
(up to ~50), a label (5 classes) at the root. These trees have the same shape
statistics: sentence lengths from a clipped normal around 19, random binary bracketing,
word ids uniform over the vocabulary.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

CLASSES = 5


class Node:
    """A parse-tree node as user code holds it: children, a word at leaves, a label."""

    def __init__(self, word: int | None = None, left: Node | None = None, right: Node | None = None, label: int = 0):
        self.word = word
        self.left = left
        self.right = right
        self.label = label
        self.is_leaf = left is None


def random_tree(rng: np.random.Generator, length: int, vocab: int) -> Node:
    if length == 1:
        return Node(word=int(rng.integers(0, vocab)), label=int(rng.integers(0, CLASSES)))
    split = int(rng.integers(1, length))
    return Node(
        left=random_tree(rng, split, vocab),
        right=random_tree(rng, length - split, vocab),
        label=int(rng.integers(0, CLASSES)),
    )


def sst_batches(n: int, batch: int, vocab: int, seed: int, max_len: int = 50) -> list[list[Node]]:
    rng = np.random.default_rng(seed)
    lengths = lambda: int(np.clip(round(rng.normal(19, 9)), 2, max_len))  # noqa: E731
    return [[random_tree(rng, lengths(), vocab) for _ in range(batch)] for _ in range(n)]


@dataclasses.dataclass
class Linearized:
    """A batch of trees in post order: children come before their parent."""

    words: tf.Tensor  # [nodes] int32 (0 at inner nodes)
    left: tf.Tensor  # [nodes] int32 index of the left child (-1 at leaves)
    right: tf.Tensor
    is_leaf: tf.Tensor  # [nodes] bool
    roots: tf.Tensor  # [trees] int32 index of each root
    labels: tf.Tensor  # [trees] int32 root labels


def linearize(trees: list[Node]) -> Linearized:
    words, left, right, leaf, roots, labels = [], [], [], [], [], []

    def visit(node: Node) -> int:
        if node.is_leaf:
            words.append(node.word)
            left.append(-1)
            right.append(-1)
            leaf.append(True)
        else:
            a, b = visit(node.left), visit(node.right)
            words.append(0)
            left.append(a)
            right.append(b)
            leaf.append(False)
        return len(words) - 1

    for tree in trees:
        roots.append(visit(tree))
        labels.append(tree.label)
    i32 = lambda v: tf.constant(v, tf.int32)  # noqa: E731
    return Linearized(i32(words), i32(left), i32(right), tf.constant(leaf), i32(roots), i32(labels))
