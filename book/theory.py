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
# 1. **Compositional support** ({abbr}`Definition 3.1 (the paper's numbering)`). Every module appears in at
#    least one training family: $\bigvee_k m^{(k)} = (1, \dots, 1)$. A module the student has never seen cannot
#    be recombined.
# 2. **Connected support** ({abbr}`Definition 3.2 (the paper's numbering)`). Build a graph whose nodes are the
#    training families, with an edge wherever two masks share an active module ($m^{(k)} \odot m^{(l)} \neq 0$).
#    This graph must be connected. Otherwise some group of modules is only ever seen apart from the rest, and the
#    student can organise that group differently without any training task noticing.
# 3. **No overparameterisation.** The theorem assumes the student is exactly as large as the teacher,
#    $\hat h = h$ and $\hat M = M$. A student with enough spare capacity can fit each training task with
#    its own parameters and learn nothing about how the tasks share modules.
#
# :::{admonition} Theorem 1 (compositional generalisation, informal)
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
# :::
#
# Theorem 2 says what such a student looks like. Write $\Theta_i \in \mathbb R^{n \times M}$ for the slice of
# the teacher's modules that feeds hidden unit $i$, so that unit $i$'s incoming weights are $W(z)_{:,i} =
# \Theta_i z$. Define $\hat\Theta_j \in \mathbb R^{n \times \hat M}$ in the same way for the student.
#
# :::{admonition} Theorem 2 (linear identification, informal)
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
# :::
#
# The conditions are also *necessary*: when one of them fails, the paper constructs students that fit all
# training tasks and do not generalise. We build these students below and measure their losses. First, the
# support graphs of the task distributions the paper trains on (its Table A9).

# %% tags=["parameters", "hide-input"]
preset = "quick"  # smoke | quick | paper
force = False  # accepted for a uniform interface; this chapter trains nothing and stores no results
seed = 0  # PRNG seed of every construction below
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

# %%
from compgen import figures, notebook
from compgen.figures import theory as chapter
from compgen.tasks import support

notebook.check_parameters(globals(), "seed")

built = chapter.constructions(preset, seed)
figures.show(chapter.settings_text(built))

# %% [markdown]
# ## Support graphs of Table A9
#
# Each panel shows one training distribution of the paper's Fig. 2C. A node is a task family, labelled by its
# active modules. An edge joins two families that share a module, and colours mark connected components. The
# title gives the paper's label next to the verdict of `compgen.tasks.support`.

# %%
chapter.support_graphs(built)

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
figures.show(chapter.identified(built))

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
chapter.two_modules(built)

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
chapter.permutation(built)

# %% [markdown]
# Within each triangle every teacher unit has an exact partner (cosine 1): the identity on the left, the
# neighbour swap in the middle. On a task that joins the triangles, each student unit mixes half of one
# teacher unit with half of its neighbour, and no unit matches. Theorem 2's single, shared permutation
# $\sigma$ does not exist, so by Theorem 2 the student cannot generalise. The losses confirm it:

# %%
chapter.disconnected_losses(built)

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
chapter.lookup(built)

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
print(
    "masks 01;12;23;34 (M = 6): compositional?",
    support.is_compositional(example, 6),
    "| unseen modules:",
    support.missing_modules(example, 6),
    "| connected?",
    support.is_connected(example),
)
for test_task in ("024", "05"):
    print(
        f"  ...relative to the test task {test_task}:",
        support.is_compositional(example, 6, target=support.parse_masks(test_task, 6)),
    )

# %% [markdown]
# ## Summary

# %%
figures.show(chapter.summary(built))

# %% [markdown]
# Every student in the table fits its training tasks exactly (the identified student is evaluated at
# $\hat z = F z$). Only the one that identified the teacher's modules up to a single linear re-mixing and a
# single permutation also solves the new combinations. A perfect training loss does not tell these students
# apart. The conditions on the training support and on the student's size do. The
# {doc}`next chapter <teacher_student>` asks whether *gradient descent* finds the identified students when
# the conditions hold and misses them when they do not.
