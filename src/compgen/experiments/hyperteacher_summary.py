"""Summaries of hyperteacher runs: final accuracies, R², and the paper's Tables A2-A8 beside ours.

Kept apart from :mod:`compgen.experiments.hyperteacher` so that editing a table does not change the
code fingerprint under which training results are stored.
"""

from __future__ import annotations

import numpy as np

from compgen import experiments
from compgen.experiments.hyperteacher_presets import MODEL_LABELS, MODELS

# Tables A2-A8 of the paper (spec §6.2), accuracy in %: {(M, K): {row: (ANIL, MAML, linear, nonlinear)}}.
PAPER_TABLES = {
    (4, 1): {"train": (79.68, 85.14, 80.98, 97.31), "test": (79.72, 85.13, 80.89, 97.15),
             "ood": (46.52, 20.53, 20.42, 20.93), "ood_1": (46.48, 20.58, 20.59, 20.9),
             "ood_2": (50.47, 26.71, 27.8, 26.78), "ood_4": (48.18, 22.74, 24.57, 23.04)},
    (4, 2): {"train": (66.45, 68.36, 88.32, 98.05), "test": (66.17, 68.11, 88.29, 98.0),
             "ood": (60.78, 55.41, 76.35, 90.9), "ood_1": (59.12, 53.33, 71.32, 89.24),
             "ood_2": (61.38, 55.98, 77.41, 90.79), "ood_4": (60.61, 50.33, 71.96, 68.31)},
    (4, 4): {"train": (65.63, 68.91, 92.22, 97.43), "test": (65.58, 68.72, 92.29, 97.49),
             "ood": (63.14, 63.29, 88.61, 94.9), "ood_1": (59.77, 56.29, 82.55, 91.79),
             "ood_2": (62.82, 63.16, 88.67, 95.13), "ood_4": (65.55, 66.69, 89.0, 95.63)},
    (8, 1): {"train": (66.22, 65.41, 88.13, 95.85), "test": (66.01, 65.16, 87.91, 95.72),
             "ood": (55.8, 47.42, 26.67, 26.91), "ood_1": (56.06, 47.68, 26.73, 26.9),
             "ood_2": (56.9, 49.21, 30.6, 30.45), "ood_4": (55.77, 47.63, 26.51, 26.5),
             "ood_8": (54.07, 45.77, 21.85, 22.81)},
    (8, 2): {"train": (60.0, 61.33, 89.9, 96.91), "test": (60.07, 61.33, 90.06, 96.95),
             "ood": (59.76, 60.6, 87.45, 96.05), "ood_1": (59.53, 60.76, 86.73, 96.01),
             "ood_2": (59.76, 60.48, 87.49, 95.9), "ood_4": (59.84, 60.01, 82.56, 77.79),
             "ood_8": (58.6, 57.99, 60.6, 33.08)},
    (8, 4): {"train": (60.9, 63.02, 93.64, 95.78), "test": (60.64, 62.93, 93.57, 95.71),
             "ood": (60.63, 62.78, 93.5, 95.68), "ood_1": (58.77, 58.81, 86.81, 92.6),
             "ood_2": (59.83, 61.39, 92.3, 95.25), "ood_4": (61.2, 64.0, 93.92, 95.88),
             "ood_8": (62.32, 62.85, 88.18, 84.43)},
    (8, 8): {"train": (61.41, 63.87, 91.54, 94.83), "test": (61.41, 64.05, 91.56, 94.71),
             "ood": (61.53, 64.11, 91.65, 94.75), "ood_1": (57.71, 57.75, 83.5, 89.26),
             "ood_2": (58.99, 59.77, 88.32, 92.97), "ood_4": (61.37, 64.12, 91.75, 94.82),
             "ood_8": (63.63, 66.73, 92.04, 95.49)},
}
PAPER_TABLE_NAMES = {(4, 1): "A2", (4, 2): "A3", (4, 4): "A4", (8, 1): "A5", (8, 2): "A6", (8, 4): "A7", (8, 8): "A8"}


def final_accuracy(cfg, output, set_name="ood"):
    """Accuracy (%) at the last evaluation on one evaluation set, one value per seed: (seeds,)."""
    return 100 * np.asarray(output["eval/accuracy"])[:, -1, cfg.eval_set_names().index(set_name)]


def final_train_accuracy(output, window=100):
    """Query accuracy (%) on the training meta-batches, averaged over the last ``window`` steps: (seeds,)."""
    return 100 * np.asarray(output["steps/accuracy"])[:, -window:].mean(1)


def final_r2(output):
    """Pooled R² of decoding the task code from the adapted fast parameters (fit on test, scored on OOD)."""
    return np.asarray(output["eval/r2_ood_pooled"])[:, -1]


def table_rows(cfg, output):
    """{row: (seeds,) accuracy in %} for the rows of Tables A2-A8."""
    rows = {"train": final_train_accuracy(output)}
    rows.update({name: final_accuracy(cfg, output, name) for name in cfg.eval_set_names() if name != "valid"})
    return rows


def accuracy_table(configs, outputs) -> str:
    """A markdown table in the layout of Tables A2-A8: ours (mean ± std over seeds) beside the paper's."""
    by_model = {c.model: (c, o) for c, o in zip(configs, outputs)}
    cfg = configs[0]
    paper = PAPER_TABLES.get((cfg.n_modules, cfg.max_hot), {})
    order = [m for m in MODELS if m in by_model]
    header = "| accuracy (%) | " + " | ".join(f"{MODEL_LABELS[m]} (ours) | paper" for m in order) + " |"
    lines = [header, "|---|" + "---|---|" * len(order)]
    rows = table_rows(*by_model[order[0]])
    for row in rows:
        label = {"train": "Train", "test": "Test", "ood": "OOD"}.get(row, f"OOD (K={row[4:]})")
        cells = []
        for m in order:
            c, o = by_model[m]
            values = table_rows(c, o)[row]
            ours = "n/a" if np.all(np.isnan(values)) else experiments.mean_std(values, 1)
            theirs = paper.get(row)
            cells.append(f"{ours} | {theirs[MODELS.index(m)]:.1f}" if theirs else f"{ours} | –")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summarize(configs, outputs) -> str:
    """A markdown table: one row per config with its final accuracies and R² (mean ± std over seeds)."""
    lines = ["| model | split | M | K | hidden | T | test acc. (%) | OOD acc. (%) | R² (OOD) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for c, out in zip(configs, outputs):
        r2 = experiments.mean_std(final_r2(out), 2) if "eval/r2_ood_pooled" in out else "–"
        templates = c.n_templates if c.model.startswith("hnet") else "–"
        lines.append(f"| {MODEL_LABELS[c.model]} | {c.split} | {c.n_modules} | {c.max_hot} | {c.hidden} | {templates} "
                     f"| {experiments.mean_std(final_accuracy(c, out, 'test'), 1)} "
                     f"| {experiments.mean_std(final_accuracy(c, out), 1)} | {r2} |")
    return "\n".join(lines)
