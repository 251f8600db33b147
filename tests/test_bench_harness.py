"""The benchmark harness's interleaving: no variant is timed mostly after one particular other."""

import collections
import itertools
import statistics
import types

import pytest

import benchmarks.harness as harness
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


def test_rewarm_runs_untimed_steps_before_each_repeat_and_reports_the_cold_one(monkeypatch):
    calls = []
    clock = {"t": 0.0}

    def variant(key, cold, warm):
        def run():
            # The first call of a repeat (right after another variant) is the slow one.
            clock["t"] += cold if not calls or calls[-1] != key else warm
            calls.append(key)

        return run

    variants = {"a": variant("a", 5.0, 1.0), "b": variant("b", 7.0, 2.0)}
    monkeypatch.setattr(harness, "time", types.SimpleNamespace(perf_counter=lambda: clock["t"]))
    m = measure("rewarm", variants, unit="s", warmup=0, repeats=4, steps=2, rewarm=1, sync=lambda out: out)
    assert calls == [k for order in balanced_orders(list("ab")) * 4 for k in order for _ in range(3)]
    assert m.per_step == {"a": 1.0, "b": 2.0}  # the timed steps all followed a step of their own variant
    assert m.cold_step == {"a": 5.0, "b": 7.0}


def test_min_seconds_adds_repeats_for_short_steps_up_to_the_cap(monkeypatch):
    clock = {"t": 0.0}

    def step():  # one second a call, on the harness's clock
        clock["t"] += 1.0

    monkeypatch.setattr(harness, "time", types.SimpleNamespace(perf_counter=lambda: clock["t"]))
    variants = {"a": step, "b": step}
    # 3 repeats would time 3 * 1 * (1 + 1) = 6 s: 10 s needs 5 repeats; 100 s would need 50, capped at 9.
    enough = measure("enough", variants, unit="s", warmup=1, repeats=3, steps=1, min_seconds=10.0, sync=lambda out: out)
    assert all(len(v) == 5 for v in enough.samples.values())
    short = measure(
        "short",
        variants,
        unit="s",
        warmup=1,
        repeats=3,
        steps=1,
        min_seconds=100.0,
        max_repeats=9,
        sync=lambda out: out,
    )
    assert all(len(v) == 9 for v in short.samples.values())
    plain = measure("plain", variants, unit="s", warmup=1, repeats=3, steps=1, sync=lambda out: out)
    assert all(len(v) == 3 for v in plain.samples.values())


def test_cold_steps_table_lists_each_measured_model_and_nothing_for_quick_runs():
    from benchmarks.report import cold_steps_markdown

    row = {
        "name": "treernn",
        "repeats": 11,
        "cold_ms_per_step": {"imperative": 1250.0, "janus": 50.0, "symbolic": 500.0},
    }
    table = cold_steps_markdown([row, {"name": "quick", "cold_ms_per_step": {}}])
    assert "| treernn | 11 | 1250.0 / 50.0 / 500.0 | 25.00× | 10.00× |" in table
    assert "quick" not in table
    assert cold_steps_markdown([{"name": "quick", "cold_ms_per_step": {}}]) == ""


def test_pooled_measurement_keeps_each_phase_paired_and_takes_medians_over_all_samples():
    three_way = Measurement(
        "pool", "s", per_step={}, samples={"e": [9.0, 9.0], "j": [1.0, 3.0], "s": [1.1, 3.3]}, cold_step={"j": 5.0}
    )
    alone = Measurement("pool", "s", per_step={}, samples={"j": [2.0, 2.0, 2.0], "s": [2.4, 2.4, 2.4]})
    pooled = three_way.pooled_with(alone)
    assert pooled.samples == {"e": [9.0, 9.0], "j": [1.0, 3.0, 2.0, 2.0, 2.0], "s": [1.1, 3.3, 2.4, 2.4, 2.4]}
    assert pooled.per_step == {"e": 9.0, "j": 2.0, "s": 2.4}
    assert pooled.paired_ratio("j", "s") == pytest.approx(1.2)  # the ratios 1.1, 1.1, 1.2, 1.2, 1.2
    assert pooled.cold_step == {"j": 5.0} and three_way.samples["j"] == [1.0, 3.0]  # the inputs are left as they were
