"""The statement-level rewrite of a function around the statements janus cannot convert.

``plan(node, code, bad_lines)`` takes the function's AST (line numbers as in its file) and the
lines janus refused, and returns the rewritten function and its segment functions. Each maximal
run of statements that may go to a graph becomes ``(outs) = _janus_seg_k(ins)``:

* a statement holding a refused line stays Python; a compound one (``if``, ``for``, ``while``,
  ``with``, ``try``) stays Python itself and its bodies are split in turn;
* so does a statement that could not run in a function of its own: a ``return``, a ``break`` or
  ``continue`` that leaves it, ``global``/``nonlocal``/``del`` of a name, a write to a name a
  nested function captures, a ``def``/``lambda``/generator expression reading the function's
  locals (it would read the segment's copies), ``locals()``/``eval``/``super()``, and a read of
  a local that may be unbound there (``return expr`` is first split into ``_janus_return = expr``
  and ``return _janus_return``, so the expression can go to a graph);
* ins: the locals the run reads before it binds them, and the outs it may leave as they were (bound
  in one branch only), all bound before it; outs: the locals it binds that are read (or deleted)
  anywhere else in the function (or, in a loop, by the run itself at its next turn), all bound when
  it ends (a run that may leave one unbound stays Python).

A segment inside a ``try`` or ``with`` body (where an exception may be caught and the function go
on) restores, when it raises, the outs its eager run had bound before the raise, from the
segment's frame in the traceback: as eager's statements would have left them.
"""

from __future__ import annotations

import ast
import builtins
import collections
import copy
import dataclasses
import types

RETURN = "_janus_return"
SEGMENT = "_janus_seg_{}"  # the JitFunction a rewritten function calls
SEGMENT_DEF = "_janus_segment"  # the plain function it wraps: _janus_segment_k
LOCALS_AT = "_janus_locals_at"
FACTORY = "_janus_factory"
COMPOUND = (ast.If, ast.For, ast.While, ast.With, ast.Try) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
INTROSPECTIVE = {"locals", "vars", "dir", "eval", "exec", "super"}
FRAME_READERS = {"locals", "vars", "dir", "eval", "exec"}


@dataclasses.dataclass
class SegmentPlan:
    """One run of statements turned into a segment function."""

    index: int
    first_line: int
    last_line: int
    inputs: list[str]
    outputs: list[str]
    node: ast.FunctionDef  # def _janus_segment_k(inputs): <the statements>; return (outputs)
    guarded: bool  # inside a try/with body: restores its outs when it raises
    def_name: str  # _janus_segment_k, or for a segment split again _janus_segment_j_k

    @property
    def name(self) -> str:
        return SEGMENT.format(self.index)


@dataclasses.dataclass
class Plan:
    function: ast.FunctionDef  # the rewritten function (no decorators, defaults or annotations)
    segments: list[SegmentPlan]
    python_lines: list[int]  # statements kept in Python (other than trivial ones)
    owner: str = ""  # the class the original's `__x` names were mangled by ('' where none)

    def module(self, freevars: tuple[str, ...]) -> ast.Module:
        """``def _janus_factory(<freevars>, <segments>, _janus_locals_at)`` holding the rewritten
        function and the segment functions: compiled, their free variables are the original's.
        Inside a class named as the original's owner, ``self.__x`` is mangled as it was."""
        params = [*freevars, *(s.name for s in self.segments), LOCALS_AT]
        factory = ast.FunctionDef(
            name=FACTORY,
            args=ast.arguments(posonlyargs=[], args=[ast.arg(p) for p in params], vararg=None, kwonlyargs=[],
                               kw_defaults=[], kwarg=None, defaults=[]),
            body=[self.function, *(s.node for s in self.segments)],
            decorator_list=[],
            returns=None,
        )  # fmt: skip
        ast.copy_location(factory, self.function)
        module = ast.Module(body=[factory], type_ignores=[])
        if self.owner:
            module = ast.parse(f"class {self.owner}:\n    pass\n")
            module.body[0].body = [factory]
            ast.copy_location(module.body[0], self.function)
        return ast.fix_missing_locations(module)


def class_of(code: types.CodeType) -> str:
    """The class by which Python's compiler mangled the ``__x`` names of ``code`` ('' where none):
    the innermost class around it, as its qualified name says (``C.f.<locals>.g``: ``C``)."""
    parts = code.co_qualname.split(".")
    i = len(parts) - 2  # the function's own name is last
    while i >= 0 and parts[i] == "<locals>":
        i -= 2  # a function's locals: the function before "<locals>" is no class
    return parts[i] if i >= 0 else ""


def mangle(name: str, owner: str) -> str:
    """``name`` as the compiler writes it in class ``owner`` (``__x`` -> ``_C__x``)."""
    if not owner.strip("_") or not name.startswith("__") or name.endswith("__"):
        return name
    return f"_{owner.lstrip('_')}{name}"


def _demangled(names_: tuple[str, ...], owner: str) -> set[str]:
    """``names_`` (of a code object) as the source spells them: ``_C__x`` is also ``__x``."""
    stripped = owner.lstrip("_")
    prefix = f"_{stripped}__"
    return set(names_) | ({n[len(stripped) + 1 :] for n in names_ if n.startswith(prefix)} if stripped else set())


# ---------------------------------------------------------------------------------- names
class _Names(ast.NodeVisitor):
    """Names a piece of code reads and binds in the function's own scope; ``deferred``: names
    read by code that runs later (bodies of ``def``/``lambda``/class, generator expressions)."""

    def __init__(self) -> None:
        self.loads: collections.Counter[str] = collections.Counter()
        self.stores: set[str] = set()
        self.deferred: set[str] = set()
        self.shadow: frozenset[str] = frozenset()

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.shadow:
            return
        if isinstance(node.ctx, ast.Load):
            self.loads[node.id] += 1
        else:
            self.stores.add(node.id)
        if isinstance(node.ctx, ast.Del):  # `del x` needs x bound: a segment that binds x hands it out
            self.loads[node.id] += 1

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name):
            self.loads[node.target.id] += 1
        self.generic_visit(node)

    def _comprehension(self, node: ast.AST) -> None:
        targets = frozenset(n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name))
        self.visit(node.generators[0].iter)  # evaluated at once, in the enclosing scope
        rest = [g.target for g in node.generators] + [c for g in node.generators for c in g.ifs]
        rest += [g.iter for g in node.generators[1:]]
        rest += [getattr(node, f) for f in ("elt", "key", "value") if hasattr(node, f)]
        if isinstance(node, ast.GeneratorExp):  # runs later, when iterated
            self.deferred |= {n.id for r in rest for n in ast.walk(r) if isinstance(n, ast.Name)} - targets
            return
        saved, self.shadow = self.shadow, self.shadow | targets
        for part in rest:
            self.visit(part)
        self.shadow = saved

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def _arguments(self, args: ast.arguments) -> set[str]:
        for default in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
            self.visit(default)
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        for a in every:
            if a is not None and a.annotation is not None:
                self.visit(a.annotation)
        return {a.arg for a in every if a is not None}

    def _body_names(self, nodes: list[ast.AST], params: set[str]) -> None:
        self.deferred |= {n.id for b in nodes for n in ast.walk(b) if isinstance(n, ast.Name)} - params

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._body_names([node.body], self._arguments(node.args))

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for decorator in node.decorator_list:
            self.visit(decorator)
        params = self._arguments(node.args)
        if node.returns is not None:
            self.visit(node.returns)
        self.stores.add(node.name)
        self._body_names(node.body, params)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for part in [*node.decorator_list, *node.bases, *node.keywords]:
            self.visit(part)
        self.stores.add(node.name)
        self._body_names(node.body, set())

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.stores.add(alias.asname or alias.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            if alias.name != "*":
                self.stores.add(alias.asname or alias.name)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.stores.add(node.name)
        self.generic_visit(node)


def names(*nodes: ast.AST) -> _Names:
    visitor = _Names()
    for node in nodes:
        visitor.visit(node)
    return visitor


def _own_walk(node: ast.AST):
    """The nodes of ``node`` in the function's own scope (not inside nested scopes' bodies)."""
    yield node
    if isinstance(node, SCOPES) and not isinstance(node, ast.Lambda):
        return
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Lambda):
            continue
        yield from _own_walk(child)


def observes_frame(node: ast.FunctionDef) -> str | None:
    """The builtin by which ``node``'s own code reads its frame's locals (``locals()``, ``vars()``,
    ``dir()``, ``eval``, ``exec``), or None. Such a function is not split: its frame would hold
    the segments' names and miss what the segments bound but no statement names."""
    for stmt in node.body:
        for n in _own_walk(stmt):
            reader = n.func.id if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) else None
            if reader in FRAME_READERS and (reader in ("eval", "exec") or not (n.args or n.keywords)):
                return reader
    return None


def _escapes(node: ast.AST, loops: int = 0) -> str | None:
    """Why ``node`` cannot run inside a function of its own, or None."""
    if isinstance(node, ast.Return):
        return "return"
    if isinstance(node, (ast.Break, ast.Continue)) and not loops:
        return "break/continue"
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return "global/nonlocal"
    if isinstance(node, ast.Delete) and any(isinstance(t, ast.Name) for t in node.targets):
        return "del"
    if isinstance(node, (ast.Yield, ast.YieldFrom, ast.Await, ast.Match, ast.AsyncFor, ast.AsyncWith)):
        return type(node).__name__
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in INTROSPECTIVE:
        return f"{node.func.id}()"
    if isinstance(node, SCOPES):
        return None
    if isinstance(node, (ast.For, ast.While)):
        head = [node.target, node.iter] if isinstance(node, ast.For) else [node.test]
        parts = [(n, loops) for n in head] + [(n, loops + 1) for n in node.body] + [(n, loops) for n in node.orelse]
    else:
        parts = [(n, loops) for n in ast.iter_child_nodes(node)]
    for child, depth in parts:
        why = _escapes(child, depth)
        if why:
            return why
    return None


# ---------------------------------------------------------------------------------- definite binding
def flow(stmts: list[ast.stmt], bound: frozenset[str]) -> tuple[frozenset[str], set[str]]:
    """``(names surely bound after stmts, names they may read before binding them)``, given the
    names surely bound before."""
    exposed: set[str] = set()
    for stmt in stmts:
        bound = _flow_one(stmt, bound, exposed)
    return bound, exposed


def _reads(nodes: list[ast.AST], bound: frozenset[str], exposed: set[str]) -> None:
    visitor = names(*nodes)
    exposed.update(n for n in visitor.loads if n not in bound)
    exposed.update(n for n in visitor.deferred if n not in bound)


def _stored(nodes: list[ast.AST]) -> set[str]:
    return names(*nodes).stores


def _flow_one(stmt: ast.stmt, bound: frozenset[str], exposed: set[str]) -> frozenset[str]:
    if isinstance(stmt, ast.If):
        _reads([stmt.test], bound, exposed)
        then, e1 = flow(stmt.body, bound)
        other, e2 = flow(stmt.orelse, bound)
        exposed |= e1 | e2
        return then & other
    if isinstance(stmt, ast.For):
        _reads([stmt.iter], bound, exposed)
        _, e1 = flow(stmt.body, bound | _stored([stmt.target]))
        _, e2 = flow(stmt.orelse, bound)
        exposed |= e1 | e2
        return bound
    if isinstance(stmt, ast.While):
        _reads([stmt.test], bound, exposed)
        _, e1 = flow(stmt.body, bound)
        _, e2 = flow(stmt.orelse, bound)
        exposed |= e1 | e2
        return bound
    if isinstance(stmt, ast.With):
        for item in stmt.items:
            _reads([item.context_expr], bound, exposed)
            if item.optional_vars is not None:
                _reads([item.optional_vars], bound, exposed)  # subscripts and attributes read
                bound = bound | _stored([item.optional_vars])
        after, e1 = flow(stmt.body, bound)
        exposed |= e1
        return after
    if isinstance(stmt, COMPOUND):  # try
        after_body, e1 = flow(stmt.body, bound)
        exposed |= e1
        ends = []
        for handler in stmt.handlers:
            if handler.type is not None:
                _reads([handler.type], bound, exposed)
            out, e = flow(handler.body, bound | ({handler.name} if handler.name else set()))
            exposed |= e
            ends.append(out)
        out, e = flow(stmt.orelse, after_body)
        exposed |= e
        ends.append(out)
        joined = frozenset.intersection(*ends)
        after_final, e = flow(stmt.finalbody, bound)
        exposed |= e
        return joined | after_final
    visitor = names(stmt)
    exposed.update(n for n in visitor.loads if n not in bound)
    exposed.update(n for n in visitor.deferred if n not in bound)
    if isinstance(stmt, ast.Delete):
        return bound - visitor.stores
    if isinstance(stmt, ast.AnnAssign) and stmt.value is None:
        return bound
    return bound | visitor.stores


# ---------------------------------------------------------------------------------- the rewrite
def _worth_a_graph(nodes: list[ast.AST]) -> bool:
    """Whether code calls something other than a builtin (a TF op, a model, a method): a run of
    statements that does not (``steps += 1``, ``print(...)``, ``len(xs)``) stays Python, where
    it costs no graph call and no specialisation on the Python values it reads."""
    for node in nodes:
        for n in _own_walk(node):
            if isinstance(n, ast.Call) and not (isinstance(n.func, ast.Name) and hasattr(builtins, n.func.id)):
                return True
    return False


def _trivial(stmt: ast.stmt) -> bool:
    """Nothing a graph would speed up: ``pass``, a docstring, ``a = b``, ``n = 0``."""
    if isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
        return True
    if isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
        return isinstance(stmt.value, (ast.Name, ast.Constant))
    return False


def _split_returns(stmts: list[ast.stmt], bad: set[int]) -> list[ast.stmt]:
    """``return <expr>`` -> ``_janus_return = <expr>; return _janus_return`` (the expression may go
    to a segment), in every block of the function's own scope."""
    out: list[ast.stmt] = []
    for stmt in stmts:
        if (
            isinstance(stmt, ast.Return)
            and stmt.value is not None
            and _worth_a_graph([stmt.value])
            and not _holds(stmt, bad)
        ):
            assign = ast.copy_location(ast.Assign(targets=[ast.Name(RETURN, ast.Store())], value=stmt.value), stmt)
            ret = ast.copy_location(ast.Return(value=ast.Name(RETURN, ast.Load())), stmt)
            out += [assign, ret]
            continue
        if isinstance(stmt, COMPOUND):
            stmt = copy.copy(stmt)
            for field in ("body", "orelse", "finalbody"):
                if hasattr(stmt, field):
                    setattr(stmt, field, _split_returns(getattr(stmt, field), bad))
            if hasattr(stmt, "handlers"):
                stmt.handlers = [copy.copy(h) for h in stmt.handlers]
                for handler in stmt.handlers:
                    handler.body = _split_returns(handler.body, bad)
        out.append(stmt)
    return out


def _holds(stmt: ast.stmt, bad: set[int]) -> bool:
    first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])
    return any(first <= line <= stmt.end_lineno for line in bad)


class _Splitter:
    def __init__(self, node: ast.FunctionDef, code: types.CodeType, bad: set[int]) -> None:
        self.bad = bad
        self.prefix = node.name if node.name.startswith(SEGMENT_DEF) else SEGMENT_DEF  # names never clash
        self.owner = class_of(code)
        self.locals = _demangled(code.co_varnames, self.owner) | _demangled(code.co_cellvars, self.owner) | {RETURN}
        self.cellvars = _demangled(code.co_cellvars, self.owner)
        own = [n for stmt in node.body for n in _own_walk(stmt)]
        self.declared = {name for n in own if isinstance(n, (ast.Global, ast.Nonlocal)) for name in n.names}
        nested_nonlocals = {name for n in ast.walk(node) if isinstance(n, ast.Nonlocal) for name in n.names}
        self.volatile = (nested_nonlocals & self.cellvars) | self.declared
        everything = names(*node.body)
        self.loads = everything.loads + collections.Counter(everything.deferred)
        self.segments: list[SegmentPlan] = []
        self.python_lines: list[int] = []
        self.force: set[tuple[int, int]] = set()  # statements kept Python whatever their verdict
        self.retry = False
        self.tapes: set[str] = set()  # bound by a `with tf.GradientTape() as t` that Python runs

    # a statement's fate: "segment", "python" (as it is) or "recurse" (Python, its bodies split)
    def verdict(self, stmt: ast.stmt, bound: frozenset[str]) -> str:
        compound = "recurse" if isinstance(stmt, COMPOUND) else "python"
        if _holds(stmt, self.bad) or _escapes(stmt):
            return compound
        visitor = names(stmt)
        if visitor.deferred & self.locals:
            return compound
        if visitor.stores & (self.cellvars | self.declared):
            return compound
        if (set(visitor.loads) | visitor.stores) & self.volatile:
            return compound
        if set(visitor.loads) & self.tapes:  # an eager tape: no graph can ask it for gradients
            return compound
        if flow([stmt], bound)[1] & self.locals:  # reads a local that may be unbound here
            return compound
        if _key(stmt) in self.force:
            return compound
        return "segment"

    def block(
        self, stmts: list[ast.stmt], bound: frozenset[str], in_loop: bool, guarded: bool
    ) -> tuple[list[ast.stmt], frozenset[str]]:
        out: list[ast.stmt] = []
        run: list[ast.stmt] = []
        run_bound = bound
        for stmt in stmts:
            fate = self.verdict(stmt, bound)
            if fate == "segment":
                if not run:
                    run_bound = bound
                run.append(stmt)
                bound = flow([stmt], bound)[0]
                continue
            out += self.flush(run, run_bound, in_loop, guarded)
            run = []
            if fate == "recurse":
                out.append(self.recurse(stmt, bound, in_loop, guarded))
            else:
                out.append(stmt)
                if not _trivial(stmt):
                    self.python_lines.append(stmt.lineno)
            bound = flow([stmt], bound)[0]
        out += self.flush(run, run_bound, in_loop, guarded)
        return out, bound

    def recurse(self, stmt: ast.stmt, bound: frozenset[str], in_loop: bool, guarded: bool) -> ast.stmt:
        new = copy.copy(stmt)
        if isinstance(stmt, ast.If):
            new.body = self.block(stmt.body, bound, in_loop, guarded)[0]
            new.orelse = self.block(stmt.orelse, bound, in_loop, guarded)[0]
        elif isinstance(stmt, (ast.For, ast.While)):
            inner = bound | _stored([stmt.target]) if isinstance(stmt, ast.For) else bound
            new.body = self.block(stmt.body, inner, True, guarded)[0]
            new.orelse = self.block(stmt.orelse, bound, in_loop, guarded)[0]
        elif isinstance(stmt, ast.With):
            inner = bound | _stored([i.optional_vars for i in stmt.items if i.optional_vars is not None])
            self.tapes |= _stored([i.optional_vars for i in stmt.items if _is_tape(i)])
            new.body = self.block(stmt.body, inner, in_loop, True)[0]
        else:  # try
            catches = guarded or bool(stmt.handlers) or bool(stmt.finalbody)
            after_body = flow(stmt.body, bound)[0]
            new.body = self.block(stmt.body, bound, in_loop, catches)[0]
            new.handlers = []
            for handler in stmt.handlers:
                handler = copy.copy(handler)
                inner = bound | ({handler.name} if handler.name else set())
                handler.body = self.block(handler.body, inner, in_loop, guarded or bool(stmt.finalbody))[0]
                new.handlers.append(handler)
            new.orelse = self.block(stmt.orelse, after_body, in_loop, guarded or bool(stmt.finalbody))[0]
            new.finalbody = self.block(stmt.finalbody, bound, in_loop, guarded)[0]
        self.python_lines.append(stmt.lineno)
        return new

    def flush(self, run: list[ast.stmt], bound: frozenset[str], in_loop: bool, guarded: bool) -> list[ast.stmt]:
        if not run or all(_trivial(s) for s in run):
            return run
        if not _worth_a_graph(run):
            self.python_lines.extend(s.lineno for s in run if not _trivial(s))
            return run
        inner = names(*run)
        stores = sorted(inner.stores & self.locals)
        binds, reads = flow(run, frozenset())
        inputs = sorted(reads & self.locals)
        outputs = [n for n in stores if self.loads[n] > inner.loads[n] or (in_loop and n in inputs)]
        # an out the run may leave as it was (bound in one branch, in a handler): it comes in too
        inputs = sorted({*inputs, *(n for n in outputs if n not in binds)})
        held = {
            (_key(w), n)
            for s in run
            for w in _own_walk(s)
            if isinstance(w, ast.With)
            for n in _stored([i.optional_vars for i in w.items if i.optional_vars is not None])
        }
        escaping = {key for key, n in held if n in outputs}
        if escaping:  # `with tf.GradientTape() as tape:`, tape read after the segment: the with is Python's
            self.force |= escaping
            self.retry = True
        end = flow(run, bound)[0]
        if any(n not in end for n in outputs) or any(n not in bound for n in inputs):
            self.python_lines.extend(s.lineno for s in run if not _trivial(s))
            return run  # it may leave a name unbound that is read later: Python keeps it
        index = len(self.segments) + 1
        body = copy.deepcopy(run)
        if outputs:
            result = ast.Tuple([ast.Name(n, ast.Load()) for n in outputs], ast.Load())
            ret = ast.Return(value=result)
            ast.copy_location(ret, run[-1])
            ret.lineno = ret.end_lineno = run[-1].end_lineno
            body.append(ret)
        node = ast.FunctionDef(
            name=f"{self.prefix}_{index}",
            args=ast.arguments(posonlyargs=[], args=[ast.arg(n) for n in inputs], vararg=None, kwonlyargs=[],
                               kw_defaults=[], kwarg=None, defaults=[]),
            body=body,
            decorator_list=[],
            returns=None,
        )  # fmt: skip
        ast.copy_location(node, run[0])
        node.end_lineno = run[-1].end_lineno
        guards = guarded and bool(outputs)
        plan = SegmentPlan(index, run[0].lineno, run[-1].end_lineno, inputs, outputs, node, guards, node.name)
        self.segments.append(plan)
        return self._call(plan, run[0])

    def _call(self, plan: SegmentPlan, where: ast.stmt) -> list[ast.stmt]:
        call = f"{plan.name}({', '.join(plan.inputs)})"
        if plan.outputs:
            call = f"({', '.join(plan.outputs)},) = {call}"
        text = call
        if plan.guarded:
            compiled = {n: mangle(n, self.owner) for n in plan.outputs}  # the frames' locals' names
            restore = "".join(
                f"    if {c!r} in _janus_done:\n        {n} = _janus_done[{c!r}]\n" for n, c in compiled.items()
            )
            text = (
                f"try:\n    {call}\nexcept BaseException as _janus_exc:\n"
                f"    _janus_done = {LOCALS_AT}(_janus_exc, {plan.name})\n{restore}    raise\n"
            )
        stmts = ast.parse(text).body
        for stmt in stmts:
            for n in ast.walk(stmt):
                if "lineno" in n._attributes:
                    n.lineno, n.end_lineno = where.lineno, where.lineno
                    n.col_offset, n.end_col_offset = where.col_offset, where.col_offset
        return stmts


def _is_tape(item: ast.withitem) -> bool:
    """``tf.GradientTape(...) as name``: a tape the eager code records on."""
    call = item.context_expr
    if item.optional_vars is None or not isinstance(call, ast.Call):
        return False
    func = call.func
    return (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)) == "GradientTape"


def _key(stmt: ast.stmt) -> tuple[int, int]:
    return (stmt.lineno, stmt.col_offset)


def plan(node: ast.FunctionDef, code: types.CodeType, bad_lines: set[int]) -> Plan:
    """The rewrite of function ``node`` (of ``code``) around the statements at ``bad_lines``.

    A context manager bound by ``with ... as name`` never leaves a segment (a graph cannot return
    a ``tf.GradientTape``): where one would, the ``with`` is kept Python and the plan is redone."""
    body = _split_returns(node.body, bad_lines)
    params = frozenset(_demangled(code.co_varnames[: code.co_argcount + code.co_kwonlyargcount], class_of(code)))
    params |= {a.arg for a in (node.args.vararg, node.args.kwarg) if a is not None}
    force: set[tuple[int, int]] = set()
    while True:
        splitter = _Splitter(node, code, bad_lines)
        splitter.loads = names(*body).loads + collections.Counter(names(*body).deferred)
        splitter.force = set(force)
        new_body, _ = splitter.block(body, params, False, False)
        if not splitter.retry:
            break
        force = splitter.force
    args = copy.deepcopy(node.args)
    args.defaults, args.kw_defaults = [], [None] * len(args.kwonlyargs)
    for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
        if a is not None:
            a.annotation = None
    function = ast.FunctionDef(name=node.name, args=args, body=new_body, decorator_list=[], returns=None)
    ast.copy_location(function, node)
    function.end_lineno = node.end_lineno
    return Plan(function, splitter.segments, sorted(set(splitter.python_lines)), class_of(code))
