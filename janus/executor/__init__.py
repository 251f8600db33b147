"""Executor: the graph cache, guard checks, graph calls and the imperative fallback."""
