"""Printing an object whose text shows state: a dataclass, a ``SimpleNamespace`` or a class with its
own ``__repr__``, holding a variable the call updates below the print, or a field it changes.

Eager formats the text when the print runs. janus defers a ``print`` (or a ``tf.print`` of no
tensors) until after the graph, and formats a graph ``tf.print``'s Python values once, when it
builds the graph: either is right only where the text cannot show what the call changes. Each test
compares stdout and stderr call by call, and the state after each call.
"""

import argparse
import collections
import collections.abc
import dataclasses
import functools
import io
import logging
import types

import numpy as np
import pytest
import tensorflow as tf
from differential import assert_served, run_differential_fd

import janus


@dataclasses.dataclass
class Holder:
    value: object


@dataclasses.dataclass(slots=True)
class SlotHolder:
    value: object


class Shows:
    """A ``__repr__`` of user code, reading the variable's value through an attribute."""

    def __init__(self, v):
        self.v = v

    def __repr__(self):
        return f"Shows({float(self.v.numpy())})"


class Opaque:
    """object's own text: its type and address, which no call changes."""

    def __init__(self, v):
        self.v = v


def _differential_text(make, calls, capfd, min_graph_calls: int) -> janus.JitFunction:
    """Eager's text and state on every call. A case janus must refuse (``min_graph_calls=0``) must
    name the refusal in ``explain()``: a janus that never built a graph would not pass it."""
    jitted = run_differential_fd(make, calls, capfd, prefixes=("A ", "B "), min_graph_calls=min_graph_calls)
    if min_graph_calls == 0:
        explained = janus.explain(jitted)
        assert any(reason in explained for reason in _REFUSALS), explained
    return jitted


# How janus names the refusals these programs must meet (janus/graphgen/interpreter.py, effects.py).
_REFUSALS = (
    "handed to a deferred call",
    "a tf.print of",
    "print() to a",
    "put into a",
    "holds itself",
    "may hold tensors",
)


def _show(printer: str, shown: object, x: tf.Tensor) -> None:
    """The print under test, as users write it (janus inlines this helper into the step)."""
    if printer == "print":
        print("A", shown)
    elif printer == "print_sep":
        print("A", shown, sep="|")
    elif printer == "tf_print":
        tf.print("A", shown)
    else:
        tf.print("A", shown, x)


CALLS = [(tf.constant(float(i)),) for i in range(8)]

_WRAPS = {
    "dataclass": Holder,
    "slots_dataclass": SlotHolder,
    "namespace": lambda v: types.SimpleNamespace(value=v),
    "own_repr": Shows,
    "list_of_dataclass": lambda v: [Holder(v)],
    "dict_of_namespace": lambda v: {"k": types.SimpleNamespace(value=v)},
}

PRINTERS = ["print", "print_sep", "tf_print", "tf_print_with_a_tensor"]


@pytest.mark.parametrize("printer", PRINTERS)
@pytest.mark.parametrize("wrap", sorted(_WRAPS))
def test_an_object_holding_a_variable_updated_below_the_print(wrap, printer, capfd):
    def make():
        v = tf.Variable(1.0)
        shown = _WRAPS[wrap](v)

        def step(x):
            _show(printer, shown, x)
            v.assign_add(x + 1.0)
            return v * 2.0

        return step, lambda: v

    _differential_text(make, CALLS, capfd, min_graph_calls=0)


def test_a_log_record_of_an_object_holding_a_variable(capfd):
    logger = logging.getLogger("janus_test_print_user_objects")
    handler = logging.StreamHandler()  # stderr, formatted as it is emitted
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:

        def make():
            v = tf.Variable(1.0)
            shown = Holder(v)

            def step(x):
                logger.info("A %s", shown)
                v.assign_add(x)
                return v + 0.0

            return step, lambda: v

        _differential_text(make, CALLS, capfd, min_graph_calls=0)
    finally:
        logger.removeHandler(handler)


@pytest.mark.parametrize("printer", ["print", "tf_print", "tf_print_with_a_tensor"])
def test_a_dataclass_whose_field_the_call_changes_keeps_its_graph(printer, capfd):
    """Fields are heap state: the text shows the value before the update, as in eager."""

    def make():
        v = tf.Variable(0.0)
        shown = Holder(0)

        def step(x):
            _show(printer, shown, x)
            shown.value += 1
            v.assign_add(x)
            return v + 0.0

        return step, lambda: (v, shown.value)

    _differential_text(make, CALLS, capfd, min_graph_calls=3)


def test_an_object_with_objects_own_text_keeps_its_graph(capfd):
    """Its text is its type and address: printed after the graph, it is what eager printed."""
    v = tf.Variable(0.0)
    shown = Opaque(v)

    def step(x):
        print("A", shown)
        v.assign_add(x)
        return v + 0.0

    jitted = janus.jit(step)
    for (x,) in CALLS:
        jitted(x)
    assert capfd.readouterr().out.splitlines() == [f"A {shown!r}"] * len(CALLS)
    assert float(v.numpy()) == sum(range(8))
    assert_served(jitted, 3)


_MODULE_ATTRIBUTES = ["dict", "ordered_dict", "list", "list_in_a_tuple"]


@pytest.mark.parametrize("printer", PRINTERS)
@pytest.mark.parametrize("attribute", _MODULE_ATTRIBUTES)
def test_a_tf_module_container_attribute_prints_as_its_wrapper(attribute, printer, capfd):
    """A ``tf.Module`` wraps a dict or list attribute in a ``DictWrapper`` or ``ListWrapper``, whose
    text names it (``tf.print``, ``repr``) or shows the wrapped type (``OrderedDict``): janus's plain
    copy of it printed as a plain dict or list."""
    import collections

    class Model(tf.Module):  # a user subclass: janus reads its attributes from the heap
        pass

    def make():
        module = Model()
        module.v = tf.Variable(1.0)
        module.dict = {"a": 1}
        module.ordered_dict = collections.OrderedDict(b=2)
        module.list = [3]

        def step(x):
            if attribute == "dict":
                shown = module.dict
            elif attribute == "ordered_dict":
                shown = module.ordered_dict
            elif attribute == "list":
                shown = module.list
            else:
                shown = (module.list, 4)
            _show(printer, shown, x)
            module.v.assign_add(x)
            return module.v + 0.0

        return step, lambda: module.v

    _differential_text(make, CALLS, capfd, min_graph_calls=0)


class History(list):
    """A list subclass with its own text (a metrics log that shows the current learning rate)."""

    def __init__(self, rate):
        super().__init__()
        self.rate = rate

    def __repr__(self):
        return f"History(rate={float(self.rate.numpy())})"


class Settings(dict):
    def __repr__(self):
        return f"Settings({float(self['rate'].numpy())})"


_LIBRARY_HOLDERS = {
    "deque": lambda v: collections.deque([v]),
    "partial": lambda v: functools.partial(print, v),
    "argparse_namespace": lambda v: argparse.Namespace(rate=v),
    "slice": lambda v: slice(0, v),
    "object_array": lambda v: np.array([v, 1], dtype=object),
    "list_subclass_with_its_own_repr": History,
    "dict_subclass_with_its_own_repr": lambda v: Settings(rate=v),
}


@pytest.mark.parametrize("printer", ["print", "tf_print", "tf_print_with_a_tensor"])
@pytest.mark.parametrize("holder", sorted(_LIBRARY_HOLDERS))
def test_a_library_object_or_container_subclass_whose_text_shows_a_variable(holder, printer, capfd):
    """Text janus does not know (a library type not on its list, a container subclass's own
    ``__repr__``) counts as showing anything: such a print keeps its place."""

    def make():
        v = tf.Variable(1.0)
        shown = _LIBRARY_HOLDERS[holder](v)

        def step(x):
            _show(printer, shown, x)
            v.assign_add(x + 1.0)
            return v * 2.0

        return step, lambda: v

    _differential_text(make, CALLS, capfd, min_graph_calls=0)


class Rebuilt(list):
    """A list subclass whose constructor tf.nest cannot call: eager's tf.print raises on it."""

    def __init__(self):
        super().__init__([1, 2])


def test_a_tf_print_eager_raises_on_leaves_the_update_below_it_undone(capfd):
    def make():
        v = tf.Variable(1.0)
        shown = Rebuilt()

        def step(x):
            tf.print("A", shown)
            v.assign_add(x + 1.0)
            return v * 2.0

        return step, lambda: v

    _differential_text(make, CALLS, capfd, min_graph_calls=0)


def test_a_print_to_a_file_closed_after_the_graph_was_built(capfd):
    """Eager's print raises before the update below it; a deferred one raised after the graph ran."""

    def make():
        v = tf.Variable(1.0)
        log = io.StringIO()

        def step(x):
            print("A", x, file=log)
            v.assign_add(x + 1.0)
            return v * 2.0

        def state():
            if float(v.numpy()) > 10.0 and not log.closed:
                log.close()
            return v, log.closed

        return step, state

    jitted = _differential_text(make, CALLS, capfd, min_graph_calls=1)
    assert "the file print() writes to is open" in janus.explain(jitted)


def test_a_user_sequence_printed_runs_none_of_its_code_while_the_graph_is_built(capfd):
    """Eager's print shows its default text, running none of its methods: neither may janus (it
    listed the items with ``tf.nest`` to look for graph tensors, running them while it built)."""

    def make():
        runs = []

        class Pair(collections.abc.Sequence):
            def __getitem__(self, i):
                runs.append("getitem")
                return (1, 2)[i]

            def __len__(self):
                runs.append("len")
                return 2

        v = tf.Variable(1.0)
        pair = Pair()
        sink = io.StringIO()  # its text shows the address, which differs between the two runs

        def step(x):
            print("A", pair, file=sink)
            v.assign_add(x + 1.0)
            return v * 2.0

        return step, lambda: (v, len(runs), len(sink.getvalue().splitlines()))

    _differential_text(make, CALLS, capfd, min_graph_calls=0)


def test_a_list_that_holds_itself_is_printed_from_a_graph_call(capfd):
    def make():
        v = tf.Variable(1.0)
        loop = [1]
        loop.append(loop)

        def step(x):
            print("A", loop)
            v.assign_add(x + 1.0)
            return v * 2.0

        return step, lambda: v

    jitted = _differential_text(make, CALLS, capfd, min_graph_calls=3)
    assert "internal error" not in janus.explain(jitted)


class Stepper(tf.Module):
    def __init__(self):
        super().__init__()
        self.v = tf.Variable(1.0)
        self.step = 0
        self.rate = 0.5
        self.history = []


_RUN_TIME_NUMBERS = ["int", "float", "bool", "str_of_int", "nested_int"]


@pytest.mark.parametrize("number", _RUN_TIME_NUMBERS)
def test_a_graph_tf_print_of_a_dict_holding_a_python_number_the_call_changes(number, capfd):
    """A variable keeps the tf.print a graph op; the dict's number is known only at run time. It
    printed janus's stand-in for it (``PyNumber(tensor=...)``); a float or bool tensor prints
    otherwise than Python's number does."""

    def make():
        m = Stepper()

        def step(x):
            if number == "int":
                tf.print("A", m.v, {"step": m.step})
            elif number == "float":
                tf.print("A", m.v, {"rate": m.rate / 3})
            elif number == "bool":
                tf.print("A", m.v, {"late": m.step > 2})
            elif number == "str_of_int":
                tf.print("A", m.v, {"step": str(m.step)})
            else:
                tf.print("A", m.v, {"k": [m.step]})
            m.step += 1
            m.rate += 0.25
            m.v.assign_add(x)
            return m.v + 0.0

        return step, lambda: (m.v, m.step, m.rate)

    _differential_text(make, CALLS, capfd, min_graph_calls=3 if number in ("int", "nested_int") else 0)


def test_a_namespace_attribute_reassigned_between_calls_is_printed_as_it_is_then(capfd):
    """A ``SimpleNamespace``'s attribute read in the function was not guarded: the object it held at
    the build was printed on every graph call."""

    def make():
        config = types.SimpleNamespace(shown=Holder(0))
        v = tf.Variable(1.0)

        def step(x):
            print("A", config.shown)
            v.assign_add(x)
            return v + 0.0

        calls = []

        def state():
            calls.append(1)
            if len(calls) == 5:
                config.shown = Holder(1)  # the caller swaps it between calls
            return v

        return step, state

    _differential_text(make, CALLS, capfd, min_graph_calls=3)


class Shower:
    def __init__(self):
        self.v = tf.Variable(1.0)

    def __repr__(self):
        return f"Shower({float(self.v.numpy())})"

    def callback(self):
        return None


def test_a_bound_method_s_text_shows_its_object(capfd):
    def make():
        s = Shower()

        def step(x):
            print("A", s.callback)
            s.v.assign_add(x)
            return s.v + 0.0

        return step, lambda: s.v

    _differential_text(make, CALLS, capfd, min_graph_calls=0)


def test_a_list_appended_to_a_tf_module_list_attribute_is_wrapped_as_in_eager(capfd):
    """TF wraps a list appended to a ``ListWrapper`` in a ``ListWrapper``: printed, it said so in
    eager, and showed as a plain list from janus's local copy."""

    def make():
        m = Stepper()

        def step(x):
            m.history.append([m.step])
            print("A", m.history[-1])
            m.step += 1
            m.v.assign_add(x)
            return m.v + 0.0

        return step, lambda: (m.v, m.step, len(m.history))

    _differential_text(make, CALLS, capfd, min_graph_calls=0)


@pytest.mark.parametrize("mode", ["rb+", "r"])
def test_a_print_to_a_file_it_cannot_write_text_to(mode, tmp_path, capfd):
    """Eager's print raises (binary file, read-only file) before the update below it."""

    opened = []

    def make():
        path = tmp_path / f"log{len(opened)}.txt"
        path.write_text("")
        log = open(path, mode)  # noqa: SIM115 - the file outlives the call, as a log file does
        opened.append(log)
        v = tf.Variable(1.0)

        def step(x):
            print("A", x, file=log)
            v.assign_add(x + 1.0)
            return v * 2.0

        return step, lambda: v

    try:
        _differential_text(make, CALLS, capfd, min_graph_calls=0)
    finally:
        for log in opened:
            log.close()
