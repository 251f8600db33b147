"""The benchmark harness's interleaving: no variant is timed mostly after one particular other."""

import collections
import itertools

import pytest

from benchmarks.harness import balanced_orders, measure


@pytest.mark.parametrize("count", [2, 3, 4, 5, 6])
def test_every_order_runs_every_variant_once(count):
    keys = [f"v{i}" for i in range(count)]
    for order in balanced_orders(keys):
        assert sorted(order) == keys


@pytest.mark.parametrize("count", [2, 3, 4])
def test_each_variant_follows_each_other_equally_often(count):
    keys = [f"v{i}" for i in range(count)]
    orders = balanced_orders(keys)
    sequence = [key for order in orders * 3 for key in order]
    pairs = collections.Counter(zip(sequence, sequence[1:] + sequence[:1]))  # the repeats run back to back
    expected = {(a, b): 3 for a, b in itertools.permutations(keys, 2)}
    assert dict(pairs) == expected


def test_measure_runs_each_variant_once_per_repeat_in_balanced_order():
    calls = []
    variants = {k: (lambda k=k: calls.append(k)) for k in "abc"}
    m = measure("order", variants, unit="s", warmup=0, repeats=4, steps=1, sync=lambda out: out)
    assert calls == [k for order in (balanced_orders(list("abc")) * 2) for k in order]
    assert all(len(v) == 4 for v in m.samples.values())
