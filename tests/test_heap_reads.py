"""Heap reads of attributes at run time (``JanusPyGetAttr``): the C path must read what Python's
``getattr`` reads and refuse, as the Python path does, every value the graph was not specialised on.

Recursive functions over user objects read their attributes inside the graph. The kernels take
the common case (an object the call's store handed out, an attribute the call has not written,
an object of the expected class, a bool, an int in int64 or a float, ``None`` where optional) in
C and hand everything else to ``janus.ops.pyheap``. Each test serves calls from graphs, then
feeds values of the other kinds, compared with eager after every call.
"""

import pytest
import tensorflow as tf
from differential import run_differential

import janus


class Node:
    def __init__(self, word=None, left=None, right=None, scale=1.0, flag=True):
        self.word, self.left, self.right, self.scale, self.flag = word, left, right, scale, flag


class SubNode(Node):
    pass


def tree(a, b, c, **attrs):
    return Node(left=Node(a, **attrs), right=Node(left=Node(b, **attrs), right=Node(c, **attrs), **attrs), **attrs)


def leaf_value(node):
    return tf.cast(tf.constant([node.word]), tf.float32) * node.scale + (1.0 if node.flag else -1.0)


def encode(node):
    if node.word is not None:
        return leaf_value(node)
    return encode(node.left) * 0.5 + encode(node.right)


def make_encode():
    return encode, lambda: None


SERVED = [(tree(i, i + 1, i + 2),) for i in range(8)]  # profiled, then at least four from graphs


@pytest.mark.parametrize(
    "odd",
    [2**63 - 1, -(2**63), 2**63, -(2**70), True, 2.5, "3", None],
    ids=["int64_max", "int64_min", "past_int64", "far_below", "bool", "float", "str", "none"],
)
def test_leaf_word_of_another_kind_or_range(odd):
    calls = [*SERVED, (tree(1, odd, 2),), (tree(3, 4, 5),), (tree(odd, odd, odd),), (tree(0, 1, 2),)]
    run_differential(make_encode, calls, min_graph_calls=4)


@pytest.mark.parametrize("odd", [2, True, None, float("nan"), float("-inf"), -0.0], ids=str)
def test_float_attribute_of_another_kind(odd):
    calls = [*SERVED, (tree(1, 2, 3, scale=odd),), (tree(1, 2, 3, scale=0.25),)]
    run_differential(make_encode, calls, min_graph_calls=4)


@pytest.mark.parametrize("odd", [1, 0, None, 2.0, "yes"], ids=str)
def test_bool_attribute_of_another_kind(odd):
    calls = [*SERVED, (tree(1, 2, 3, flag=False),), (tree(1, 2, 3, flag=odd),), (tree(4, 5, 6),)]
    run_differential(make_encode, calls, min_graph_calls=4)


def test_child_of_a_subclass_or_another_class():
    class Other:
        word, left, right, scale, flag = 3, None, None, 1.0, True

    odd_sub = tree(1, 2, 3)
    odd_sub.right.left = SubNode(7)
    odd_other = tree(1, 2, 3)
    odd_other.left = Other()
    calls = [*SERVED, (odd_sub,), (tree(2, 3, 4),), (odd_other,), (tree(5, 6, 7),)]
    run_differential(make_encode, calls, min_graph_calls=4)


def test_child_missing_or_none_where_an_object_was_seen():
    missing = tree(1, 2, 3)
    del missing.right.left
    no_child = tree(1, 2, 3)
    no_child.right.right = None  # an inner node whose child is None: eager raises reading None.word
    calls = [*SERVED, (missing,), (tree(2, 3, 4),), (no_child,), (tree(5, 6, 7),)]
    run_differential(make_encode, calls, min_graph_calls=4)


def test_properties_and_slots_run_in_python():
    """A property (user code on every read) and a ``__slots__`` descriptor are not read in the
    graph: janus runs such functions in Python, reading each once, as eager does."""

    class Lazy(Node):
        reads = 0

        @property
        def scale(self):
            Lazy.reads += 1
            if self.word == 99:
                raise ValueError("no scale for 99")
            return 2.0

        @scale.setter
        def scale(self, value):
            pass

    class Slotted:
        __slots__ = ("word", "left", "right", "scale", "flag")

        def __init__(self, word=None, left=None, right=None):
            self.word, self.left, self.right, self.scale, self.flag = word, left, right, 0.5, True

    def make():
        Lazy.reads = 0
        return encode, lambda: Lazy.reads

    def build(cls, a, b, c):
        return cls(left=cls(a), right=cls(left=cls(b), right=cls(c)))

    for cls in (Lazy, Slotted):
        calls = [(build(cls, i, i + 1, i + 2),) for i in range(6)] + [(build(cls, 1, 99, 2),), (build(cls, 3, 4, 5),)]
        run_differential(make, calls, min_graph_calls=0)


def test_attributes_from_getattr_fallback_run_in_python():
    """Attributes a class's ``__getattr__`` supplies: janus runs the function in Python, and its
    ``__getattr__`` runs exactly when eager's does (janus once called it while generating, to look
    for ``__func__``: a user method run at build time, and a KeyError from it an internal error)."""

    def make():
        class Dynamic:  # each run its own class, so each counts its own calls
            calls = 0

            def __init__(self, word):
                self.word, self.left, self.right = word, None, None

            def __getattr__(self, name):
                Dynamic.calls += 1
                return {"scale": 3.0, "flag": False}[name]  # a KeyError for any other name

        def dynamic_tree(a, b, c):
            root = Dynamic(None)
            root.left, root.right = Dynamic(a), Dynamic(None)
            root.right.left, root.right.right = Dynamic(b), Dynamic(c)
            return root

        trees = [dynamic_tree(i, i + 1, i + 2) for i in range(8)]
        return (lambda i: encode(trees[i])), lambda: Dynamic.calls

    jitted = run_differential(make, [(i,) for i in range(8)], min_graph_calls=0)
    assert "internal error" not in janus.explain(jitted)


class Link:
    def __init__(self, count, rest=None):
        self.count, self.rest = count, rest


def chain(*counts):
    link = None
    for c in reversed(counts):
        link = Link(c, link)
    return link


COUNTS = [(i, i + 1, i + 2) for i in range(8)] + [(2**63 - 1, 1, 2), (1, 2, 3), (4, 5, 6)]


def test_attribute_written_earlier_in_the_call_is_read_back():
    """A read after the call's own write gets the written value (the store's local copy); the
    writes land when the call succeeds (``2**63 - 1 + 1`` leaves int64: that call runs in eager)."""

    def make():
        chains = [chain(*counts) for counts in COUNTS]

        def bump(link):
            link.count = link.count + 1
            total = tf.constant(float(link.count))
            if link.rest is None:
                return total
            return total + bump(link.rest)

        def state():
            out = []
            for link in chains:
                counts = []
                while link is not None:
                    counts.append(link.count)
                    link = link.rest
                out.append(counts)
            return out

        return (lambda i: bump(chains[i])), state

    run_differential(make, [(i,) for i in range(len(COUNTS))], min_graph_calls=3)
