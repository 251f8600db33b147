"""[generalize] Shapes of public TF2 code that got no graph: private methods and attributes,
nested functions called with keywords, tf.device blocks."""

import tensorflow as tf
from differential import run_differential


class Block:
    def __init__(self):
        self.__scale = 2.0
        self.__w = tf.Variable([1.0, -1.0])
        self.calls = 0

    def __prepare(self, x):
        return x * self.__scale

    def step(self, x):
        self.calls += 1
        self.__w.assign_add(self.__prepare(x))
        return tf.reduce_sum(self.__w)


def test_name_mangled_private_methods_and_attributes():
    def make():
        block = Block()
        return (lambda x: Block.step(block, x)), lambda: (block.calls, block._Block__w)

    run_differential(make, [(tf.constant([1.0, float(i)]),) for i in range(7)], min_graph_calls=3)


def test_a_nested_function_called_with_keywords_inside_a_device_block():
    def make():
        def step(x):
            def dense(inputs, *, scale=1.0, shift=0.0, mask=None):
                return inputs * scale + shift if mask is None else inputs

            with tf.device("/cpu:0"):
                y = dense(x, shift=1.0) + dense(inputs=x, scale=3.0)
            return tf.reduce_sum(y)

        return step, lambda: None

    run_differential(make, [(tf.constant([1.0, float(i)]),) for i in range(7)], min_graph_calls=3)
