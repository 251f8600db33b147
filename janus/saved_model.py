"""``janus.export``: the graph janus serves for a function, written as a SavedModel that TensorFlow
loads and serves without janus; and a warning where ``tf.saved_model.save`` leaves a jitted method out.

The export rebuilds the graph of the cache entry that serves the example arguments, from that
entry's specs, with each in-graph assumption (``JanusAssert``) as TensorFlow's own ``Assert``: where
janus would re-run a call eagerly, the served graph raises ``InvalidArgumentError`` naming the
assumption. The tensor arguments' guarded specs become the input signature (a small integer tensor
janus specialised on its value is generalised to its shape, unless the graph needs the value). Every
other input the graph reads (Python values, tensors and numbers on ``self``) is baked in with its
value at export time; the variables it reads or updates are saved with it. A graph that janus cannot
hand over whole is refused with ``ExportError`` saying why: Python writes or calls janus replays after
the graph, objects read through janus's C++ heap ops, recursive calls (``JanusInvoke``), a
``tf.data.Dataset`` input, a resource that is no variable, or a result that is no tensor.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import os
import re
import sys
import warnings
from collections.abc import Iterator, Sequence

import tensorflow as tf
from tensorflow.python.eager import context
from tensorflow.python.saved_model import save as tf_save

from janus.assumptions.specs import ArgSpec, DatasetArg, SeqArg, TensorArg
from janus.config import config
from janus.diagnostics import logs
from janus.driver import BoundJit, JitFunction, PartialJit, resolve
from janus.executor.runner import _call_options
from janus.graphgen import row_saves
from janus.graphgen.errors import GenerationError, NotConvertible
from janus.graphgen.generate import GeneratedGraph, generate
from janus.graphgen.keras_layers import is_keras_layer
from janus.ops.assert_op import portable_asserts

log_builds = logs.logger("builds")
SIGNATURE_KEY = "serving_default"
_JANUS_DIR = os.path.dirname(os.path.abspath(__file__))
_TF_DIR = os.path.dirname(os.path.abspath(tf.__file__))


class ExportError(Exception):
    """``janus.export`` cannot write this function's graph as a SavedModel; the message says why."""


class JitNotSavedWarning(UserWarning):
    """``tf.saved_model.save`` wrote an object whose ``@janus.jit`` method the SavedModel does not hold."""


class ExportedGraph(tf.Module):
    """What ``janus.export`` saves (besides the ``serving_default`` signature): ``serve``, which takes
    the tensor arguments nested as the function takes them, and the variables the graph uses, which
    are ``fn``'s own objects' variables until the SavedModel is loaded elsewhere."""

    def __init__(self, name: str, serve: tf.types.experimental.PolymorphicFunction, variables: list) -> None:
        super().__init__(name=name)
        self.janus_variables = variables
        self.serve = serve


def export(
    fn: object,
    *example_args: object,
    path: str | os.PathLike,
    input_signature: Sequence | None = None,
    speculate: bool = True,
) -> ExportedGraph:
    """Writes the graph janus serves for ``fn(*example_args)`` to ``path`` as a SavedModel.

    ``fn`` is a ``@janus.jit`` function, a jitted method bound to its instance (``model.step``), a
    ``janus.jit(functools.partial(...))``, or a plain function or method (jitted here). If no graph of
    ``fn`` serves ``example_args`` yet, ``fn`` is called with them (as a jitted call would be: the
    first calls run eagerly, with their effects) until one does; warm a stateful function up on real
    calls first. ``tf.saved_model.load(path)`` then serves it without janus: ``loaded.serve(*tensors)``
    takes the tensor arguments in order (nested as ``fn`` takes them) and returns ``fn``'s result, and
    ``loaded.signatures["serving_default"]`` takes them by parameter name (items of a tuple, list or
    dict argument as ``name_0``, ``name_key``) and returns a dict: a dict result's own keys, else
    ``output_0``, ``output_1``, ... in ``tf.nest.flatten`` order.

    The inputs are ``tf.TensorSpec``s with the dtypes and shapes janus guarded on (``None`` where it
    relaxed a dimension); ``input_signature`` (one entry per example argument: a ``tf.TensorSpec``, a
    structure of them for a tuple/list/dict argument, or None for janus's own) asks for other shapes.
    Arguments that are no tensors (Python numbers, flags, ``self``) and values the graph reads from
    Python state (attributes, globals) are baked in with their values at export time. Variables the
    graph reads or updates are saved with it; updates (an optimizer step) apply to the loaded copies.
    Where janus would re-run a call eagerly (a speculated branch or trip count that this input
    breaks), the loaded function raises ``tf.errors.InvalidArgumentError`` naming the assumption.
    ``speculate=False`` builds the exported graph without such speculation instead: a tensor ``if``
    as ``tf.cond``, a loop as ``tf.while_loop`` (``janus.config.speculate_branches`` and
    ``unroll_loops`` off for this build), so it serves inputs that take other paths too.

    Raises ``ExportError`` where the graph needs janus at run time or holds what a SavedModel cannot:
    writes to Python objects, deferred calls (``print``, logging), objects read through janus's heap
    ops, recursive functions, ``tf.data`` inputs, non-tensor results. Returns the module it saved
    (``serve``, ``janus_variables``): in this process its variables are ``fn``'s objects' own, so a
    state update that ``serve`` makes here updates them.
    """
    if not tf.executing_eagerly():
        raise ExportError("janus.export runs eagerly, not while TensorFlow traces a function")
    if config.disabled:
        raise ExportError("janus is disabled (JANUS_DISABLE or janus.config.disabled): it serves no graph to export")
    if is_keras_layer(fn):  # its __call__ is Keras's own code, which janus never converts
        raise ExportError(
            f"janus.export takes a function, not the Keras {type(fn).__name__} object: export a function that "
            "calls it (def predict(x): return model(x, training=False); janus.export(predict, x, path=...))"
        )
    jitted = fn if isinstance(fn, (JitFunction, BoundJit, PartialJit)) else _jit(fn)
    jf = resolve(jitted)
    args, kwargs, offset = _call_arguments(jitted, example_args)
    bound = jf._bind(args, kwargs)
    if bound is None:
        raise ExportError(f"the example arguments do not match the parameters of {jf.fn.__qualname__}{jf.signature}")
    served = _served_graph(jitted, jf, bound, example_args)
    general = _export_specs(served.specs, input_signature, jf.params, offset, keep_values=False)
    specific = _export_specs(served.specs, input_signature, jf.params, offset, keep_values=True)
    graph = _rebuild(jf, general, specific, speculate)
    _check_exportable(graph, jf.fn.__qualname__, bound)
    module, signature = _module(graph, jf, bound)
    tf.saved_model.save(module, os.fspath(path), signatures={SIGNATURE_KEY: signature.get_concrete_function()})
    return module


def _jit(fn: object) -> object:
    from janus import jit  # janus/__init__ imports this module

    return jit(fn)


def _call_arguments(jitted: object, example_args: tuple) -> tuple[tuple, dict, int]:
    """``(args, kwargs, offset)`` of the underlying function's call: the bound instance and a partial's
    arguments come first; the example arguments fill the parameters from ``offset`` on."""
    if isinstance(jitted, BoundJit):
        return (jitted.instance, *example_args), {}, 1
    if isinstance(jitted, PartialJit):
        args, kwargs, offset = _call_arguments(jitted.jit_function, (*jitted.args, *example_args))
        return args, {**jitted.keywords, **kwargs}, offset + len(jitted.args)
    return tuple(example_args), {}, 0


def _served_graph(jitted: object, jf: JitFunction, bound: tuple, example_args: tuple) -> GeneratedGraph:
    """The graph that serves ``bound``, calling ``jitted`` on the example arguments until one does."""
    calls = (jf.profile_calls if jf.profile_calls is not None else config.profile_calls) + 2
    for _ in range(calls):
        runner, _ = jf.cache.lookup(bound)
        if runner is not None:
            return runner.graph
        if jf.imperative_reason is not None:
            break
        jitted(*example_args)
    runner, _ = jf.cache.lookup(bound)
    if runner is not None:
        return runner.graph
    name = jf.fn.__qualname__
    if jf.imperative_reason is not None:
        raise ExportError(
            f"janus runs {name} without a whole graph, so it has no graph to export: {jf.imperative_reason}"
        )
    raise ExportError(f"no graph of {name} serves these arguments after {calls} calls: janus.explain(fn) says why")


# ------------------------------------------------------------------ the specs and the graph
def _export_specs(
    specs: list[ArgSpec], input_signature: Sequence | None, params: list[str], offset: int, keep_values: bool
) -> list[ArgSpec]:
    """The served ``specs`` with the shapes ``input_signature`` asks for; small tensors' speculated
    values dropped unless ``keep_values``."""
    given = list(input_signature) if input_signature is not None else []
    if len(given) > len(params) - offset:
        raise ExportError(f"input_signature has {len(given)} entries for {len(params) - offset} parameters")
    wanted = [given[i - offset] if 0 <= i - offset < len(given) else None for i in range(len(params))]
    return [_export_spec(s, want, f"argument {name}", keep_values) for s, want, name in zip(specs, wanted, params)]


def _export_spec(spec: ArgSpec, wanted: object, what: str, keep_values: bool) -> ArgSpec:
    """``spec`` for the export: ``wanted``'s shape taken, or a tensor's speculated value dropped
    (unless ``keep_values``)."""
    if isinstance(spec, TensorArg):
        if wanted is None:
            return spec if keep_values else TensorArg(spec.dtype, spec.shape)
        if not isinstance(wanted, tf.TensorSpec):
            raise ExportError(f"input_signature for {what}: expected a tf.TensorSpec, got {wanted!r}")
        if wanted.dtype != spec.dtype:
            raise ExportError(f"input_signature for {what}: dtype {wanted.dtype.name}, but it is {spec.dtype.name}")
        return TensorArg(spec.dtype, None if wanted.shape.rank is None else tuple(wanted.shape.as_list()))
    if isinstance(spec, SeqArg):
        items = []
        for label, item in zip(_labels(spec), spec.items):
            try:
                want = None if wanted is None else wanted[label]
            except (KeyError, IndexError, TypeError):
                raise ExportError(f"input_signature for {what} has no entry {label!r}") from None
            items.append(_export_spec(item, want, f"{what}[{label!r}]", keep_values))
        return SeqArg(spec.type, tuple(items), spec.keys)
    if wanted is not None:
        raise ExportError(f"input_signature gives {wanted!r} for {what}, which is no tensor: its value is baked in")
    return spec


def _rebuild(jf: JitFunction, general: list[ArgSpec], specific: list[ArgSpec], speculate: bool) -> GeneratedGraph:
    """The graph for the ``general`` specs, with portable asserts and no rows saved for a re-run; for
    the ``specific`` ones (with the tensor values janus speculated on) where the code needs such a value."""
    attempts = [general] if _same_specs(general, specific) else [general, specific]
    with jf._lock, portable_asserts(), row_saves.none_saved(), _speculation(speculate):
        for n, attempt in enumerate(attempts):
            try:
                return generate(jf.fn, jf.params, attempt, jf.profile, jf.failures.__getitem__)
            except (NotConvertible, GenerationError) as err:
                if n + 1 == len(attempts):
                    raise ExportError(f"janus cannot build the graph of {jf.fn.__qualname__} to export: {err}") from err
                log_builds.info("%s: exported with the tensor values janus speculated on: %s", jf.fn.__qualname__, err)
    raise AssertionError("unreachable")  # pragma: no cover


@contextlib.contextmanager
def _speculation(on: bool) -> Iterator[None]:
    """``janus.config.speculate_branches`` and ``unroll_loops`` as ``on`` says, for one build."""
    saved = config.speculate_branches, config.unroll_loops
    if not on:
        config.speculate_branches = config.unroll_loops = False
    try:
        yield
    finally:
        config.speculate_branches, config.unroll_loops = saved


def _same_specs(a: list[ArgSpec], b: list[ArgSpec]) -> bool:
    return all(_spec_key(x) == _spec_key(y) for x, y in zip(a, b))


def _spec_key(spec: ArgSpec) -> object:
    if isinstance(spec, TensorArg):
        return (spec.dtype, spec.shape, None if spec.value is None else spec.value.tobytes())
    if isinstance(spec, SeqArg):
        return tuple(_spec_key(s) for s in spec.items)
    return id(spec)


def _labels(spec: SeqArg) -> list:
    return list(spec.keys) if spec.keys is not None else list(range(len(spec.items)))


# ------------------------------------------------------------------ what a SavedModel cannot hold
def _check_exportable(graph: GeneratedGraph, name: str, bound: tuple) -> None:
    problems = []
    if graph.python_effects:
        problems.append(
            "it writes Python state or makes calls that janus makes after the graph ran ("
            + "; ".join(graph.python_effects)
            + ")"
        )
    if graph.store_factory is not None:
        problems.append("it reads or writes Python objects known only at run time, through janus's heap ops")
    if graph.recursive:
        problems.append("it calls recursive functions, through janus's JanusInvoke op")
    if graph.counts_touches:
        problems.append("which of its gradients are None depends on counters janus keeps in Python")
    if any(_takes_dataset(spec) for spec in graph.specs):
        problems.append("it takes a tf.data.Dataset argument")
    if graph.caught_tries:  # janus re-runs such a call eagerly; a SavedModel could only raise
        problems.append(f"its graph speculates that a `try` body does not raise ({', '.join(graph.caught_tries)})")
    if graph.updated_before_assumptions:  # janus puts them back and re-runs; a SavedModel would keep them
        problems.append(
            "an assumption of its graph is checked after it updated variables ("
            + ", ".join(graph.updated_before_assumptions)
            + "): a call that breaks it would raise with those updates applied (speculate=False may build it "
            "without that assumption)"
        )
    custom = sorted(_janus_ops(graph.concrete))
    if custom and not problems:
        problems.append(f"its graph holds janus's own ops ({', '.join(custom)})")
    problems.extend(_result_problems(graph.result_template, bound))
    if problems:
        raise ExportError(
            f"janus cannot export {name}: " + "; ".join(problems) + ". A SavedModel holds TensorFlow ops, variables "
            "and tensors only, so the exported graph would drop them: export a function without them (a model's "
            "forward pass, say)"
        )


def _takes_dataset(spec: ArgSpec) -> bool:
    return isinstance(spec, DatasetArg) or isinstance(spec, SeqArg) and any(_takes_dataset(s) for s in spec.items)


def _janus_ops(concrete: object) -> set[str]:
    """Op types of janus's library in the graph and the functions it calls (only JanusAssert's portable
    form, TensorFlow's Assert, is expected after the checks above)."""
    graph_def = concrete.graph.as_graph_def()
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    return {n.op for n in nodes if n.op.startswith("Janus")}


def _result_problems(template: tuple, bound: tuple) -> list[str]:
    kind, body = template
    if kind in ("out", "number") or kind == "const" and body is None:
        return []
    if kind == "source":
        value = body(*bound)
        return [] if isinstance(value, tf.Tensor) else [f"it returns a {type(value).__name__} read from its inputs"]
    if kind in ("list", "tuple", "dict"):
        items = body[1] if kind != "dict" else [t for _, t in body[1]]
        return [p for t in items for p in _result_problems(t, bound)]
    if kind == "namedtuple":
        return [p for t in body[1][1] for p in _result_problems(t, bound)]
    what = {
        "const": lambda: f"the Python value {body!r}",
        "copy": lambda: "a NumPy array",
        "late": lambda: "a module attribute read when the call ends",
        "formatted": lambda: "a formatted string",
        "indexed_slices": lambda: "tf.IndexedSlices",
    }.get(kind, lambda: f"a {kind}")()
    return [f"it returns {what}, which is no tensor"]


# ------------------------------------------------------------------ the saved module
def _module(graph: GeneratedGraph, jf: JitFunction, bound: tuple) -> tuple[ExportedGraph, object]:
    """The module to save and the flat function of its signature (kept off the module: a SavedModel
    would hold it as a second callable attribute)."""
    flat = graph.prepare(*bound)
    if flat is None:
        broken = "; ".join(g.description for g in graph.guards.failing(list(bound)))
        raise ExportError(f"the example arguments do not fit the exported graph (input_signature?): {broken}")
    captures, variables = _captures(graph, flat[graph.num_inputs :])
    inputs = [i for i, spec in enumerate(graph.specs) if _tensor_leaves(spec)]
    for i in inputs:
        if not _only_tensors(graph.specs[i]):
            raise ExportError(
                f"argument {jf.params[i]} mixes tensors and Python values: pass its tensors as arguments of their own"
            )
    options = _call_options(context.context().function_call_options, recursive=False)
    names = [jf.params[i] for i in inputs]

    def run(tensor_args: Sequence) -> object:
        args, leaves = list(bound), []
        for i, value in zip(inputs, tensor_args):
            args[i] = _substitute(graph.specs[i], value, leaves)
        outputs = _call(graph.concrete, leaves, captures, options)
        return _result(graph.result_template, outputs, tuple(args))

    # a *args parameter's tensors are serve's positional arguments, as the function takes them
    starred = [i for i in inputs if jf.signature.parameters[jf.params[i]].kind == inspect.Parameter.VAR_POSITIONAL]

    def serve(*tensor_args: object) -> object:
        given = iter(tensor_args)
        return run([tuple(itertools.islice(given, len(graph.specs[i].items))) if i in starred else next(given)
                    for i in inputs])  # fmt: skip

    def signature(*flat_inputs: tf.Tensor) -> dict[str, tf.Tensor]:
        leaves = iter(flat_inputs)
        return _named_outputs(run([_unflatten(graph.specs[i], leaves) for i in inputs]))

    serve.__name__ = signature.__name__ = re.sub(r"\W", "_", jf.fn.__name__)
    nested = [_nested_specs(graph.specs[i], name) for i, name in zip(inputs, names)]
    nested = [s for i, spec in zip(inputs, nested) for s in (spec if i in starred else [spec])]
    flat_specs = [s for i, name in zip(inputs, names) for s in _flat_specs(graph.specs[i], name)]
    module = ExportedGraph(
        re.sub(r"\W", "_", jf.fn.__qualname__), tf.function(serve, input_signature=nested, autograph=False), variables
    )
    return module, tf.function(signature, input_signature=flat_specs, autograph=False)


def _captures(graph: GeneratedGraph, values: list) -> tuple[list, list]:
    """The values the graph's captured inputs take (fixed from now on), and the variables among them."""
    by_handle = {id(v.handle): v for v in graph.concrete.variables}
    variables: dict[int, tf.Variable] = {}
    for value in values:
        dtype = getattr(value, "dtype", None)
        if dtype == tf.resource:
            variable = by_handle.get(id(value))
            if variable is None:
                raise ExportError(
                    "janus cannot export a graph that uses a TensorFlow resource that is no tf.Variable "
                    "(a lookup table, an iterator): only variables are saved with it"
                )
            variables[id(variable)] = variable
        elif dtype == tf.variant:
            raise ExportError("janus cannot export a graph that reads a tf.data.Dataset from Python state")
    return list(values), list(variables.values())


def _call(concrete: object, leaves: list, captures: list, options: object) -> list:
    """Calls janus's function with the rewrites janus's runner turns off (their call carries them)."""
    ctx = context.context()
    previous, ctx.function_call_options = ctx.function_call_options, options
    try:
        return concrete._call_flat(leaves, captures)
    finally:
        ctx.function_call_options = previous


def _tensor_leaves(spec: ArgSpec) -> bool:
    return isinstance(spec, TensorArg) or isinstance(spec, SeqArg) and any(_tensor_leaves(s) for s in spec.items)


def _only_tensors(spec: ArgSpec) -> bool:
    return isinstance(spec, TensorArg) or isinstance(spec, SeqArg) and all(_only_tensors(s) for s in spec.items)


def _container(spec: SeqArg, items: list) -> object:
    if spec.type is dict:
        return dict(zip(spec.keys, items))
    if spec.type in (tuple, list):
        return spec.type(items)
    return spec.type(*items)  # a namedtuple


def _substitute(spec: ArgSpec, value: object, leaves: list) -> object:
    """``value`` (an argument of ``serve``) as janus's argument, its tensors appended to ``leaves`` in
    the order of the graph's inputs (a dict's items in janus's key order, not ``tf.nest``'s)."""
    if isinstance(spec, TensorArg):
        leaves.append(value)
        return value
    return _container(spec, [_substitute(s, value[label], leaves) for label, s in zip(_labels(spec), spec.items)])


def _unflatten(spec: ArgSpec, leaves: Iterator) -> object:
    if isinstance(spec, TensorArg):
        return next(leaves)
    return _container(spec, [_unflatten(s, leaves) for s in spec.items])


def _nested_specs(spec: ArgSpec, name: str) -> object:
    if isinstance(spec, TensorArg):
        return tf.TensorSpec(spec.shape, spec.dtype, name=_input_name(name))
    labels = _labels(spec)
    return _container(spec, [_nested_specs(s, f"{name}_{label}") for label, s in zip(labels, spec.items)])


def _flat_specs(spec: ArgSpec, name: str) -> list[tf.TensorSpec]:
    if isinstance(spec, TensorArg):
        return [tf.TensorSpec(spec.shape, spec.dtype, name=_input_name(name))]
    return [s for label, item in zip(_labels(spec), spec.items) for s in _flat_specs(item, f"{name}_{label}")]


def _input_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", name).lstrip("_.-") or "input"


def _result(template: tuple, outputs: list, args: tuple) -> object:
    """The function's result from the graph's outputs (``_check_exportable`` allowed its kinds)."""
    kind, body = template
    if kind == "out":
        return outputs[body]
    if kind == "number":
        return outputs[body[0]]
    if kind == "source":
        return body(*args)
    if kind == "const":
        return None
    if kind == "dict":
        return {k: _result(t, outputs, args) for k, t in body[1]}
    if kind == "namedtuple":
        cls, fields = body[1]
        return cls(*(_result(t, outputs, args) for t in fields))
    items = [_result(t, outputs, args) for t in body[1]]
    return items if kind == "list" else tuple(items)


def _named_outputs(result: object) -> dict[str, tf.Tensor]:
    """The signature's outputs: a dict result's own keys, else ``output_0``... in ``tf.nest`` order."""
    if isinstance(result, dict) and all(isinstance(k, str) and isinstance(v, tf.Tensor) for k, v in result.items()):
        return dict(result)
    leaves = [leaf for leaf in tf.nest.flatten(result) if leaf is not None]
    return {f"output_{i}": leaf for i, leaf in enumerate(leaves)}


# ------------------------------------------------------------------ tf.saved_model.save of a jitted method
def jitted_attributes(obj: object) -> list[str]:
    """Names of ``obj``'s ``@janus.jit`` methods and jitted attributes, which a SavedModel leaves out.

    A Keras layer's jitted ``call`` is not among them: Keras traces ``call`` for its own signatures,
    and a jitted function called while TensorFlow traces runs as plain Python inside that trace.
    """
    names = set()
    for cls in type(obj).__mro__:
        for name, value in vars(cls).items():
            if isinstance(value, JitFunction) and not (name == "call" and is_keras_layer(obj)):
                names.add(name)
    for name, value in getattr(obj, "__dict__", {}).items():
        if isinstance(value, (JitFunction, BoundJit, PartialJit)):
            names.add(name)
    return sorted(names)


def _warn_left_out(nodes: Sequence) -> None:
    for node in nodes:
        for name in jitted_attributes(node):
            warnings.warn(
                f"tf.saved_model.save: {type(node).__qualname__}.{name} is a @janus.jit function, and a SavedModel "
                "holds tf.function attributes only: it is left out of the SavedModel. To save the graph janus "
                f"serves for it, use janus.export(obj.{name}, *example_args, path=...)",
                JitNotSavedWarning,
                stacklevel=_caller_level(),
            )


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside TensorFlow and janus: the user's save call."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith((_JANUS_DIR, _TF_DIR)):
        frame, level = frame.f_back, level + 1
    return level


def install_save_hook() -> None:
    """Makes ``tf.saved_model.save`` warn about the jitted methods it leaves out (once per process).

    It wraps ``_build_meta_graph``, which ``tf.saved_model.save`` (and Keras 2's saving) call: once
    TensorFlow gathered the objects it saves, each jitted method among theirs is warned about.
    """
    original = tf_save._build_meta_graph
    if getattr(original, "janus_save_hook", False):
        return

    @functools.wraps(original)
    def build_meta_graph(obj: object, *args: object, **kwargs: object) -> object:
        built = original(obj, *args, **kwargs)
        saved_nodes = built[4] if isinstance(built, tuple) and len(built) > 4 else [obj]
        _warn_left_out(saved_nodes)
        return built

    build_meta_graph.janus_save_hook = True
    tf_save._build_meta_graph = build_meta_graph
