"""The benchmark harness's interleaving: no variant is timed mostly after one particular other."""

import collections
import itertools
import statistics

import pytest

from benchmarks.harness import Measurement, balanced_orders, measure


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


def test_paired_ratio_cancels_drift_between_repeats():
    # The machine halves its speed after two repeats: b is always 1.25x slower than a within a repeat.
    a = [1.0, 1.0, 2.0, 2.0, 2.0]
    m = Measurement("drift", "s", per_step={}, samples={"a": a, "b": [t * 1.25 for t in a]})
    assert m.paired_ratio("a", "b") == pytest.approx(1.25)
    # Here the ratio of medians agrees (2.5 / 2.0). Below it does not (2.0 / 2.0): it mixes repeats.
    m.samples["b"] = [1.25, 1.25, 1.25 * 2, 1.25 * 2, 1.0 * 2]
    assert m.paired_ratio("a", "b") == pytest.approx(1.25)
    assert statistics.median(m.samples["b"]) / statistics.median(a) != pytest.approx(1.25)
