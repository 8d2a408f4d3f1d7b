# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Results at a glance
#
# One row per claim of the paper that this book tests: the chapter and figure, the paper's claim in one line,
# the criterion our numbers must meet, the paper's number where it reports one, ours at the preset the book was
# built with, the seeds, and the verdict computed from the runs in the results store. The verdicts are
# computed by the same library functions as the chapters' figures (`compgen.figures.glance`), never typed by
# hand: **holds** means the criterion is met on these seeds, **not reproduced at this preset** means it is not,
# and **not run** means the runs are not in the store. Each figure link leads to the figure in its chapter,
# where the "why `quick` differs" note says what the preset changes and why the claim keeps its meaning.
#
# Every criterion compares two quantities seed by seed (each seed draws its own teacher, modules or mazes, so a
# seed is compared with itself): the difference must have the paper's sign on every seed (or on all but one,
# with the mean difference above two standard errors) and reach a stated size — for example 0.1 in module
# alignment with connected students near identification, 5 points of accuracy, or 10 % of a loss. "Higher on
# average by a hair" is not what the paper claims, and it does not count as holding here.
#
# What a verdict at `quick` means: the quick preset runs the paper's algorithm (the second-order meta-gradient
# through the inner optimiser, its losses, splits and evaluation) in smaller worlds and for far fewer steps, with
# every model of a comparison given the same budget. Each chapter says what its quick world changes and why the
# claim keeps its meaning there; a claim that holds at `quick` is evidence for the paper's mechanism, not a
# reproduction of its numbers, which need `paper` on a GPU. A claim that is not reproduced is shown as such,
# with the chapter's account of what was tried.
#
# **A second seed set.** Three seeds can agree by luck, so every claim is also computed on a second set of seeds
# that was neither used to choose the quick worlds nor shown in the chapters (the column headed by those seeds).
# Those runs are too many to repeat in every build: `tools/second_set.py` trains every chapter on them with the
# same code and presets and stores the computed claims in `book/search/second_set.json`, which this page reads. A
# claim the book can call robust holds in both columns; the page says when the training code has changed since
# that record was made.

# %% tags=["parameters", "hide-input"]
preset = "quick"  # smoke | quick | paper
force = False  # accepted for a uniform interface; this page trains nothing
seeds = None  # None: the preset's seeds
repository = None  # set by `make execute` from _config.yml: where Colab installs compgen from

# %% tags=["remove-cell"]
# In Colab, install the companion's library from the repository named in _config.yml (papermill injects it).
import subprocess
import sys

if "google.colab" in sys.modules:
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", f"compgen @ git+{repository}"])

# %%
from compgen import figures, notebook
from compgen.figures import glance

notebook.check_parameters(globals())

figures.show(
    glance.page(
        preset, seeds, second_set="search/second_set.json", twins="search", paper_scale="search/paper_fig2c.json"
    )
)
