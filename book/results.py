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
# One row per claim of the paper that this book tests, with its verdict in every column: ours on the book's seeds,
# ours on each further seed set, all of them pooled, ours and the authors' implementation at the same twin world, and,
# where it has been trained, the paper's own scale. Click a claim for its criterion, the paper's number and the numbers
# our verdict read. Every verdict is computed when this page is built, by the same library functions as the
# chapters' figures (`compgen.figures.glance`), from the runs in the results store and from records that keep
# numbers per seed (`book/search/`), never from a stored verdict: **holds** means the criterion is met, **not
# reproduced** that it is not, and **not run** that the runs are not there. Each figure link leads to the figure in
# its chapter, where the "why `quick` differs" note says what the preset changes and why the claim keeps its
# meaning.
#
# **How a claim is judged.** Each seed draws its own teacher, modules or mazes, so a criterion compares two
# quantities seed by seed: the mean difference must reach the claim's stated size (in module alignment, points of
# accuracy or a share of a loss; each criterion names it) and have the paper's sign on every seed, or on all but
# one with the mean above two standard errors. Fig. A8 and Fig. A10 compare cells of a size sweep and are judged
# on the means over seeds; their criteria say so. "Higher on average by a hair" is not what the paper claims, and
# it does not count as holding here.
#
# **More seed sets, and pooled.** Three seeds can agree by luck, and a claim that sits at its criterion can flip
# between seed sets, or between two machines that round differently. Every claim is therefore also judged on further
# seed sets that were neither used to choose the quick worlds nor shown in the chapters: `tools/second_set.py` trains
# every chapter on each with the same code and presets and records each run's final numbers per seed
# (`book/search/second_set.json`, `book/search/third_set.json`), a column per set. The **pooled** column judges the
# same criterion on all the seeds of every set, with the rule that scales with the number of seeds: the stated size
# reached by the mean, and the mean above two standard errors of the per-seed differences. A claim whose mean
# difference, two standard errors either side, reaches both sides of its criterion is **at the criterion**: more seeds
# could turn its verdict either way, so the page says so beside the verdict and the headline counts such claims apart
# from those that hold clearly and those clearly not reproduced. The forest plot draws every claim on one axis, its
# mean difference in units of its criterion, so that the distance of each from its criterion shows at a glance. A
# cell marked (stale) was recorded by older training code.
#
# **Twin world.** The authors' code (`smonsays/modular-hyperteacher`) and ours, trained at the same configs
# (`tools/twin.py`; where the authors' code cannot express the quick world, both at the nearest world it does),
# judged by the same claims code: a mark per seed set, then Σ, the verdict pooled over every seed. The columns
# compare like with like; the chapter's twin appendix has the numbers.
#
# What a verdict at `quick` means: the quick preset runs the paper's algorithm (the second-order meta-gradient
# through the inner optimiser, its losses, splits and evaluation) in smaller worlds and for far fewer steps, with
# every model of a comparison given the same budget. A claim that holds at `quick` is evidence for the paper's
# mechanism, not a reproduction of its numbers, which need `paper` on a GPU. A claim that is not reproduced is
# shown as such, with the chapter's account of what was tried.

# %% tags=["parameters", "hide-input"]
preset = "quick"  # smoke | quick | paper
force = False  # accepted for a uniform interface; this page trains nothing
seeds = None  # None: the preset's seeds
repository = None  # set by `make execute`: _config.yml's address @ the commit, where Colab installs compgen from

# %% tags=["remove-cell"]
# In Colab: compgen installed at the commit this notebook was executed at (papermill injects `repository`,
# _config.yml's address @ the commit; Colab's own jax, flax, optax and numpy are kept), then that commit's book
# opened, the chapter's folder the working directory, where it reads its records (`compgen.notebook.open_book`).
import subprocess
import sys

if "google.colab" in sys.modules:
    if not repository:
        raise ValueError("repository is not set: give where to install compgen from, as <address>@<commit>")
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", f"git+{repository}"])
    import compgen.notebook

    compgen.notebook.open_book(repository)

# %% tags=["remove-input"]
from compgen import figures, notebook
from compgen.figures import glance

notebook.check_parameters(globals())

figures.show(
    glance.page(
        preset, seeds, glance.SEED_SETS, twins="search", paper_scale="records/paper/fig2c", bridge="records/bridge"
    )
)
