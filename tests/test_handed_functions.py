"""[generalize] Lambdas, nested defs, user functions and methods handed to TF APIs that call them
while the graph is built (tf.cond, tf.switch_case, tf.map_fn, tf.while_loop, tf.scan, tf.foldl):
janus converts their bodies when TF calls them. What eager would do differently (Python effects
in a branch only one side of which runs, Python values eager keeps as they are, a function TF
keeps for later) runs eagerly instead.
"""

import functools

import tensorflow as tf
from differential import run_differential

import janus


def vec(*values):
    return tf.constant([float(v) for v in values])


def pairs(n):
    return [(vec(i % 3, 1.0 - i), tf.constant(1.0 + i % 2)) for i in range(n)]


def no_state():
    return None


def scaled_rows(t, scale=2.0):
    return t * scale + 1.0


# ---------------------------------------------------------------- served from graphs


def test_nested_defs_as_tf_cond_branches_returning_tuples():
    def make():
        def step(x, limit):
            total = tf.reduce_sum(x)

            def big():
                return total * 2.0, x - 1.0

            def small():
                y = x * x
                return total - 1.0, y

            a, b = tf.cond(total > limit, big, small)
            return a + 1.0, b

        return step, no_state

    run_differential(make, pairs(9), min_graph_calls=4)


class Gate:
    def __init__(self):
        self.w = tf.Variable([0.5, -1.5])

    def train_branch(self, x):
        return tf.nn.relu(x * self.w)

    def eval_branch(self, x):
        return x * self.w

    def __call__(self, x, training):
        return tf.cond(training, lambda: self.train_branch(x), lambda: self.eval_branch(x))


def test_methods_called_from_tf_cond_lambdas_with_gradients():
    def make():
        gate = Gate()

        def step(x, training):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(gate(x, training) ** 2)
            grad = tape.gradient(loss, gate.w)
            gate.w.assign_sub(0.1 * grad)
            return loss, grad

        return step, lambda: gate.w

    calls = [(vec(i, 1.0 - i), tf.constant(i % 3 == 0)) for i in range(9)]
    run_differential(make, calls, min_graph_calls=4)


def test_tf_map_fn_with_a_nested_def_a_partial_and_a_module_function():
    def make():
        w = tf.constant([[1.0, 2.0], [0.5, -1.0]])

        def step(x):
            def project(row):
                return tf.linalg.matvec(w, row), tf.reduce_max(row)

            rows, peaks = tf.map_fn(project, x, fn_output_signature=(tf.float32, tf.float32))
            halved = tf.map_fn(functools.partial(scaled_rows, scale=0.5), x)
            return rows, peaks, halved, tf.map_fn(scaled_rows, x)

        return step, no_state

    run_differential(make, [(tf.fill([1 + i % 3, 2], float(i)),) for i in range(9)], min_graph_calls=4)


def test_tf_while_loop_with_lambdas_over_tensor_loop_vars():
    def make():
        def step(x, n):
            i0 = tf.constant(0)
            _, acc = tf.while_loop(lambda i, acc: i < n, lambda i, acc: (i + 1, acc * 0.5 + x), (i0, x))
            return acc

        return step, no_state

    run_differential(make, [(vec(i, 2.0), tf.constant(i % 4)) for i in range(9)], min_graph_calls=4)


def test_tf_switch_case_scan_and_foldl_with_lambdas():
    def make():
        def step(x, k):
            picked = tf.switch_case(k, [lambda: x * 2.0, lambda: x - 1.0, lambda: tf.reverse(x, [0])])
            running = tf.scan(lambda a, t: a + t, x, initializer=tf.constant(0.0))
            total = tf.foldl(lambda a, t: a * 0.5 + t, x)
            return picked, running, total

        return step, no_state

    run_differential(make, [(vec(i, 1.0, -i), tf.constant(i % 3)) for i in range(9)], min_graph_calls=4)


class Sizer:
    def __init__(self):
        self.n = 2


def test_an_assumption_inside_a_tf_cond_branch_orders_the_update_after_it():
    """``[n]`` with ``n`` relaxed to a run-time int gets an int32-range JanusAssert inside
    the branch; the variable update after the tf.cond must wait for it."""

    def make():
        sizer = Sizer()
        v = tf.Variable(0.0)

        def step(x, flag):
            n = sizer.n
            out = tf.cond(flag, lambda: tf.fill([n], tf.reduce_sum(x)), lambda: tf.zeros([n]))
            v.assign_add(tf.reduce_sum(out))
            sizer.n = sizer.n % 3 + 2
            return out

        return step, lambda: (v, sizer.n)

    jitted = run_differential(make, [(vec(i, 1.0), tf.constant(i % 2 == 0)) for i in range(10)], min_graph_calls=4)
    assert "(value relaxed)" in janus.explain(jitted)


def test_tf_cond_on_a_python_bool_calls_only_the_taken_function_as_eager_does():
    """Eager calls the one function and returns what it returns (a Python float too); its print runs once."""

    def make():
        def step(x, training):
            def noisy():
                print("training branch")
                return x * 2.0

            return tf.cond(training, noisy, lambda: 1.0)

        return step, no_state

    run_differential(make, [(vec(i, 1.0), i % 3 == 0) for i in range(9)], min_graph_calls=4)


# ---------------------------------------------------------------- refused: eager runs them


def refused(make, calls, reason):
    jitted = run_differential(make, calls, min_graph_calls=0)
    assert reason in janus.explain(jitted), janus.explain(jitted)


def test_a_tf_cond_branch_that_appends_to_a_python_list_runs_eagerly():
    def make():
        def step(x, limit):
            taken = []

            def big():
                taken.append("big")
                return x * 2.0

            def small():
                taken.append("small")
                return x - 1.0

            y = tf.cond(tf.reduce_sum(x) > limit, big, small)
            return y, len(taken)

        return step, no_state

    refused(make, pairs(6), "changes a list or dict it can see")


def test_a_tf_cond_branch_that_prints_runs_eagerly():
    def make():
        def step(x, limit):
            def big():
                print("big branch")
                return x * 2.0

            return tf.cond(tf.reduce_sum(x) > limit, big, lambda: x - 1.0)

        return step, no_state

    refused(make, pairs(6), "heap write inside tensor-dependent control flow")


def test_tf_cond_lambdas_returning_python_numbers_run_eagerly():
    """Eager's tf.cond gives back the Python float the lambda returned; a graph would give a tensor."""

    def make():
        def step(x, limit):
            return tf.cond(tf.reduce_sum(x) > limit, lambda: 1.0, lambda: 0.0)

        return step, no_state

    refused(make, pairs(6), "returns a float")


def test_a_nonlocal_write_in_a_tf_cond_branch_runs_eagerly():
    def make():
        def step(x, limit):
            hits = 0

            def big():
                nonlocal hits
                hits += 1
                return x * 2.0

            y = tf.cond(tf.reduce_sum(x) > limit, big, lambda: x)
            return y, hits

        return step, no_state

    refused(make, pairs(6), "`nonlocal hits` written inside tensor-dependent control flow")


def test_tf_while_loop_over_python_numbers_runs_eagerly():
    """Eager runs this loop on Python ints and floats (float64 sums); a graph would use float32."""

    def make():
        def step(x, n):
            i, acc = tf.while_loop(lambda i, acc: i < 3, lambda i, acc: (i + 1, acc + 0.1), [0, 0.0])
            return x * acc, i

        return step, no_state

    refused(make, pairs(6), "loop_vars are not all tensors")


def test_a_tf_while_loop_body_returning_another_structure_runs_eagerly():
    """Eager's result is whatever the last body call returned: a list here, not loop_vars' tuple."""

    def make():
        def step(x, n):
            return tf.while_loop(lambda i, a: i < n, lambda i, a: [i + 1.0, a * 2.0], (tf.constant(0.0), x))

        return step, no_state

    refused(make, pairs(6), "another structure than loop_vars")


def test_a_tf_while_loop_test_that_is_not_a_scalar_runs_eagerly():
    """Eager's ``while`` takes the truth of a one-element tensor; a graph's loop wants a scalar."""

    def make():
        def step(x, n):
            return tf.while_loop(lambda i, a: tf.reshape(i < n, [1]), lambda i, a: (i + 1.0, a * 2.0), (0.0 * n, x))

        return step, no_state

    refused(make, pairs(6), "returns something other than a boolean scalar tensor")


def test_a_lambda_handed_to_tf_py_function_runs_eagerly():
    def make():
        def step(x, limit):
            return tf.py_function(lambda t: t * 2.0, [x], tf.float32)

        return step, no_state

    refused(make, pairs(6), "does not know to call it only while the graph is built")


def test_a_lambda_handed_to_an_api_janus_does_not_know_runs_eagerly():
    def make():
        def step(x, limit):
            return tf.recompute_grad(lambda t: t * limit)(x)

        return step, no_state

    refused(make, pairs(6), "does not know to call it only while the graph is built")


class Counter:
    def __init__(self):
        self.calls = 0

    def branch(self, x):
        self.calls += 1
        return x * 2.0


def test_a_method_that_writes_an_attribute_in_a_tf_map_fn_runs_eagerly():
    def make():
        counter = Counter()

        def step(x):
            return tf.map_fn(counter.branch, x)

        return step, lambda: counter.calls

    refused(make, [(tf.fill([1 + i % 3, 2], float(i)),) for i in range(6)], "heap write inside")


def test_a_refusal_inside_tf_map_fn_leaves_eager_s_variable_scope_as_it_was():
    """tf.map_fn sets a caching device on the variable scope eager shares and unsets it only when the
    function returns: after janus's refusal from inside it, eager still creates v1 optimizer slots."""
    test_a_method_that_writes_an_attribute_in_a_tf_map_fn_runs_eagerly()
    w = tf.Variable([1.0, 2.0])
    opt = tf.compat.v1.train.MomentumOptimizer(0.1, momentum=0.9)
    opt.minimize(lambda: tf.reduce_sum(w * w), var_list=[w])  # a slot made under a variable_scope
    assert tf.compat.v1.get_variable_scope().caching_device is None
