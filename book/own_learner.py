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
# # Test your own learner
#
# The chapters before this one ask the paper's question of its four learners: on tasks built from modules, does a
# learner that adapts a few task parameters find the modules, and does it then generalise to new combinations of
# them? The same tasks and the same claims make a benchmark for any learner. This chapter defines a small modular
# net in the notebook itself, a **mixture of experts** whose task gate is what the inner loop adapts, and asks it
# the paper's claims of the hyperteacher's Fig. 3B ({cite}`schug2024modular` §4.1) and of the goal grid world's
# Fig. 4E/F (§4.2), beside the paper's learners, on the same task stream, seeds and budget, judged by the criteria
# those chapters fixed before their runs.
#
# **Bringing your own.** A learner is a function of a section's config that returns a `compgen.models.Model`:
# `init(key)` draws its meta-parameters, `fast_init(meta)` a task's starting fast parameters, `features(meta, x)`
# the part of the forward pass that does not depend on them (computed once per task) and `head(meta, fast,
# features)` the rest. Name it in either of two ways:
#
# ```python
# from compgen import models
# models.register("mine", build_mine, label="My learner")  # then model="mine"; trains in this process
# # or, from any process that can import it (worker processes, Ray tasks, the command line):
# #   compgen-cli run hyperteacher fig3b --set model=mypackage.learners:build_mine
# ```
#
# It is checked when a config names it (a failure is one line naming it), its parameter count and FLOPs per step are
# derived from its code (`jax.eval_shape`, XLA's cost analysis), and its runs are stored under a key that holds what
# it computes: the programs its functions lower to at the config's shapes, constants and helpers included. Editing
# what it computes retrains its runs and no other; a comment does not. A name is registered once: pass
# `replace=True` to register another learner under it (the library's names are never replaced).
# `compgen.analysis.compare.compare(learner, section, figure, preset)` does what this chapter does for any of
# the comparisons: Fig. 3B and 3C/D (hyperteacher), Fig. 4C (preferences), Fig. 4E/F (goals).

# %% tags=["parameters", "hide-input"]
preset = "quick"  # smoke | quick | paper
force = False  # retrain the learner's runs even if the results store holds them
seeds = None  # None: the preset's seeds; e.g. [2020] for a faster look
repository = None  # set by `make execute`: _config.yml's address @ the commit, where Colab installs compgen from
learner = None  # None: the mixture of experts below; or your learner's import path, package.module:build

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

# %%
import jax
import jax.numpy as jnp

from compgen import figures, models, notebook
from compgen.analysis import compare
from compgen.figures import compare as drawn

notebook.check_parameters(globals(), "learner")

# %% [markdown]
# ## A mixture of experts with a task gate
#
# $K$ small MLPs (the experts, meta-parameters) each map an input to the outputs; a task's prediction is their
# average weighted by $\operatorname{softmax}(g)$, where the gate logits $g \in \mathbb R^K$ are the task's fast
# parameters, adapted on the support set by the inner loop from a meta-learned start. The experts' outputs do not
# depend on the gate, so the inner loop computes them once per task and adapts $K$ numbers, where the paper's
# hypernetworks adapt an embedding that generates a whole network. A modular net a reader might try first: does
# gating whole networks find the modules of the tasks?

# %%
EXPERTS = 8


def mixture_of_experts(cfg) -> models.Model:
    """EXPERTS MLPs n_in -> hidden x num_hidden -> n_out (ReLU), mixed by softmax(gate); the gate (EXPERTS,) is fast."""
    sizes = (cfg.n_in,) + (cfg.hidden,) * cfg.num_hidden + (cfg.n_out,)

    def init(key):
        keys = jax.random.split(key, len(sizes) - 1)
        layers = [
            {"w": jax.random.normal(k, (EXPERTS, a, b)) * jnp.sqrt(2.0 / a), "b": jnp.zeros((EXPERTS, b))}
            for k, a, b in zip(keys, sizes[:-1], sizes[1:])
        ]
        return {"experts": layers, "gate": jnp.zeros(EXPERTS)}

    def experts(meta, x):  # (N, n_in) -> (N, EXPERTS, n_out): every expert's output
        h = jnp.broadcast_to(x, (EXPERTS, *x.shape))
        for i, layer in enumerate(meta["experts"]):
            h = jnp.einsum("kni,kio->kno", h, layer["w"]) + layer["b"][:, None]
            h = jax.nn.relu(h) if i < len(meta["experts"]) - 1 else h
        return jnp.moveaxis(h, 0, 1)

    def mix(meta, gate, outputs):  # (N, EXPERTS, n_out) -> (N, n_out)
        return jnp.einsum("k,nko->no", jax.nn.softmax(gate), outputs)

    return models.Model("mixture", init, lambda meta: meta["gate"], experts, mix)


models.register("mixture", mixture_of_experts, label=f"Mixture of {EXPERTS} experts")
chosen = "mixture" if learner is None else learner
models.get(chosen)  # a learner neither registered here nor importable ('' say) is refused in one line, before training

# %% [markdown]
# Three things make this a learner the sections can train. `init` returns a pytree of meta-parameters, so the outer
# AdamW step, the gradient clipping and the skipped non-finite updates apply to it unchanged. `fast_init` returns the
# task's starting point for the inner loop, here the meta-learned gate, so the inner AdamW steps move only the gate
# and the meta-gradient flows back through them to both the experts and the gate's start. And `features`, the part
# that does not depend on the fast parameters, is computed once per task outside the inner loop, as for ANIL: eight
# experts cost one forward pass per task, not one per inner step. Nothing else is declared: the number of
# meta-parameters comes from the shapes `init` returns, the FLOPs from XLA's count of `features` and `mix` at one
# and two points, and the results store keys the runs by the programs it lowers to (so `EXPERTS` is in the key).
#
# What each learner costs at this preset on Fig. 3B's tasks, derived from its code: the meta-parameters from their
# shapes, the FLOPs of one outer step (a meta-batch of tasks, inner loop and meta-gradient) from XLA's count of its
# forward pass. The new learner takes the linear hypernetwork's size, inner loop and learning rates at this preset,
# untuned (`settings_of`); every learner trains for the same outer steps on the same tasks and seeds.

# %%
figures.show(drawn.cost_table(chosen, "hyperteacher", preset, **compare.settings_of("hyperteacher", preset)))

# %% [markdown]
# ## On the hyperteacher: Fig. 3B
#
# The paper's Fig. 3B claim, asked of the new learner: higher OOD accuracy than the better of ANIL and MAML when
# training covers every module (compositional support), and the lead lost when one module is never seen
# (non-compositional support). The hypernetworks' rows are the [hyperteacher chapter's](hyperteacher) claims on the
# same runs.

# %% tags=["hide-output"]
on_hyperteacher = compare.compare(
    chosen,
    "hyperteacher",
    "fig3b",
    preset,
    seeds,
    compare.Training(force=force),
    **compare.settings_of("hyperteacher", preset),
)

# %%
figures.show(drawn.result(on_hyperteacher), drawn.summary(on_hyperteacher))

# %% [markdown]
# ## In the goal grid world: Fig. 4E/F
#
# The agent sees one demonstration of a task, a goal built from an object and a quadrant of the maze, and must
# act on it; OOD goals are new combinations. The claims: a higher OOD step accuracy than the better of ANIL and
# MAML, and a much larger loss when a quadrant is held out (Fig. 4F); Fig. A9 asks the same of whole optimal
# episodes.

# %% tags=["hide-output"]
on_goals = compare.compare(
    chosen, "goals", "fig4ef", preset, seeds, compare.Training(force=force), **compare.settings_of("goals", preset)
)

# %%
figures.show(drawn.result(on_goals), drawn.summary(on_goals))

# %% [markdown]
# ## What to try next
#
# - **Gate each layer.** Mixing whole networks at the output cannot build a new network out of parts of old ones;
#   the hyperteacher's tasks differ in their hidden layers. A gate per hidden layer over that layer's expert weights
#   is a step towards the paper's linear hypernetwork, which mixes weights with an unconstrained task embedding.
# - **Other claims.** `compare.compare(chosen, "hyperteacher", "fig3cd", preset)` asks whether a linear probe decodes
#   the task's modules from the adapted gate (the paper's Fig. 3C/D), `compare.compare(chosen, "preferences",
#   "fig4c", preset)` the preference world's Fig. 4C.
# - **The paper's scale.** At `preset="paper"` every learner gets the paper's task setup and budget, which needs a
#   GPU; the [appendix](running) says what each chapter costs there.

# %% [markdown]
# ## Reading the verdicts
#
# A claim holds when the difference has the paper's sign on every seed (or all but one, with the mean above two
# standard errors) and reaches the chapter's margin: the criteria the [hyperteacher](hyperteacher) and
# [goals](goals) chapters fixed before any run. The new learner was not tuned: a claim that does not hold for it at
# `quick` says how it fares with the hypernetwork's settings and budget, not what it could reach. To tune it, pass
# your own fields to `compare` (`hidden=...`, `inner_lr=...`) and tune on seeds the verdicts do not use
# (`seeds=[7, 8, 9]`), then judge on the book's.
