"""Figures from the results in ``benchmarks/results/`` (matplotlib, Agg backend).

* ``throughput.png``  per model in ``summary.json``: janus ÷ eager and symbolic ÷ eager (log scale).
* ``ablation.png``    the ablation rows (``summary.json``'s ``"ablation"`` key, else ``ablation.json``),
                      each setting's throughput ÷ eager.
* ``convergence.png`` from ``convergence.json``: training loss and test accuracy vs wall-clock
                      seconds for eager, janus and naive tf.function.

``python -m benchmarks.plots [results_dir]`` renders whichever of these the results allow.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

RESULTS = Path(__file__).parent / "results"  # as benchmarks.harness.RESULTS, without importing TensorFlow
ABLATION_LABELS = ("BASE", "+UNRL", "+SPCN", "+PARL")
MODE_STYLE = {
    "eager": ("eager", "tab:gray"),
    "janus": ("janus.jit", "tab:blue"),
    "tf_function": ("naive tf.function", "tab:orange"),
}


def _load(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _ratio(numerator: object, denominator: object) -> float:
    """``numerator / denominator`` for positive finite numbers, else NaN (a missing bar)."""
    if isinstance(numerator, (int, float)) and isinstance(denominator, (int, float)) and denominator > 0:
        value = numerator / denominator
        if math.isfinite(value) and value > 0:
            return value
    return math.nan


def _annotate(ax, bars) -> None:
    for bar in bars:
        height = bar.get_height()
        if math.isfinite(height) and height > 0:
            text = f"{height:.1f}×" if height >= 10 else f"{height:.2f}×"
            ax.annotate(text, (bar.get_x() + bar.get_width() / 2, height), xytext=(0, 2),
                        textcoords="offset points", ha="center", va="bottom", fontsize=8)  # fmt: skip


def _subtitle(payload: dict) -> str:
    parts = [str(payload["machine"])] if payload.get("machine") else []
    if payload.get("date"):
        parts.append(str(payload["date"])[:10])
    return ", ".join(parts)


def _log_axis(ax, values: list[float]) -> None:
    """Log y axis with room for annotations and legend, ticks at 1, 2, 5 × 10^k labelled ``2×``."""
    finite = [v for v in values if math.isfinite(v) and v > 0] + [1.0]
    ax.set_yscale("log")
    ax.set_ylim(min(finite) / 1.6, max(finite) * 2.6)
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def plot_throughput(summary: dict, path: Path) -> Path | None:
    """janus ÷ eager and symbolic ÷ eager per model; None when no model has numbers."""
    rows = []
    for m in summary.get("models") or []:
        if not isinstance(m, dict) or "name" not in m:
            continue
        janus_x = _ratio(m.get("janus"), m.get("imperative"))
        symbolic_x = _ratio(m.get("symbolic"), m.get("imperative"))
        if math.isfinite(janus_x) or math.isfinite(symbolic_x):
            rows.append((m["name"], janus_x, symbolic_x))
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(max(6.5, 1.1 * len(rows) + 2), 4.2))
    xs = range(len(rows))
    width = 0.38
    bars_j = ax.bar([x - width / 2 for x in xs], [r[1] for r in rows], width, label="janus ÷ eager", color="tab:blue")
    bars_s = ax.bar([x + width / 2 for x in xs], [r[2] for r in rows], width, label="symbolic ÷ eager",
                    color="tab:green")  # fmt: skip
    _annotate(ax, bars_j)
    _annotate(ax, bars_s)
    ax.axhline(1.0, color="black", lw=0.8, ls="--", label="eager")
    _log_axis(ax, [r[1] for r in rows] + [r[2] for r in rows])
    ax.set_xticks(list(xs), [r[0] for r in rows], rotation=20 if len(rows) > 4 else 0)
    ax.set_ylabel("throughput relative to eager (log)")
    ax.set_title("Training throughput (Table 3)\n" + _subtitle(summary), fontsize=9)
    ax.legend(fontsize=8, loc="upper left", ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_ablation(rows: list[dict], path: Path, subtitle: str = "") -> Path | None:
    """Each setting's throughput ÷ eager, grouped by model.

    A row's ``ratio_to_eager`` (speed-ups over the eager run each setting was paired with, as
    ``benchmarks.ablation`` writes) is used where present; otherwise rows with an ``eager``
    entry are normalised by it, and rows without one are taken as already normalised.
    Missing settings are left out. None when nothing can be drawn.
    """
    labels = [lab for lab in ABLATION_LABELS if any(isinstance(r, dict) and lab in r for r in rows)]
    models = []
    for r in rows:
        if not isinstance(r, dict) or "model" not in r:
            continue
        paired = r.get("ratio_to_eager") if isinstance(r.get("ratio_to_eager"), dict) else {}
        eager = r.get("eager", 1.0)
        values = [_ratio(paired[lab], 1.0) if lab in paired else _ratio(r.get(lab), eager) for lab in labels]
        if any(math.isfinite(v) for v in values):
            models.append((r["model"], values))
    if not models:
        return None
    fig, ax = plt.subplots(figsize=(max(6.5, 1.6 * len(models) + 2.5), 4.2))
    width = 0.8 / len(labels)
    colors = plt.get_cmap("Blues")([0.35 + 0.6 * i / max(1, len(labels) - 1) for i in range(len(labels))])
    for i, lab in enumerate(labels):
        xs = [m - 0.4 + width * (i + 0.5) for m in range(len(models))]
        bars = ax.bar(xs, [v[i] for _, v in models], width, label=lab, color=colors[i])
        _annotate(ax, bars)
    ax.axhline(1.0, color="black", lw=0.8, ls="--", label="eager")
    _log_axis(ax, [x for _, v in models for x in v])
    ax.set_xticks(range(len(models)), [name for name, _ in models])
    ax.set_ylabel("throughput relative to eager (log)")
    ax.set_title("janus optimisations switched on cumulatively (Fig. 9)" + (f"\n{subtitle}" if subtitle else ""),
                 fontsize=9)  # fmt: skip
    ax.legend(fontsize=8, loc="upper left", ncol=min(3, len(labels) + 1))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _smooth(values: list[float], window: int) -> list[float]:
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def plot_convergence(result: dict, path: Path) -> Path | None:
    """Training loss (moving average) and test accuracy vs wall-clock seconds for each mode."""
    modes = {k: v for k, v in (result.get("modes") or {}).items() if isinstance(v, dict)}
    if not modes:
        return None
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 4))
    window = max(1, int(result.get("eval_every", 10)))
    for mode, r in modes.items():
        label, color = MODE_STYLE.get(mode, (mode, None))
        seconds, losses = r.get("train_seconds") or [], r.get("train_loss") or []
        if seconds and len(seconds) == len(losses):
            ax_loss.plot(seconds, _smooth(losses, window), label=label, color=color, lw=1.4)
        curve = r.get("eval") or {}
        if curve.get("seconds") and curve.get("test_accuracy"):
            ax_acc.plot(curve["seconds"], curve["test_accuracy"], marker="o", ms=3, label=label, color=color, lw=1.4)
    ax_loss.set_xlabel("training wall-clock seconds")
    ax_loss.set_ylabel(f"training loss (moving average of {window} steps)")
    ax_loss.set_yscale("log")
    ax_acc.set_xlabel("training wall-clock seconds")
    ax_acc.set_ylabel("test accuracy")
    ax_acc.set_ylim(0, 1)
    for ax in (ax_loss, ax_acc):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    title = f"Convergence: {result.get('model', 'lenet')} on {result.get('dataset', '?')}"
    fig.suptitle(title + ("\n" + _subtitle(result) if _subtitle(result) else ""), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(results_dir: Path | str = RESULTS) -> list[Path]:
    """Renders every figure whose results exist in ``results_dir``; returns the files written."""
    results_dir = Path(results_dir)
    written = []
    summary = _load(results_dir / "summary.json") or {}
    if path := plot_throughput(summary, results_dir / "throughput.png"):
        written.append(path)
    ablation_source = summary if summary.get("ablation") else (_load(results_dir / "ablation.json") or {})
    if path := plot_ablation(ablation_source.get("ablation") or [], results_dir / "ablation.png",
                             _subtitle(ablation_source)):  # fmt: skip
        written.append(path)
    convergence = _load(results_dir / "convergence.json")
    if convergence and (path := plot_convergence(convergence, results_dir / "convergence.png")):
        written.append(path)
    for path in written:
        print(f"wrote {path}")
    return written


if __name__ == "__main__":
    main(*sys.argv[1:2])
