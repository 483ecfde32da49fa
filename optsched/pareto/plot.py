"""Draw a Pareto set (matplotlib): a 2-D scatter, or pairwise panels for three or more objectives,
with the greedy baselines' points marked and, when given, a reference front (the exact one)."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

from optsched.pareto.front import ParetoSet

UNITS = {"admitted_value": "admitted value", "cost": "cost ($/h)", "fragmentation": "fragmentation (GPUs)",
         "topology": "topology (extra domains)", "locality": "locality (s)", "fairness": "fairness (share)",
         "disruption": "disruption (GPU-h)", "queue_delay": "queue delay (h)"}


def plot_front(front: ParetoSet, path: Path, *, title: str = "", reference: ParetoSet | None = None,
               reference_label: str = "exact front") -> Path:
    """Write the figure to `path` (PNG) and return it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = front.objectives
    pairs = list(combinations(range(len(names)), 2))
    fig, axes = plt.subplots(1, len(pairs), figsize=(5.2 * len(pairs), 4.4), squeeze=False)
    pts = front.points
    for ax, (i, k) in zip(axes[0], pairs, strict=True):
        if reference is not None and len(reference):
            ref = reference.points
            ax.scatter(ref[:, i], ref[:, k], s=70, facecolors="none", edgecolors="tab:green", label=reference_label)
        ax.scatter(pts[:, i], pts[:, k], s=18, color="tab:blue", label=front.stats.get("method", "front"))
        for n, (name, terms) in enumerate(sorted(front.baselines.items())):
            ax.scatter([terms[names[i]]], [terms[names[k]]], marker="x", s=50, color=f"C{(n + 3) % 10}", label=name)
        ax.set_xlabel(UNITS.get(names[i], names[i]))
        ax.set_ylabel(UNITS.get(names[k], names[k]))
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7, loc="best")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
