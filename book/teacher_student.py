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
# # Teacher and student: identifying the modules
#
# The [theory section](theory) says *when* a modular student can generalise compositionally. This
# section checks the claim by training students, as in §3.3 of {cite}`schug2024modular`.
#
# **Teacher.** A one-hidden-layer ReLU network without biases, with inputs
# $x \sim \mathcal U[-\sqrt3, \sqrt3]^{16}$, $h = 16$ hidden units and 4 outputs, whose first layer is
# generated from a task latent $z \in \mathbb R^{6}$ by $M = 6$ modules:
#
# $$ y = A^\top \operatorname{ReLU}\!\Big(\tfrac{1}{\sqrt{n}} W(z)^\top x\Big), \qquad W(z) = \sum_{m=1}^{M} z_m \Theta_m . $$
#
# **Tasks.** A training distribution is a list of binary masks $m \in \{0,1\}^6$ (the columns of
# Table A9). A task draws a mask uniformly, then its latent:
#
# * *continuous* (the paper's Algorithm 1): $E_i \sim \operatorname{Exp}(1)$, $w = E \odot m$,
#   $w \leftarrow w / (\sum_i w_i + 1)$ (the authors' code; the paper divides by $\sum_i w_i$, available as
#   `normalisation="paper"`), then $z = \tfrac12 (w + m)$, so active entries lie in $(\tfrac12, 1)$;
# * *discrete*: $z = m / \lVert m \rVert_2$.
#
# **Student.** The same architecture with $\hat h = 16 f_h$ hidden units and $\hat M = 6 f_M$ modules.
# It never sees $z$: per task it infers its own latent $\hat z$ by 300 Adam steps (lr $3\cdot10^{-3}$) from a
# fixed initial $\hat z_0$, each step on a fresh batch of 256 inputs labelled by the teacher (infinite data).
# The inferred $\hat z^\star$ is then held constant (a stop-gradient: at the inner optimum the second-order
# terms vanish) and the modules $\hat\Theta$ and readout $\hat A$ take an AdamW step on the loss
# $\ell = \tfrac12 \operatorname{mean}(\hat y - y)^2$ of a fresh query batch, averaged over 64 tasks,
# with the learning rate decayed by a cosine from $10^{-3}$ to $10^{-6}$ over 60,000 steps.
#
# **Module alignment.** After training, a ridge decoder $F \in \mathbb R^{M \times \hat M}$ with
# $z \approx F \hat z$ is fitted on training tasks. With $P = F^{+}$ the student's modules are expressed in
# the teacher's coordinates, $\tilde\Theta_m = \sum_k P_{km} \hat\Theta_k$, and
#
# $$ A = \frac1h \sum_{i=1}^{h} \max_{j \le \hat h} \frac1M \sum_{m=1}^{M} \cos\!\big(\Theta_m[:, i],\ \tilde\Theta_m[:, j]\big). $$
#
# $A = 1$ means *linear identification*: every teacher hidden unit has a student unit whose incoming weights
# are, module by module, a linear re-mixing of the teacher's — exactly what Theorem 2 says compositional
# generalisation requires. The library computes it in `compgen.metrics.module_alignment`.

# %% tags=["parameters"]
preset = "quick"  # smoke | quick | paper
force = False  # recompute even if the results store holds these runs
seeds = None  # None: the preset's seeds; e.g. [100] for a faster look

# %%
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Markdown, display

from compgen import plots
from compgen.experiments import teacher_student as ts
from compgen.tasks import support

overrides = {} if seeds is None else {"seeds": tuple(seeds)}
base = ts.make_config(preset, **overrides)
rows = [f"| `{name}` | {ours} | {paper} |" for name, ours, paper in ts.differences_from_paper(base)]
display(Markdown(f"**Preset `{preset}`** ({ts.get_preset(preset).description}). "
                 + ("Fields that differ from the paper's configuration:\n\n| field | this run | paper |\n|---|---|---|\n"
                    + "\n".join(rows) if rows else "Identical to the paper's configuration.")))


def caption(cfg, what):
    return (f"{what} — preset {preset}: {cfg.outer_steps:,} outer steps × {cfg.meta_batch} tasks, "
            f"{cfg.inner_steps} inner steps, seeds {', '.join(map(str, cfg.seeds))}")


# %% [markdown]
# ```{admonition} Why the `quick` preset differs from the paper
# :class: note
# The paper trains each student for 60,000 outer steps of 64 tasks with 300 inner steps on batches of 256:
# about $3\cdot10^{11}$ sample-gradient evaluations per run, GPU-hours for the whole figure. `quick` keeps
# every size of the teacher and of the default student and the same algorithm, and shrinks the budget so
# that the section runs in minutes on two CPU cores: 4,000 outer steps of 8 tasks, and 50 inner Adam steps
# on batches of 64 whose learning rate decays by a cosine from 0.2 (`inner_schedule="cosine"`). Fewer inner
# steps at the paper's constant rate cannot move $\hat z$ far enough from its fixed initial value
# $\hat z_0 \sim \mathcal N(0, I)$: in our probes one seed in three (seed 101, whose $\hat z_0$ has a
# coordinate of 3.6) then failed to fit its tasks at all. Evaluation sets are smaller (64 tasks, 256 inputs),
# and inputs are drawn with a hashed counter instead of threefry (`input_sampler="hash"`, the same
# distribution, several times cheaper on a CPU). Students are therefore less converged than the paper's and
# alignments lower in absolute terms:
# what `quick` must show is the *ordering* the paper reports. `paper` runs the exact configuration.
# ```
#
# ## Fig. 2C — connected support identifies the modules
#
# One student per Table A9 column, student factors $(f_h, f_M) = (2, 2)$, no weight decay. All columns
# and seeds train together in one compiled program (`jax.vmap` over runs).

# %%
fig2c = ts.fig2c_configs(preset, **overrides)
fig2c_out = ts.run(fig2c, force=force)
fig2c_alignment = np.stack([ts.final_alignment(o) for o in fig2c_out])  # (columns, seeds)
labels = [f"{s.column}: {s.name}" for s in support.TABLE_A9]
plots.fig2c_alignment(
    labels, [s.distribution for s in support.TABLE_A9], [s.connected for s in support.TABLE_A9],
    fig2c_alignment, caption(fig2c[0], "Fig. 2C: module alignment after training"))
plt.show()
display(Markdown(ts.summarize(fig2c, fig2c_out)))

# %% [markdown]
# Reading the figure: the green bars (connected support) should stand clearly above the purple ones
# (disconnected support), for the discrete columns 1–2 and the continuous columns 3–7 alike. The claim, checked
# on the numbers above:

# %%
connected = np.array([s.connected for s in support.TABLE_A9])
discrete = np.array([s.distribution == "discrete" for s in support.TABLE_A9])
checks = []
for name, group in (("discrete", discrete), ("continuous", ~discrete)):
    conn, disc = fig2c_alignment[group & connected].mean(), fig2c_alignment[group & ~connected].mean()
    checks.append(f"| {name} | {conn:.3f} | {disc:.3f} | {conn - disc:+.3f} | {'yes' if conn > disc else 'no'} |")
display(Markdown("| distribution | connected (mean) | disconnected (mean) | difference | connected higher? |\n"
                 "|---|---|---|---|---|\n" + "\n".join(checks)))

# %% [markdown]
# ## Training curves
#
# The query loss falls for every distribution — disconnected students fit their training tasks too — while
# the alignment separates: only a connected support forces the student's hidden units to line up with the
# teacher's consistently across modules.

# %%
eval_steps = fig2c_out[0]["eval_steps"]
plots.training_curves({lab: o["steps/loss"] for lab, o in zip(labels, fig2c_out)}, eval_steps,
                      {lab: o["eval/alignment"] for lab, o in zip(labels, fig2c_out)}, labels,
                      caption(fig2c[0], "Training loss and module alignment, mean over seeds"))
plt.show()

# %% [markdown]
# ## Fig. 2D — how much overparameterisation?
#
# The theorem needs the student to be no larger than the teacher. In practice a little overparameterisation
# helps optimisation; too much lets the student fit discrete tasks without identifying the modules, while
# continuous tasks, which fill the span of each mask, keep it honest. The support is one-hots plus ring pairs
# (the authors' code uses it for both distributions), no weight decay.

# %%
fig2d = ts.fig2d_configs(preset, **overrides)
fig2d_out = ts.run(fig2d, force=force)
factors = ts.get_preset(preset).overparam_factors
by_distribution = {d: np.stack([ts.final_alignment(o) for c, o in zip(fig2d, fig2d_out) if c.distribution == d])
                   for d in ("discrete", "continuous")}
plots.fig2d_overparameterisation(factors, by_distribution, base.teacher_hidden, base.n_modules,
                                 caption(fig2d[0], "Fig. 2D: alignment against student size"))
plt.show()
display(Markdown(ts.summarize(fig2d, fig2d_out)))

# %%
sizes = np.array([fh * fm for fh, fm in factors])
mild, large = sizes <= 4, sizes > 4
rows = []
for d, values in by_distribution.items():
    a, b = values[mild].mean(), values[large].mean()
    rows.append(f"| {d} | {a:.3f} | {b:.3f} | {b - a:+.3f} |")
display(Markdown("| distribution | mean alignment, factors ≤ 2× | beyond 2× | change |\n|---|---|---|---|\n"
                 + "\n".join(rows)))

# %% [markdown]
# The paper's claim: alignment drops beyond about 2× for **discrete** tasks and stays high for **continuous**
# ones, so the "change" column should be clearly negative for discrete and near zero for continuous.
# The claim is about converged students (60,000 steps of 64 tasks, each inferring $\hat z$ with 300 Adam steps
# of 0.003 from the fixed $\hat z_0$). A larger student also learns faster, so at `quick`'s budget a positive
# change for both distributions is what to expect. Training longer with `quick`'s inner loop does not bring
# the paper's drop either: in a probe at 16,000 outer steps (4× `quick`, seeds 100–102) the (8, 8) students
# reached an alignment of 0.984 on discrete tasks (0.969–0.997 over seeds) and 0.869 on continuous ones,
# against 0.847 and 0.818 for (2, 2). Our guess, not tested: the paper's inner loop moves each coordinate of
# $\hat z$ by at most about 0.9 from $\hat z_0$, while `quick`'s cosine from 0.2 moves it by several units,
# and the small reach is what lets a large student fit the twelve discrete tasks without identifying the
# modules. With the paper's reach (50 steps at a constant 0.018) both sizes, (2, 2) and (8, 8), stayed at or
# below 0.504 alignment after 4,000 steps, and at an intermediate reach (a constant 0.05, 8,000 steps) it was
# again the continuous students that lost alignment at (8, 8): 0.646 against 0.829 for discrete ones (at
# (2, 2): 0.875 continuous, 0.665 discrete). Testing the guess needs the paper's full budget: run `paper` on
# a GPU. The 16,000-step probe, in Python:
# `ts.run([ts.make_config("quick", masks=ts.OVERPARAM_MASKS, distribution=d, hidden_factor=8, module_factor=8,
# outer_steps=16000, eval_every=4000) for d in ("discrete", "continuous")])`.
#
# ## Table A1 — weight decay does not rescue overparameterised discrete students
#
# The paper's four columns are overparameterised students whose sizes were lost in extraction (we do not
# know which factors they are; `paper` uses $(f_h, f_M) \in \{(4,4), (4,8), (8,4), (8,8)\}$ as a guess).
# Decoupled weight decay is multiplied by the learning rate, as in `optax.adamw`.

# %%
p = ts.get_preset(preset)
table = ts.table_a1_configs(preset, **overrides)
table_out = ts.run(table, force=force)
lines = ["| weight decay | " + " | ".join(f"ours ({c.student_hidden}, {c.student_modules})"
                                          for c in table[:len(p.table_a1_factors)]) + " | paper (4 columns) |",
         "|---|" + "---|" * (len(p.table_a1_factors) + 1)]
for r, wd in enumerate(p.table_a1_weight_decays):
    cells = [ts.mean_std(ts.final_alignment(table_out[r * len(p.table_a1_factors) + j]))
             for j in range(len(p.table_a1_factors))]
    paper_row = ts.PAPER_TABLE_A1.get(wd)
    lines.append(f"| {wd:g} | " + " | ".join(cells) + " | "
                 + (" · ".join(f"{v:.4f}" for v in paper_row) if paper_row else "–") + " |")
display(Markdown("\n".join(lines)))
print(caption(table[0], "Table A1: final module alignment, mean ± std over seeds"))

# %% [markdown]
# Every entry should stay well below the connected, mildly overparameterised students of Fig. 2C, with no
# systematic gain from weight decay — the paper's reading of its Table A1 (alignments 0.67–0.85).
