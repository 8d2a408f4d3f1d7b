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
# # In-context learners on the same compositional tasks
#
# The paper's learners infer a task by *gradient descent*: an inner loop adapts a few fast parameters on the
# support set. A different family of meta-learners infers the task *in context*: a network reads the
# support examples and answers the queries in one forward pass, with no inner loop at test time. Lake's meta
# seq2seq {cite}`lake2019compositional` learns compositional rules this way from a memory of the support
# examples, and Kobayashi et al. (2024, *When can transformers compositionally generalize in-context?*,
# [arXiv:2407.12275](https://arxiv.org/abs/2407.12275)) report that a transformer learning in context
# generalises compositionally only when a bottleneck separates *task inference* from *task execution*. This
# chapter is not part of {cite}`schug2024modular`: it puts three in-context learners on exactly the
# hyperteacher tasks of the [hyperteacher chapter](hyperteacher) and on exactly the goals of the
# [compositional-goals chapter](goals), and compares them with the four models of each.
#
# **Learners** (`compgen.models.incontext`), trained episodically by AdamW on the mean query KL of the same
# stream of training tasks:
#
# | learner | reads the support set as | answers a query with |
# |---|---|---|
# | KV memory (meta seq2seq) | keys = MLP(support input), values = MLP(support target) | multi-head attention of the query's encoding over the keys, then an MLP decoder on [query, retrieved value] |
# | Transformer | tokens $[x, y, 1]$, full self-attention among them | a query token $[x, 0, 0]$ that attends to the support tokens and to itself (never to other queries) |
# | Bottleneck transformer + hnet | the same encoder, mean-pooled into a low-dimensional task code $c$ | the paper's linear hypernetwork: the code sets its chunk embeddings, which generate an MLP that maps the query |
#
# None has a positional encoding, so each is invariant to the order of the support examples (tested in
# `tests/test_incontext.py`), and none is given query targets. The bottleneck learner is the paper's linear
# hypernetwork with its inner loop replaced by an amortised encoder: its queries see the support set only
# through $c$.
#
# **Same tasks.** For each seed the in-context learners get the teacher, task split, training tasks (same
# order) and fixed evaluation tasks (same support and query points) of the hyperteacher chapter's runs; the
# four paper models are read from the results store through that chapter's `run(configs)` (and trained if
# absent).

# %% tags=["parameters"]
preset = "quick"  # smoke | quick | paper
force = False  # recompute even if the results store holds these runs
seeds = None  # None: the preset's seeds; e.g. [2020] for a faster look
workers = None  # processes that train missing runs; None: one per CPU core (1 on an accelerator)

# %%
import jax
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Markdown, display

from compgen import models, plots
from compgen.experiments import goals as G
from compgen.experiments import goals_presets as GP
from compgen.experiments import hyperteacher as HT
from compgen.experiments import hyperteacher_presets as H
from compgen.experiments import hyperteacher_summary as S
from compgen.experiments import incontext as IC
from compgen.experiments import incontext_presets as P
from compgen.experiments import mean_std

overrides = {} if seeds is None else {"seeds": tuple(seeds)}
p = P.get_preset(preset)
icl = P.comparison_configs(preset, **overrides)
paper_models = P.paper_model_configs(preset, **overrides)
reference = icl[0]

LABELS = {**H.MODEL_LABELS, **P.MODEL_LABELS}
ORDER = list(H.MODELS) + list(P.MODELS)
n_params = {c.model: models.count_params(c.build_model().init(jax.random.key(0))) for c in paper_models}
n_params.update({c.model: IC.count_params(c) for c in icl})
steps = {c.model: c.outer_steps for c in paper_models + icl}
rows = [f"| {LABELS[m]} | {'in context' if m in P.MODELS else 'inner loop'} | {n_params[m]:,} | {steps[m]:,} |"
        for m in ORDER]
display(Markdown(
    f"**Preset `{preset}`** ({p.description}): M = {reference.n_modules}, K = {reference.max_hot}, teacher hidden "
    f"{reference.teacher_hidden}, {reference.shots_support} + {reference.shots_query} shots, {reference.meta_batch} "
    f"tasks per step, seeds {', '.join(map(str, reference.seeds))}. In-context learners: d_model {reference.d_model}, "
    f"{reference.num_layers} layer(s), {reference.num_heads} heads, task code {reference.code_dim}-dimensional, "
    f"outer lr {reference.outer_lr} ({reference.outer_schedule}).\n\n"
    "| model | task inference | parameters | outer steps |\n|---|---|---|---|\n" + "\n".join(rows)))


def caption(cfgs, what):
    """Figure caption: preset, M and K, outer steps per model, tasks per step and seeds of ``cfgs``."""
    return plots.runs_caption(what, preset, cfgs, LABELS, [
        f"M = {plots.joined(c.n_modules for c in cfgs)}", f"K = {plots.joined(c.max_hot for c in cfgs)}",
        f"{plots.joined(c.meta_batch for c in cfgs)} tasks/step"])


# %% [markdown]
# ```{admonition} How the presets depart from the paper
# :class: note
# The in-context learners copy the task setup of the hyperteacher preset of the same name. `paper` uses the
# paper's Fig. 3B setting ($M = 8$, $K = 2$, 256 + 256 shots, 128 tasks per step, 200,000 steps, three seeds)
# with learners sized to the range of the paper's models (the table of models above counts the parameters at
# the preset that was run); unlike those it uses a warm-up + cosine learning-rate schedule, as transformers
# usually need.
# `quick` is the hyperteacher chapter's `quick` setting: $M = 4$ experts, $K = 4$, a teacher with 16 hidden
# units, 64 + 64 shots, 16 tasks per step, 2,000 steps (warm-up 100 + cosine; the linear hypernetwork gets
# 4,000 steps with half the inner steps, as in the hyperteacher chapter), three seeds, and small learners
# (memory and transformer: $d_\text{model} = 64$, 2 layers; bottleneck: a 16-dimensional code and a
# hypernetwork with $T = 16$ modules generating a 3 × 32 MLP). No hyper-parameter of the in-context learners
# was tuned; the paper models' were (by the paper, and for `quick` by the hyperteacher chapter). Transformers
# are known to need many more steps than 2,000 to learn in context, so `quick` can show an ordering at a small
# budget, not what the learners reach eventually.
# ```
#
# ## Training
#
# Each learner's seeds and both splits train in one compiled program (`jax.vmap` over runs, `lax.scan` over
# steps); stored runs are loaded instead.

# %%
icl_outputs = dict(zip(icl, IC.run(icl, force=force, workers=workers)))
paper_outputs = dict(zip(paper_models, HT.run(paper_models, force=force, workers=workers)))
outputs = {**icl_outputs, **paper_outputs}
configs = paper_models + icl

# %% [markdown]
# ## OOD accuracy next to the paper's four models
#
# The query accuracy on held-out task combinations (OOD) under compositional (random) support, where every
# expert appears in training, and under non-compositional support, where the last expert of the second
# generated layer never does. Chance is 12.5 %.

# %%
splits = P.SPLITS
cfg_of = {(c.model, c.split): c for c in configs}
values = [[S.final_accuracy(cfg_of[(m, s)], outputs[cfg_of[(m, s)]]) for s in splits] for m in ORDER]
plots.grouped_bars(["compositional (random)", "non-compositional"], [LABELS[m] for m in ORDER], values,
                   "OOD accuracy (%)", caption(configs, "OOD accuracy of inner-loop and in-context learners"),
                   ylim=(0, 100), reference=12.5, reference_label="chance")
plt.show()
lines = ["| model | parameters | test acc. (compositional) | OOD acc. (compositional) | gap | OOD acc. (non-comp.) |",
         "|---|---|---|---|---|---|"]
mean = {}
for m in ORDER:
    c = cfg_of[(m, "random")]
    test, ood = S.final_accuracy(c, outputs[c], "test"), S.final_accuracy(c, outputs[c])
    nonc = S.final_accuracy(cfg_of[(m, "non_compositional")], outputs[cfg_of[(m, "non_compositional")]])
    mean[m] = {"test": np.mean(test), "ood": np.mean(ood), "gap": np.mean(test - ood), "nonc": np.mean(nonc),
               "ood_seeds": ood}
    lines.append(f"| {LABELS[m]} | {n_params[m]:,} | {mean_std(test, 1)} | {mean_std(ood, 1)} | "
                 f"{mean_std(test - ood, 1)} | {mean_std(nonc, 1)} |")
display(Markdown("\n".join(lines)))

# %% [markdown]
# Three questions, answered from the numbers above:
#
# 1. Does the bottleneck help? Kobayashi et al.'s finding predicts a higher OOD accuracy under compositional
#    support for the bottleneck learner than for the plain transformer.
# 2. Do the in-context learners generalise to new combinations as well as to new tasks of known
#    combinations? A small test–OOD gap says yes.
# 3. How do they compare with the paper's learners, in particular the hypernetworks?

# %%
best_hnet = max(("hnet_linear", "hnet_deepmlp"), key=lambda m: mean[m]["ood"])
best_icl = max(P.MODELS, key=lambda m: mean[m]["ood"])
bottleneck_lead = mean["bottleneck"]["ood_seeds"] - mean["transformer"]["ood_seeds"]
seed_wins = int(np.sum(bottleneck_lead > 0))
findings = [
    f"- **Bottleneck vs. transformer (compositional OOD):** {mean['bottleneck']['ood']:.1f} % vs. "
    f"{mean['transformer']['ood']:.1f} % ({np.mean(bottleneck_lead):+.1f} points; the bottleneck is ahead on "
    f"{seed_wins} of {len(bottleneck_lead)} seeds, paired by seed as both saw the same tasks).",
    "- **Generalisation gaps (test − OOD, compositional):** " + ", ".join(
        f"{LABELS[m]} {mean[m]['gap']:+.1f}" for m in ORDER) + " points.",
    f"- **Best in-context learner vs. best hypernetwork:** {LABELS[best_icl]} {mean[best_icl]['ood']:.1f} % vs. "
    f"{LABELS[best_hnet]} {mean[best_hnet]['ood']:.1f} % OOD accuracy.",
    "- **Non-compositional support** (OOD accuracy drop from the compositional split): " + ", ".join(
        f"{LABELS[m]} {mean[m]['ood'] - mean[m]['nonc']:+.1f}" for m in ORDER) + " points.",
]
display(Markdown("\n".join(findings)))
if not (mean["bottleneck"]["ood"] > mean["transformer"]["ood"] and seed_wins == len(bottleneck_lead)):
    display(Markdown(f"**Not reproduced at preset `{preset}`:** the bottleneck learner is not ahead of the plain "
                     "transformer on every seed under compositional support, which Kobayashi et al.'s finding "
                     "predicts; at this budget (see the curves below) the learners may still be far from "
                     "converged, and a small budget favours whichever architecture learns fastest, not the one "
                     "that generalises best."))
else:
    display(Markdown(f"At preset `{preset}` the bottleneck learner is ahead of the plain transformer on every seed "
                     "under compositional support, as Kobayashi et al. find."))

# %% [markdown]
# ## Is the task code linearly decodable?
#
# As in Fig. 3C/D, a ridge decoder (λ = 1, intercept, 10 conjugate-gradient steps) is fitted from a task
# representation to the ground-truth task code $z \in \{0,1\}^{2M}$ on in-distribution (`test`) tasks and
# scored by its $R^2$ on OOD tasks, pooled over the $2M$ entries. For the bottleneck learner the
# representation is its task code $c$, the only path from the support set to the queries; for the transformer
# it is the mean of its last-layer support tokens, for the memory the mean of its keys and values (crude
# summaries: these learners need not carry the task in a pooled vector). For the hypernetworks it is their
# adapted embeddings, as in the previous chapter.

# %%
r2_models = ["hnet_linear", "hnet_deepmlp"] + list(P.MODELS)
r2 = {(m, s): S.final_r2(outputs[cfg_of[(m, s)]]) for m in r2_models for s in splits}
plots.grouped_bars(["compositional", "non-compositional"], [LABELS[m] for m in r2_models],
                   [[r2[(m, s)] for s in splits] for m in r2_models], "R² of decoding z on OOD tasks",
                   caption([cfg_of[(m, s)] for m in r2_models for s in splits], "Linear decodability of the task code"),
                   ylim=(min(-0.5, min(np.min(v) for v in r2.values()) - 0.05), 1.05), reference=0.0)
plt.show()
lines = ["| model | representation (dimension) | R² OOD, compositional | R² OOD, non-compositional "
         "| R² test (fit), compositional |", "|---|---|---|---|---|"]
dims = {"hnet_linear": "adapted embeddings + bias", "hnet_deepmlp": "adapted embeddings",
        "kv_memory": f"mean key and value ({2 * reference.d_model})",
        "transformer": f"mean support token ({reference.d_model})", "bottleneck": f"task code ({reference.code_dim})"}
for m in r2_models:
    fit = np.asarray(outputs[cfg_of[(m, "random")]]["eval/r2_test_pooled"])[:, -1]
    lines.append(f"| {LABELS[m]} | {dims[m]} | {mean_std(r2[(m, 'random')], 2)} | "
                 f"{mean_std(r2[(m, 'non_compositional')], 2)} | {mean_std(fit, 2)} |")
display(Markdown("\n".join(lines)))
r_b = {s: np.mean(r2[("bottleneck", s)]) for s in splits}
display(Markdown(
    f"The bottleneck's code decodes to $z$ with $R^2$ = {r_b['random']:.2f} on OOD tasks under compositional support "
    f"and {r_b['non_compositional']:.2f} under non-compositional support. "
    + ("As for the hypernetworks in Fig. 3C, the code of new combinations is linearly related to their ground truth "
       "only when the support was compositional." if r_b["random"] > max(0.5, r_b["non_compositional"]) else
       f"**Not reproduced at preset `{preset}`:** the code is not (yet) a good linear read-out of $z$ on new "
       "combinations, so this run cannot say whether the bottleneck identifies the modules.")))

# %% [markdown]
# ## Training curves
#
# Test (in-distribution) and OOD accuracy of the in-context learners over training, mean over seeds with the
# range shaded; the paper models' curves are in the previous chapter.

# %%
curves = {}
for c in icl:
    out, names = outputs[c], c.eval_set_names()
    curves[f"{LABELS[c.model]}, {c.split}"] = (
        out["eval_steps"], {s: 100 * np.asarray(out["eval/accuracy"])[:, :, names.index(s)] for s in ("test", "ood")})
plots.accuracy_curves(curves, caption(icl, "Accuracy of the in-context learners during training"), chance=12.5)
plt.show()
skipped = {f"{LABELS[c.model]}, {c.split}": int(np.asarray(outputs[c]["steps/skipped"])[:, -1].max()) for c in icl}
print("outer updates skipped because of a non-finite gradient (max over seeds):",
      {k: v for k, v in skipped.items() if v} or "none")

# %% [markdown]
# ## The compositional-goals world
#
# The same three learners on the grid world of the [goals chapter](goals) (§4.3): a task is a goal
# (quadrant, interaction, maze, object type), the support set is one demonstration of it (a shortest path to
# the goal object, then the goal's interaction), and the learner must predict the optimal action at every
# step of a demonstration on a new instance of the goal. In context this reads:
#
# - **support tokens** are the steps of the support demonstrations, $[\text{observation } (847),
#   \text{one-hot optimal action } (6), 1]$. Demonstrations are padded after the interaction; padded steps are
#   masked out: they enter no attention and no mean, so neither their content nor their number changes a
#   prediction (tested in `tests/test_incontext.py`);
# - **queries** are the observations of the query demonstration, each step answered on its own;
# - **loss and metrics** are the goals chapter's: the cross-entropy with the optimal action over the unpadded
#   steps, and the step accuracy per trajectory.
#
# For each seed the learners see that chapter's mazes, goal split, training goals (same order) and evaluation
# goals with the same demonstrations; the four paper models are its Fig. 4E/F runs, read from the results store
# through its `run(configs)` (and trained if absent). Compositional support is the random split (50 of the 200
# goals held out, every value of every factor seen in training); non-compositional support holds out every goal
# in the bottom-right quadrant.

# %%
goals_icl = P.goals_comparison_configs(preset, **overrides)
goals_paper = P.paper_model_configs(preset, environment="goals", **overrides)
goals_outputs = {**dict(zip(goals_icl, IC.run(goals_icl, force=force, workers=workers))),
                 **dict(zip(goals_paper, G.run(goals_paper, force=force, workers=workers)))}
goals_cfg = {(c.model, c.split): c for c in goals_paper + goals_icl}
GOALS_LABELS = {**GP.MODEL_LABELS, **P.MODEL_LABELS}
GOALS_ORDER = list(GP.MODELS) + list(P.MODELS)
goals_params = {m: models.count_params(jax.eval_shape(goals_cfg[(m, "random")].build_model().init,
                                                      jax.random.key(0))) for m in GOALS_ORDER}
g = goals_icl[0]
display(Markdown(
    f"**Goals preset `{preset}`** ({P.get_preset(preset, 'goals').description}): the goals chapter's task setup "
    f"({g.shots_support} + {g.shots_query} demonstrations padded to {g.demo_length} steps, {g.meta_batch} tasks per "
    f"step, {g.outer_steps:,} steps, {g.eval_tasks} evaluation goals per set, seeds {', '.join(map(str, g.seeds))}). "
    f"In-context learners: d_model {g.d_model}, {g.num_layers} layer(s), {g.num_heads} heads, task code "
    f"{g.code_dim}-dimensional; the bottleneck generates the MLP of the goals chapter's linear hypernetwork "
    f"({g.hnet_num_hidden} × {g.hnet_hidden}, T = {g.n_templates}); outer lr {g.outer_lr} ({g.outer_schedule}, "
    f"warm-up {g.warmup_steps} steps). No hyper-parameter of the in-context learners was tuned."))


def goals_final(model, split, set_name="ood"):
    """Step accuracy (%) at the last evaluation, one value per seed."""
    return 100 * np.asarray(goals_outputs[goals_cfg[(model, split)]]["eval/acc"])[:, -1, G.EVAL_SETS.index(set_name)]


def goals_caption(cfgs, what):
    """Figure caption: preset, tasks per step, demonstration length, outer steps per model and seeds of ``cfgs``."""
    return plots.runs_caption(what, preset, cfgs, GOALS_LABELS, [
        "goals world", f"{plots.joined(c.meta_batch for c in cfgs)} tasks/step",
        f"{plots.joined(c.shots_support for c in cfgs)} support demonstration(s) padded to "
        f"{plots.joined(c.demo_length for c in cfgs)} steps"])


goals_acc = {(m, s): goals_final(m, s) for m in GOALS_ORDER for s in splits}
plots.grouped_bars(["compositional (random)", "non-compositional (quadrant held out)"],
                   [GOALS_LABELS[m] for m in GOALS_ORDER], [[goals_acc[(m, s)] for s in splits] for m in GOALS_ORDER],
                   "OOD step accuracy (%)",
                   goals_caption(goals_paper + goals_icl, "OOD step accuracy on new goals (bars: mean over seeds, "
                                                          "dots: single seeds)"),
                   ylim=(0, 100), reference=100 / 6, reference_label="uniform guess (1 of 6 actions)")
plt.show()
lines = ["| model | task inference | parameters | test acc. (compositional) | OOD acc. (compositional) | gap "
         "| OOD acc. (non-comp.) | drop | R² of the goal (OOD, compositional) |",
         "|---|---|---|---|---|---|---|---|---|"]
goals_mean = {}
for m in GOALS_ORDER:
    test, ood, nonc = goals_final(m, "random", "test"), goals_acc[(m, "random")], goals_acc[(m, "non_compositional")]
    goals_mean[m] = {"test": np.mean(test), "ood": np.mean(ood), "gap": np.mean(test - ood), "nonc": np.mean(nonc),
                     "drop": np.mean(ood) - np.mean(nonc), "ood_seeds": ood}
    out = goals_outputs[goals_cfg[(m, "random")]]
    r2_text = mean_std(S.final_r2(out), 2) if "eval/r2_ood_pooled" in out else "–"
    lines.append(f"| {GOALS_LABELS[m]} | {'in context' if m in P.MODELS else 'inner loop'} | {goals_params[m]:,} | "
                 f"{mean_std(test, 1)} | {mean_std(ood, 1)} | {mean_std(test - ood, 1)} | {mean_std(nonc, 1)} | "
                 f"{goals_mean[m]['drop']:+.1f} | {r2_text} |")
display(Markdown("Step accuracy in % (mean ± std over seeds); *gap* = test − OOD under compositional support, "
                 "*drop* = compositional − non-compositional OOD accuracy. R²: a ridge decoder from the learner's "
                 "task representation to the goal (one one-hot per factor, 16 entries), fitted on test goals and "
                 "scored on OOD goals (the goals chapter probes no paper model).\n\n" + "\n".join(lines)))

# %%
best_goals_icl = max(P.MODELS, key=lambda m: goals_mean[m]["ood"])
best_goals_paper = max(GP.MODELS, key=lambda m: goals_mean[m]["ood"])
lead = goals_mean[best_goals_icl]["ood"] - goals_mean[best_goals_paper]["ood"]
bottleneck_vs = goals_mean["bottleneck"]["ood_seeds"] - goals_mean["transformer"]["ood_seeds"]
icl_drops = [goals_mean[m]["drop"] for m in P.MODELS]
paper_drops = [goals_mean[m]["drop"] for m in GP.MODELS]
gaps = [goals_mean[m]["gap"] for m in GOALS_ORDER]
n_seeds = len(goals_icl[0].seeds)
text = (f"At preset `{preset}` ({goals_icl[0].outer_steps:,} steps of {goals_icl[0].meta_batch} tasks, {n_seeds} "
        f"seed(s)), the best in-context learner under compositional support, {P.MODEL_LABELS[best_goals_icl]} "
        f"({goals_mean[best_goals_icl]['ood']:.1f} % OOD step accuracy), is {abs(lead):.1f} points "
        f"{'above' if lead > 0 else 'below'} the best of the paper's models, {GP.MODEL_LABELS[best_goals_paper]} "
        f"({goals_mean[best_goals_paper]['ood']:.1f} %). The bottleneck learner is {np.mean(bottleneck_vs):+.1f} "
        f"points from the plain transformer (ahead on {int(np.sum(bottleneck_vs > 0))} of {len(bottleneck_vs)} "
        f"seeds). Holding out a quadrant changes the OOD accuracy of the in-context learners by "
        f"{-max(icl_drops):+.1f} to {-min(icl_drops):+.1f} points and that of the paper's models by "
        f"{-max(paper_drops):+.1f} to {-min(paper_drops):+.1f} points.")
if max(abs(g) for g in gaps) < 3:
    text += (f" Under compositional support every learner is about as accurate on new goals as on training goals "
             f"(test − OOD gaps between {min(gaps):+.1f} and {max(gaps):+.1f} points): at this budget none "
             "measurably uses the demonstration to tell goals apart, so these numbers rank how well each learned to "
             "move through the mazes, not how well it generalises compositionally.")
else:
    text += (" Test − OOD gaps under compositional support: " + ", ".join(
        f"{GOALS_LABELS[m]} {goals_mean[m]['gap']:+.1f}" for m in GOALS_ORDER) + " points.")
display(Markdown(text))

# %%
goals_curves = {}
for c in goals_icl:
    out = goals_outputs[c]
    goals_curves[f"{LABELS[c.model]}, {c.split}"] = (
        out["eval_steps"], {s: 100 * np.asarray(out["eval/acc"])[:, :, G.EVAL_SETS.index(s)] for s in ("test", "ood")})
plots.accuracy_curves(goals_curves, goals_caption(goals_icl, "Step accuracy of the in-context learners during "
                                                               "training (mean over seeds, range shaded)"),
                      chance=100 / 6)
plt.show()

# %% [markdown]
# ## What this comparison can and cannot say
#
# The in-context learners and the paper's learners saw the same tasks, but not the same kind of training: the
# paper's models were tuned for the hyperteacher and the goals world (and at `quick` by those chapters) and
# infer each task by ten or more gradient steps, while the in-context learners were not tuned and infer it in one
# pass. At `quick` the budget is four to five orders of magnitude below the paper's, and in-context learning in
# transformers typically emerges late, so a low accuracy here is weak evidence against a learner. The comparison
# is sharper *within* the in-context family, where the three learners share the optimiser, the budget and (for
# the two transformers) the encoder: there the bottleneck is the only difference.
