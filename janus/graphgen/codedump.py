"""The residual program: the straight-line code a graph was generated from, for dumps.

While the interpreter converts a function it records every operation it emitted on
symbolic values and every assertion it planted. ``render`` prints that as Python
(``ast.unparse``), which is what ``config.dump_dir`` and ``janus.explain`` show.
"""

from __future__ import annotations

import ast
import types

from janus.graphgen.values import is_symbolic
from janus.source.library import is_library_object


class CodeRecorder:
    def __init__(self, name: str, params: list[str]) -> None:
        self.name = name
        self.params = params
        self.body: list[ast.stmt] = []
        self._names: dict[int, str] = {}
        self._keep: list[object] = []  # keeps recorded values alive so ids stay unique
        self.muted = 0  # > 0 while a throwaway trace runs

    def bind(self, value: object, name: str) -> None:
        self._names[id(value)] = name
        self._keep.append(value)

    def _expr(self, value: object) -> ast.expr:
        name = self._names.get(id(value))
        if name is not None:
            return ast.Name(name, ast.Load())
        if isinstance(value, (list, tuple)) and len(value) <= 16:
            elts = [self._expr(v) for v in value]
            return ast.List(elts, ast.Load()) if isinstance(value, list) else ast.Tuple(elts, ast.Load())
        if value is None or isinstance(value, (bool, int, float, str)):
            return ast.Constant(value)
        return ast.Name(f"<{_label(value)}>", ast.Load())

    def _result(self, result: object) -> ast.expr:
        if is_symbolic(result):
            name = f"t{len(self._names)}"
            self.bind(result, name)
            return ast.Name(name, ast.Store())
        if isinstance(result, (list, tuple)) and any(is_symbolic(r) for r in result):
            return ast.Tuple([self._result(r) for r in result], ast.Store())
        return ast.Name("_", ast.Store())

    def call(self, label: str, args: tuple, kwargs: dict, result: object) -> None:
        if self.muted:
            return
        call = ast.Call(
            ast.Name(label, ast.Load()),
            [self._expr(a) for a in args],
            [ast.keyword(k, self._expr(v)) for k, v in kwargs.items()],
        )
        self.body.append(ast.Assign([self._result(result)], call, lineno=0))

    def returns(self, outputs: list) -> None:
        self.body.append(ast.Return(ast.List([self._expr(o) for o in outputs], ast.Load())))

    def render(self) -> str:
        args = ast.arguments(
            posonlyargs=[], args=[ast.arg(p) for p in self.params], kwonlyargs=[], kw_defaults=[], defaults=[]
        )
        fn = ast.FunctionDef(name=self.name, args=args, body=self.body or [ast.Pass()], decorator_list=[])
        return ast.unparse(ast.fix_missing_locations(ast.Module([fn], [])))


def _label(value: object) -> str:
    """A short name for a value in the dump, read without running user code: a user object's
    ``__getattr__`` or property would run while generating (``getattr(node, "name")``)."""
    if isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
        return value.__qualname__
    if is_library_object(value):
        return getattr(value, "name", None) or type(value).__name__
    return type(value).__name__
