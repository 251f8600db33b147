"""Data-parallel training on Horovod: janus averages gradients across workers by itself.

When ``horovod.tensorflow`` is initialised with more than one worker, every gradient a plain
``tf.GradientTape`` computes inside janus-run code is averaged with an allreduce:

* in generated graphs, right after ``tape.gradient`` (so communication overlaps the rest of
  the step), with every ``JanusAssert`` ordered before the first collective;
* in janus's eager calls (profiling and fallbacks), by the same allreduce on the same tensor
  names, so a rank that falls back still meets the collectives the other ranks' graphs issue.

A tape that is already an ``hvd.DistributedGradientTape`` is left alone: nothing is reduced
twice. After a function's first call, the variables it differentiated are broadcast from
rank 0 before its first step (the variables of the models and layers it names; those created
during that step are broadcast after it), so every rank trains the same weights.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import tensorflow as tf

_original_gradient = tf.GradientTape.gradient


def horovod():
    """The ``horovod.tensorflow`` module when it runs more than one worker, else None."""
    hvd = sys.modules.get("horovod.tensorflow")
    try:
        return hvd if hvd is not None and hvd.is_initialized() and hvd.size() > 1 else None
    except Exception:  # noqa: BLE001 - an uninitialised Horovod raises ValueError
        return None


def is_plain_tape_gradient(callee: object) -> bool:
    owner = getattr(callee, "__self__", None)
    return getattr(callee, "__func__", None) is _original_gradient and type(owner) is tf.GradientTape


def average(grads: object, hvd) -> object:
    """Averages a structure of gradients across workers (None entries stay None).

    Collectives are matched by name, so the allreduces are always graph ops named
    ``janus_grad_<i>`` with the name scope ignored: a generated graph and an eager fallback
    (which runs ``_eager_average``, a tf.function) then meet under the same names.
    """
    flat = tf.nest.flatten(grads)
    reduced = []
    for i, g in enumerate(flat):
        if g is None:
            reduced.append(None)
            continue
        if isinstance(g, tf.IndexedSlices):
            g = tf.convert_to_tensor(g)
        reduced.append(hvd.allreduce(g, op=hvd.Average, name=f"janus_grad_{i}", ignore_name_scope=True))
    return tf.nest.pack_sequence_as(grads, reduced)


@tf.function(autograph=False)
def _eager_average(grads: list) -> list:
    return average(grads, horovod())


@contextlib.contextmanager
def eager_collectives(sources_seen: list) -> Iterator[None]:
    """During a janus eager call: plain tapes average their gradients, like the graphs do."""
    hvd = horovod()
    if hvd is None:
        yield
        return

    def gradient(self, target, sources, *args, **kwargs):
        grads = _original_gradient(self, target, sources, *args, **kwargs)
        if type(self) is not tf.GradientTape:
            return grads
        sources_seen.extend(v for v in tf.nest.flatten(sources) if hasattr(v, "assign"))
        flat = tf.nest.flatten(grads)
        return tf.nest.pack_sequence_as(grads, _eager_average(flat))

    tf.GradientTape.gradient = gradient
    try:
        yield
    finally:
        tf.GradientTape.gradient = _original_gradient


def reachable_variables(fn, args: tuple) -> list:
    """Variables of the models, layers, modules and variables ``fn`` names or is given."""
    code = fn.__code__
    values = [fn.__globals__.get(name) for name in code.co_names]
    values += [cell.cell_contents for cell in fn.__closure__ or () if _filled(cell)]
    values += list(args)
    found = []
    for value in values:
        if isinstance(value, tf.Variable) or type(value).__name__ == "Variable" and hasattr(value, "assign"):
            found.append(value)
        elif hasattr(value, "variables") and (isinstance(value, tf.Module) or hasattr(value, "trainable_variables")):
            try:
                found.extend(value.variables)
            except Exception:  # noqa: BLE001 - a property that fails: nothing to broadcast from it
                continue
    return found


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def broadcast_from_rank0(variables: list) -> None:
    hvd = horovod()
    if hvd is None:
        return
    seen = set()
    for i, v in enumerate(variables):
        if id(v) not in seen:
            seen.add(id(v))
            v.assign(hvd.broadcast(tf.convert_to_tensor(v), root_rank=0, name=f"janus_bcast_{i}"))  # all ranks eager
