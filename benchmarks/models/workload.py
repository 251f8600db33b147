"""The contract every Table-3 model module in ``benchmarks/models/`` follows.

A model module defines:

``NAME``            the summary.json name (``"resnet50"``, ...).
``UNIT``            throughput unit (``"images/s"``, ``"words/s"``, ``"trees/s"``, ``"episodes/s"``, ...).
``SCALING``         one sentence: the paper's setting and what this benchmark uses instead (2 CPU cores).
``DYNAMIC``         the dynamic features the paper's Table 2 lists for the model that the program uses.
``items_per_step(quick: bool) -> float``
``build(quick: bool, seed: int) -> program``
    A fresh program state (model, optimizer, data, environment ...), deterministic in ``seed``.
``imperative(program, wrap) -> step``
    The program as TF2 users write it. ``wrap`` is applied to exactly the functions a user would
    decorate (train step, loss, act ...): ``lambda f: f`` for eager, ``janus.jit`` for janus,
    ``tf.function`` for the naive-tf.function check. ``step()`` runs one training step on the next
    batch (data cycling inside) and returns what identifies the result (loss, or a tuple).
``symbolic(program) -> step``
    The hand-written symbolic baseline: the best ``tf.function`` a TF expert would write,
    with state passed explicitly and ``tf.while_loop`` where needed. Same ``step()`` contract.
``weights(program) -> list``
    Every piece of state the steps update (tf.Variables, Python numbers ...), for agreement checks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

Step = Callable[[], Any]
Wrap = Callable[[Callable], Callable]


class ModelModule(Protocol):
    NAME: str
    UNIT: str
    SCALING: str
    DYNAMIC: str

    def items_per_step(self, quick: bool) -> float: ...
    def build(self, quick: bool, seed: int = 0) -> Any: ...
    def imperative(self, program: Any, wrap: Wrap) -> Step: ...
    def symbolic(self, program: Any) -> Step: ...
    def weights(self, program: Any) -> list: ...
