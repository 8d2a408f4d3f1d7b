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

# %% tags=["remove-cell"]
# Installs the companion's library when this notebook runs in Colab; does nothing elsewhere.
import subprocess
import sys

if "google.colab" in sys.modules:
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q",
                           "compgen @ git+https://github.com/compgen-companion/modular-compgen"])

# %% [markdown]
# # Theory: when does modularity generalise compositionally?
#
# A modular learner can, in principle, solve a task it has never seen by recombining modules it learned on
# other tasks. Whether it *does* depends on the training tasks. Section 3 of {cite}`schug2024modular`
# answers the question in a setting small enough to prove things about: a teacher network that is itself
# built from modules, and a student of the same kind that has to find them. This chapter states the
# results and then builds, explicitly and without any training, the paper's counterexamples (its
# Appendix A.3). Each counterexample is a student that fits every training task exactly and still fails on
# new combinations. The {doc}`next chapter <teacher_student>` trains students and checks the theory
# empirically.
#
# ## The multi-task teacher–student setup
#
# **Teacher.** A task is a latent vector $z \in \mathbb R^M$. A linear hypernetwork turns it into the first
# layer of a one-hidden-layer ReLU network without biases. The network has $n$ inputs, $h$ hidden units and
# $o$ outputs:
#
# $$
# y = A^\top \operatorname{ReLU}\!\Big(\tfrac{1}{\sqrt n}\, W(z)^\top x\Big), \qquad
# W(z) = \sum_{m=1}^{M} z_m\, \Theta_m, \qquad \Theta_m \in \mathbb R^{n \times h},\ A \in \mathbb R^{h \times o}.
# $$
#
# The $\Theta_m$ are the teacher's **modules**. The readout $A$ is shared by all tasks. Inputs are
# $x \sim \mathcal U[-\sqrt3, \sqrt3]^n$. The paper's experiments use $n = 16$, $h = 16$, $o = 4$ and $M = 6$
# (the library's `compgen.tasks.teacher.apply_teacher`).
#
# **Student.** The student has the same architecture, with its own modules $\hat\Theta_1, \dots,
# \hat\Theta_{\hat M}$, its own readout $\hat A$ and $\hat h$ hidden units. It never observes $z$. For each
# task it infers its own latent $\hat z$ by minimising the task loss
#
# $$
# L(z, \hat z) = \tfrac12\, \mathbb E_x \operatorname{mean}\big(\hat y(x; \hat z) - y(x; z)\big)^2 ,
# $$
#
# and training fits the shared parameters to all training tasks at once, in the infinite-data limit
# (the paper's Eq. 2):
#
# $$
# \min_{\hat\Theta, \hat A}\ \mathbb E_{z \sim P_{\text{train}}} \Big[ \min_{\hat z} L(z, \hat z) \Big].
# $$
#
# The student **generalises compositionally** if it then reaches zero loss, $\min_{\hat z} L(z, \hat z) = 0$,
# on *every* $z \in \mathbb R^M$, including combinations of modules that no training task used.
#
# **Task families.** A binary mask $m \in \{0,1\}^M$ says which modules a task uses. Its *task family* is the
# set of latents whose non-zero entries are exactly those of $m$. For example, $m = (1,1,0,0,0,0)$ is the
# family of tasks that combine modules 0 and 1. A training distribution is a mixture of $K$ families
# $m^{(1)}, \dots, m^{(K)}$. Within a family the latents spread over the whole span of the active modules:
# "continuous" latents do this, and "discrete" latents put one point per family. We write masks by their
# active indices, so `01;12` means the two families $\{0,1\}$ and $\{1,2\}$ (`compgen.tasks.support.parse_masks`).
#
# ## Three conditions
#
# The paper shows that a student that fits the training distribution perfectly identifies the teacher's
# modules, and so generalises compositionally, when three conditions hold:
#
# 1. **Compositional support** (Definition 3.1). Every module appears in at least one training family:
#    $\bigvee_k m^{(k)} = (1, \dots, 1)$. A module the student has never seen cannot be recombined.
# 2. **Connected support** (Definition 3.2). Build a graph whose nodes are the training families, with an
#    edge wherever two masks share an active module ($m^{(k)} \odot m^{(l)} \neq 0$). This graph must be
#    connected. Otherwise some group of modules is only ever seen apart from the rest, and the student can
#    organise that group differently without any training task noticing.
# 3. **No overparameterisation.** The theorem assumes the student is exactly as large as the teacher,
#    $\hat h = h$ and $\hat M = M$. A student with enough spare capacity can fit each training task with
#    its own parameters and learn nothing about how the tasks share modules.
#
# ```{admonition} Theorem 1 (compositional generalisation, informal)
# :class: important
# Let $P_{\text{train}}$ have compositional and connected support, let the inputs have full support, and let
# the student match the teacher's size, $\hat h = h$ and $\hat M = M$. Assume also a smoothness condition on
# the activation and a non-degenerate teacher. Then
#
# $$
# \mathbb E_{z \sim P_{\text{train}}}\Big[\min_{\hat z} L(z, \hat z)\Big] = 0
# \quad\Longrightarrow\quad
# \min_{\hat z} L(z, \hat z) = 0 \ \text{ for every } z \in \mathbb R^M .
# $$
#
# It even suffices to fit a finite number of i.i.d. tasks from each family: the student then generalises
# almost surely. As the paper remarks, fitting a number of tasks linear in the number of modules thus covers
# all the exponentially many combinations.
# ```
#
# Theorem 2 says what such a student looks like. Write $\Theta_i \in \mathbb R^{n \times M}$ for the slice of
# the teacher's modules that feeds hidden unit $i$, so that unit $i$'s incoming weights are $W(z)_{:,i} =
# \Theta_i z$. Define $\hat\Theta_j \in \mathbb R^{n \times \hat M}$ in the same way for the student.
#
# ```{admonition} Theorem 2 (linear identification, informal)
# :class: important
# Under the same assumptions, the student generalises compositionally **if and only if** there are an
# invertible matrix $F \in \mathbb R^{M \times M}$, a permutation $\sigma$ of the hidden units and signs
# $\varepsilon_i \in \{\pm 1\}$ such that, for every hidden unit $i$,
#
# $$
# \hat\Theta_{\sigma(i)} = \varepsilon_i\, \Theta_i\, F^{-1},
# $$
#
# with the readout permuted in the same way. The student then solves task $z$ with $\hat z = F z$. In words:
# each learned module is a fixed linear re-mixing of the teacher's modules, and the student's hidden units
# are the teacher's, relabelled in one and the same way for every module.
# ```
#
# The conditions are also *necessary*: when one of them fails, the paper constructs students that fit all
# training tasks and do not generalise. We build these students below and measure their losses. First, the
# support graphs of the task distributions the paper trains on (its Table A9).

# %% tags=["parameters"]
preset = "quick"  # smoke | quick | paper
force = False  # accepted for a uniform interface; this chapter trains nothing and stores no results
seed = 0  # PRNG seed of every construction below

# %%
import time

import jax
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Markdown, display

from compgen import counterexamples as ce
from compgen.tasks import support
from compgen.tasks.teacher import apply_teacher, generated_weight

# The constructions are exact; the presets differ only in how many test inputs and tasks measure the
# losses and how hard Adam searches for the best student latent on out-of-distribution tasks.
PRESETS = {
    "smoke": dict(num_inputs=256, fit_inputs=128, fit_steps=50, restarts=0, num_tasks=4, lookup_max_k=2),
    "quick": dict(num_inputs=1024, fit_inputs=256, fit_steps=200, restarts=1, num_tasks=12, lookup_max_k=2),
    "paper": dict(num_inputs=4096, fit_inputs=256, fit_steps=300, restarts=3, num_tasks=32, lookup_max_k=3),
}
if preset not in PRESETS:
    raise ValueError(f"preset must be one of {tuple(PRESETS)}, got {preset!r}")
if isinstance(seed, bool) or not isinstance(seed, int):
    raise ValueError(f"seed must be an integer, got {seed!r}")
cfg = PRESETS[preset]
fit = {k: cfg[k] for k in ("num_inputs", "fit_inputs", "fit_steps", "restarts")}
key_two, key_perm, key_lookup, key_ident = jax.random.split(jax.random.key(seed), 4)
started = time.time()
display(Markdown(
    f"**Preset `{preset}`, seed {seed}.** Nothing in this chapter is trained, so the presets only change "
    f"how the losses are measured: {cfg['num_inputs']} test inputs per task; for out-of-distribution tasks, "
    f"the best student latent $\\hat z$ is searched by {cfg['fit_steps']} Adam steps on {cfg['fit_inputs']} "
    f"inputs from the naive guess and from {cfg['restarts']} random starts."))


def caption(what):
    return f"{what} — preset {preset}, seed {seed}"


# %% [markdown]
# ## Support graphs of Table A9
#
# Each panel shows one training distribution of the paper's Fig. 2C. A node is a task family, labelled by its
# active modules. An edge joins two families that share a module, and colours mark connected components. The
# title gives the paper's label next to the verdict of `compgen.tasks.support`.

# %%
COMPONENT_COLOURS = plt.get_cmap("tab10").colors


def draw_support_graph(ax, masks, title):
    """Task families on a circle; edges where masks share a module; colour = connected component."""
    adjacency = support.support_graph(masks)
    k = len(masks)
    angles = np.pi / 2 - 2 * np.pi * np.arange(k) / k
    xy = np.stack([np.cos(angles), np.sin(angles)], 1)
    for i, j in zip(*np.nonzero(np.triu(adjacency))):
        ax.plot(*xy[[i, j]].T, color="0.6", lw=0.9, zorder=1)
    colour = np.zeros(k, int)
    for c, component in enumerate(support.connected_components(masks)):
        colour[list(component)] = c
    for i in range(k):
        ax.scatter(*xy[i], s=430, color=COMPONENT_COLOURS[colour[i] % 10], edgecolor="k", lw=0.6, zorder=2)
        ax.text(*xy[i], support.mask_to_string(masks[i]), ha="center", va="center", fontsize=8,
                fontweight="bold", zorder=3)
    ax.set_title(title, fontsize=8.5)
    ax.set_xlim(-1.3, 1.3)
    ax.set_ylim(-1.3, 1.3)
    ax.set_aspect("equal")
    ax.axis("off")


def verdict(flag, yes, no):
    return yes if flag else no


fig, axes = plt.subplots(2, 4, figsize=(12, 6.6))
rows = []
for ax, col in zip(axes.flat, support.TABLE_A9):
    masks = col.masks
    connected, compositional = support.is_connected(masks), support.is_compositional(masks, col.n_modules)
    agrees = connected == col.connected
    draw_support_graph(ax, masks, f"column {col.column}: {col.name} ({col.distribution})\n"
                                  f"paper: {verdict(col.connected, 'connected', 'disconnected')} · "
                                  f"ours: {verdict(connected, 'connected', 'disconnected')} "
                                  f"{'✓' if agrees else '✗'}")
    rows.append(f"| {col.column} | {col.name} | {col.distribution} | `{col.spec}` | {len(masks)} | "
                f"{verdict(compositional, 'yes', 'no')} | {len(support.connected_components(masks))} | "
                f"{verdict(connected, 'connected', 'disconnected')} | "
                f"{verdict(col.connected, 'connected', 'disconnected')} | {'✓' if agrees else '✗'} |")
legend_ax = axes.flat[-1]
legend_ax.axis("off")
legend_ax.text(0.0, 0.5, "node = task family\n(its active modules)\n\nedge = the two families\nshare a module\n\n"
               "colour = connected\ncomponent", fontsize=9, va="center", transform=legend_ax.transAxes)
fig.suptitle(caption("Support graphs of the task distributions of Table A9 (M = 6 modules)"), fontsize=10)
fig.tight_layout()
plt.show()
display(Markdown(
    "| column | name | distribution | masks | # families | compositional | # components | ours | paper | agree |\n"
    "|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows)))

# %% [markdown]
# All seven distributions have compositional support: every module appears somewhere. What separates them
# is connectivity. In columns 2, 5 and 7 the modules $\{0,1,2\}$ and $\{3,4,5\}$ only ever meet their own
# triangle. The extra triples in column 7 (`012`, `345`) add combinations but no bridge. Column 6 (one-hots)
# is the extreme case: every module is its own component. Columns 1, 3 and 4 link all families through
# shared modules. The ring pairs `50` and `23` and the overlapping triples play the role of the "fifth task
# family" in the paper's §3.2 example, the one that joins two otherwise separate groups of modules.
#
# ## A student that has identified the teacher (Theorem 2)
#
# Before the failures, a success, to check the measuring tools. We build a student exactly as Theorem 2
# describes: we take a random invertible $F$ and a random permutation $P$ of the hidden units, and set
# $\hat\Theta_k = \sum_m (F^{-1})_{mk}\, \Theta_m P$ and $\hat A = P^\top A$. With $\hat z = F z$, its
# generated weight is $W(z) P$, so it matches the teacher on every task, seen or unseen.

# %%
ident = ce.linearly_identified_student(key_ident, num_tasks=cfg["num_tasks"], num_inputs=cfg["num_inputs"])
print(f"identified student (M̂ = 6, ĥ = 16; cond(F) = {ident['condition_number']:.1f}): "
      f"max training loss {ident['train_loss'].max():.1e}, max OOD loss {ident['ood_loss'].max():.1e} "
      f"(targets have ½·mean y² ≈ {ident['ood_target_power'].mean():.1e})")

# %% [markdown]
# Both losses are at float32 rounding level. Re-mixing the modules and relabelling the hidden units
# consistently costs nothing. The counterexamples below break exactly this consistency.
#
# ## Counterexample 1: disconnected support
#
# **The paper's small example.** The teacher has two modules and two hidden units, with output weights both
# equal to 1. Module 0 gives the hidden units the input weights $(a, b)$ and module 1 gives them $(c, d)$,
# for four linearly independent vectors. The training families are $\{0\}$ and $\{1\}$. These are
# compositional but not connected, since the two families share no module. The student copies module 0
# and **swaps** the hidden units of module 1, giving $(d, c)$. Because the two output weights are equal, the
# swap is invisible on every training task (dropping the $1/\sqrt n$):
#
# $$
# \underbrace{\operatorname{ReLU}(z_1 c^\top x) + \operatorname{ReLU}(z_1 d^\top x)}_{\text{teacher}}
# = \underbrace{\operatorname{ReLU}(z_1 d^\top x) + \operatorname{ReLU}(z_1 c^\top x)}_{\text{student}} .
# $$
#
# On a task that uses both modules, the teacher computes $\operatorname{ReLU}((z_0 a + z_1 c)^\top x) +
# \operatorname{ReLU}((z_0 b + z_1 d)^\top x)$. The student instead pairs $a$ with $d$ and $b$ with $c$.
# No choice of $\hat z$ repairs this: mixing $\hat z$ only rescales the two modules, and cannot move $c$
# from one hidden unit to the other.

# %%
two = ce.disconnected_two_modules(key_two, num_tasks=cfg["num_tasks"], **fit)

# outputs along a circle of radius sqrt(n) through input space, spanned by two orthonormal directions
n_in = two["teacher"]["modules"].shape[1]
basis = np.linalg.qr(np.asarray(jax.random.normal(jax.random.key(seed + 1), (n_in, 2))))[0]
phi = np.linspace(0, 2 * np.pi, 400)
circle = np.sqrt(n_in) * (np.cos(phi)[:, None] * basis[:, 0] + np.sin(phi)[:, None] * basis[:, 1])
panels = [("training task, family {0}", two["train_latents"][0], two["train_latents"][0], None),
          ("training task, family {1}", two["train_latents"][1], two["train_latents"][1], None),
          ("OOD task, family {0, 1}", two["ood_latents"][0], two["ood_latents"][0],
           two["ood_latents_student_fitted"][0])]
fig, axes = plt.subplots(1, 3, figsize=(12, 3.3), sharey=True)
for ax, (title, z, z_hat, z_fit) in zip(axes, panels):
    ax.plot(phi, apply_teacher(two["teacher"], z, circle)[:, 0], color="k", lw=2, label="teacher")
    ax.plot(phi, apply_teacher(two["student"], z_hat, circle)[:, 0], color="C1", ls="--", lw=1.6,
            label="student, ẑ = z")
    if z_fit is not None:
        ax.plot(phi, apply_teacher(two["student"], z_fit, circle)[:, 0], color="C0", ls=":", lw=1.8,
                label="student, best ẑ (Adam)")
    ax.set_title(f"{title}\nz = ({z[0]:.2f}, {z[1]:.2f})", fontsize=9)
    ax.set_xlabel("input angle φ (rad)")
axes[0].set_ylabel("network output y")
axes[-1].legend(fontsize=8, loc="upper right")
fig.suptitle(caption("Disconnected support, two modules: teacher and student outputs"), fontsize=10)
fig.tight_layout()
plt.show()

# %% [markdown]
# The inputs run around a circle of radius $\sqrt n$ (a typical input norm) in a random plane of input space:
# $x(\varphi) = \sqrt n\,(\cos\varphi\, u + \sin\varphi\, v)$ for orthonormal $u, v$. On the training
# families the curves coincide exactly. On the combined task the student is off, and the
# best latent Adam can find only partly compensates.
#
# **At the size of Table A9.** The same trick works for the full teacher ($M = 6$, $h = 16$, 4 outputs)
# trained on column 5, the two triangles $\{01, 12, 02\}$ and $\{34, 45, 35\}$. Inside each component the
# student is the teacher with its hidden units permuted, by a *different* permutation in each component.
# Here the identity is used for $\{0,1,2\}$, and $\{3,4,5\}$ swaps neighbouring units. There is one
# subtlety. The readout $A$ is shared by all tasks, so permuting hidden units inside one component only
# preserves the function if the permuted units have **equal readout rows**. We therefore tie the teacher's
# readout rows in pairs, so that units $2k$ and $2k+1$ share a row. Generic readouts leave no such freedom,
# but the teacher remains a perfectly valid one. Out-of-distribution tasks are the 2-module combinations
# that join the two triangles, with continuous latents.

# %%
perm = ce.disconnected_permutation(key_perm, masks=support.table_a9(5).spec, num_tasks=cfg["num_tasks"], **fit)


def cosines(w_a, w_b):
    """|cos| between the hidden units' incoming weights: (n, h) x (n, h') -> (h, h')."""
    w_a, w_b = w_a / np.linalg.norm(w_a, axis=0), w_b / np.linalg.norm(w_b, axis=0)
    return np.abs(w_a.T @ w_b)


in_a = int(np.flatnonzero([m[:3].any() for m in perm["train_masks"]])[0])
in_b = int(np.flatnonzero([m[3:].any() for m in perm["train_masks"]])[0])
z_cases = [("training task, triangle {0,1,2}", perm["train_latents"][in_a]),
           ("training task, triangle {3,4,5}", perm["train_latents"][in_b]),
           ("OOD task joining the triangles", perm["ood_latents"][0])]
fig, axes = plt.subplots(1, 3, figsize=(12, 4.1), layout="constrained")
ticks = np.arange(0, perm["teacher"]["modules"].shape[2], 4)
for ax, (title, z) in zip(axes, z_cases):
    image = ax.imshow(cosines(np.asarray(generated_weight(perm["teacher"]["modules"], z)),
                              np.asarray(generated_weight(perm["student"]["modules"], z))),
                      vmin=0, vmax=1, cmap="magma")
    active = "".join(str(i) for i in np.flatnonzero(z))
    ax.set_title(f"{title}\n(active modules {active})", fontsize=9)
    ax.set_xticks(ticks)
    ax.set_yticks(ticks)
    ax.set_xlabel("student hidden unit j")
axes[0].set_ylabel("teacher hidden unit i")
fig.colorbar(image, ax=axes, shrink=0.85, label="|cos| of incoming weights at ẑ = z")
fig.suptitle(caption("Disconnected support (Table A9, column 5): which student unit plays which teacher unit"),
             fontsize=10)
plt.show()

# %% [markdown]
# Within each triangle every teacher unit has an exact partner (cosine 1): the identity on the left, the
# neighbour swap in the middle. On a task that joins the triangles, each student unit mixes half of one
# teacher unit with half of its neighbour, and no unit matches. Theorem 2's single, shared permutation
# $\sigma$ does not exist, so by Theorem 2 the student cannot generalise. The losses confirm it:

# %%
FLOOR = 1e-16  # exact zeros are drawn at this height on the log axis


def loss_panel(ax, result, title):
    """Relative loss (loss / ½·mean y²) of every task: training, OOD with naive ẑ, OOD with best ẑ."""
    groups = [("training tasks\n(ẑ written down)", result["train_loss"] / result["train_target_power"]),
              ("OOD tasks\nnaive ẑ", result["ood_relative_loss_naive"]),
              ("OOD tasks\nbest ẑ (Adam)", result["ood_relative_loss_fitted"])]
    for x, (label, values) in enumerate(groups):
        values = np.maximum(np.asarray(values, float), FLOOR)
        ax.bar(x, np.median(values), color=["#1b7837", "#d6604d", "#b2182b"][x], alpha=0.75, width=0.6)
        ax.scatter(x + np.linspace(-0.18, 0.18, len(values)), values, s=9, color="k", zorder=3)
    ax.set_xticks(range(len(groups)), [g[0] for g in groups], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylim(FLOOR / 3, 3)
    ax.axhline(FLOOR, color="grey", lw=0.6, ls=":")
    ax.set_ylabel("relative loss  L / (½·mean y²)")
    ax.set_title(title, fontsize=9)


fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
loss_panel(axes[0], two, "two modules, two hidden units (App. A.3)")
loss_panel(axes[1], perm, "M = 6, h = 16, Table A9 column 5")
fig.suptitle(caption("Disconnected support: per-task loss (bars = median, dots = tasks, "
                     "exact zeros drawn on the dotted line at 1e-16)"), fontsize=10)
fig.tight_layout()
plt.show()

# %% [markdown]
# A relative loss of 1 is what predicting zero would cost. The training tasks are fitted exactly, while on
# the OOD tasks even the best latent leaves a relative loss of several percent or more. The loss is
# measured on fresh inputs, not on the inputs $\hat z$ was fitted on.
#
# ## Counterexample 2: an overparameterised student
#
# The support is now compositional **and** connected: Table A9 column 1, the six one-hots plus the ring
# pairs, with discrete latents $z_k = m^{(k)} / \lVert m^{(k)} \rVert$, i.e. $K = 12$ training tasks. The
# student is too big. It has $\hat M = K = 12$ modules and $\hat h = K h = 192$ hidden units in $K$ blocks.
# Its module $k$ is zero except in block $k$, which holds the teacher's generated weight $W(z_k)$, and the
# readout repeats $A$ for every block. With $\hat z = e_k$ only block $k$ is active, and the student
# reproduces training task $k$ exactly. It is a look-up table of the training tasks.
#
# On a new combination $z$ it fails. For $\hat z \geq 0$, positive homogeneity of the ReLU gives
#
# $$
# \hat y(x; \hat z) = \sum_k \hat z_k\, A^\top \operatorname{ReLU}\!\big(W(z_k)^\top x / \sqrt n\big),
# $$
#
# a weighted sum of the training tasks' *outputs*. The teacher instead sums modules *inside* the ReLU. The
# naive guess writes $z = \sum_k \hat z_k z_k$ (least squares) and uses that $\hat z$; Adam then searches for
# a better one. The out-of-distribution tasks are the 2-module combinations outside the ring (plus 3-module
# ones at `paper`), with discrete latents.

# %%
lookup_masks = support.table_a9(1).masks
lookup = ce.overparameterised_lookup(
    key_lookup, masks=lookup_masks, ood_masks=ce.default_ood_masks(lookup_masks, max_k=cfg["lookup_max_k"]),
    **fit)

K = len(lookup_masks)
h = lookup["teacher"]["modules"].shape[2]
block_norms = np.linalg.norm(lookup["student"]["modules"], axis=1)  # (K, K h)
fig, axes = plt.subplots(1, 3, figsize=(14, 3.9), gridspec_kw={"width_ratios": [1.5, 1.0, 1.3]})
image = axes[0].imshow(block_norms, aspect="auto", cmap="Greys", interpolation="nearest")
axes[0].set_yticks(range(K), [support.mask_to_string(m) for m in lookup_masks], fontsize=7)
axes[0].set_xticks(np.arange(K) * h + h / 2 - 0.5, range(K), fontsize=7)
axes[0].set_xlabel(f"student hidden units, in blocks of h = {h}")
axes[0].set_ylabel("student module k (training task's mask)")
axes[0].set_title("student modules: ‖Θ̂_k[:, j]‖ (one block per training task)", fontsize=9)
fig.colorbar(image, ax=axes[0], shrink=0.8)
task = 0
axes[1].bar(np.arange(K) - 0.2, lookup["ood_latents_student_naive"][task], width=0.4, color="#d6604d",
            label="naive (least squares)")
axes[1].bar(np.arange(K) + 0.2, lookup["ood_latents_student_fitted"][task], width=0.4, color="#b2182b",
            label="best (Adam)")
axes[1].axhline(0, color="k", lw=0.5)
axes[1].set_xticks(range(K), [support.mask_to_string(m) for m in lookup_masks], fontsize=7, rotation=90)
axes[1].set_xlabel("student module k (training task's mask)")
axes[1].set_ylabel("ẑ_k")
axes[1].set_title(f"student latent for OOD task {support.mask_to_string(lookup['ood_masks'][task])}",
                  fontsize=9)
axes[1].legend(fontsize=7)
loss_panel(axes[2], lookup, f"K = {K} training tasks, M̂ = {K}, ĥ = {K * h}")
fig.suptitle(caption("Overparameterised student (Table A9 column 1, discrete); right: per-task loss, "
                     "bars = median, dots = tasks"), fontsize=10)
fig.tight_layout()
plt.show()

# %% [markdown]
# The student fits every training task exactly. It uses one module per task, just as the paper warns in
# condition (iii): "if the student has more modules available than there are tasks in the training
# distribution, it could use one module per task, fitting all of them perfectly but remaining ignorant of
# their shared structure". On new combinations neither latent fits. This is why the theorem needs
# $\hat h = h$ and $\hat M = M$. In practice a little overparameterisation helps optimisation, and much more
# hurts identification on discrete tasks. The next chapter's Fig. 2D measures this. Discrete tasks are the
# easy case for a look-up table, because each family is a single point. With continuous latents a family of
# several modules is a continuum of tasks, which this construction cannot cover with finitely many blocks.
# The paper finds overparameterisation harmless there in practice and attributes it to an inductive bias of
# the learning dynamics.
#
# ## The third failure: non-compositional support
#
# If some module never appears in a training family, no training task carries any information about it. A
# new task that uses this module asks for something the student was never shown. Since the teacher's
# modules are linearly independent, no re-mixing of what the student did learn can produce it. The paper
# calls this the trivial failure case. In `compgen.tasks.support` it is
# `is_compositional(masks, n_modules)` returning `False` (and `missing_modules` names the unseen ones).
# Compositional support is about the modules a test task *needs*. With `target=` masks, the check asks
# whether the training families cover the modules of those particular test tasks:

# %%
example = support.parse_masks("01;12;23;34", 6)  # module 5 is never seen
print("masks 01;12;23;34 (M = 6): compositional?", support.is_compositional(example, 6),
      "| unseen modules:", support.missing_modules(example, 6),
      "| connected?", support.is_connected(example))
for test_task in ("024", "05"):
    print(f"  ...relative to the test task {test_task}:",
          support.is_compositional(example, 6, target=support.parse_masks(test_task, 6)))

# %% [markdown]
# ## Summary

# %%
summary = [
    ("identified student (Theorem 2; ẑ = F z)", "column 1: compositional, connected", "M̂ = 6, ĥ = 16",
     ident["train_loss"].max(), np.median(ident["ood_loss"] / ident["ood_target_power"]), float("nan")),
    ("two modules, swapped units", "{0}, {1}: disconnected", "M̂ = 2, ĥ = 2",
     two["train_loss"].max(), np.median(two["ood_relative_loss_naive"]), np.median(two["ood_relative_loss_fitted"])),
    ("per-component permutation", "column 5: disconnected", "M̂ = 6, ĥ = 16",
     perm["train_loss"].max(), np.median(perm["ood_relative_loss_naive"]),
     np.median(perm["ood_relative_loss_fitted"])),
    ("one module per task", "column 1: compositional, connected", f"M̂ = {K}, ĥ = {K * h}",
     lookup["train_loss"].max(), np.median(lookup["ood_relative_loss_naive"]),
     np.median(lookup["ood_relative_loss_fitted"])),
]
lines = ["| student | training support | size | max training loss | OOD relative loss, naive ẑ (median) "
         "| OOD relative loss, best ẑ (median) |", "|---|---|---|---|---|---|"]
for name, sup, size, train, naive, best in summary:
    best_text = "–" if np.isnan(best) else f"{best:.3f}"
    lines.append(f"| {name} | {sup} | {size} | {train:.1e} | {naive:.3g} | {best_text} |")
display(Markdown("\n".join(lines)))
print(caption(f"all constructions exact, losses on {cfg['num_inputs']} fresh inputs per task; "
              f"chapter ran in {time.time() - started:.0f} s"))

# %% [markdown]
# Every student in the table fits its training tasks exactly (the identified student is evaluated at
# $\hat z = F z$). Only the one that identified the teacher's modules up to a single linear re-mixing and a
# single permutation also solves the new combinations. A perfect training loss does not tell these students
# apart. The conditions on the training support and on the student's size do. The
# {doc}`next chapter <teacher_student>` asks whether *gradient descent* finds the identified students when
# the conditions hold and misses them when they do not.
