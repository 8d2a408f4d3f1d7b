"""Metrics: losses, module alignment (paper §3.3) and linear decodability R² (App. C.1, paper §4.1)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def half_mse(prediction, target):
    """½ · mean squared error over all entries (the theory section's loss, App. C.1)."""
    return 0.5 * jnp.mean((prediction - target) ** 2)


def relative_population_loss(prediction, target):
    """½ · MSE / mean squared target, over everything (``relative_wrt_population_loss``)."""
    return 0.5 * jnp.mean((prediction - target) ** 2) / jnp.mean(target**2)


def ridge_fit(features, targets, lam, cg_iters=None, intercept=False, penalise_intercept=False):
    """Ridge regression ``targets ≈ features @ W (+ b)``: features (N, D), targets (N, K).

    Solves ``(XᵀX + λP) W = Xᵀ y``: exactly when ``cg_iters`` is None, otherwise by that many
    conjugate-gradient iterations from zero (the authors' code uses 10), with matrix-vector products
    only, so D may be large. With ``intercept`` the features get a constant column, penalised only
    if ``penalise_intercept`` (the hyperteacher probe, paper §4.1). Returns ``(W (D, K), b (K,))``.
    """
    n, d = features.shape
    x = jnp.concatenate([features, jnp.ones((n, 1))], axis=1) if intercept else features
    penalty = jnp.ones(x.shape[1])
    if intercept and not penalise_intercept:
        penalty = penalty.at[-1].set(0.0)
    rhs = x.T @ targets
    if cg_iters is None:
        if x.shape[1] <= n or not jnp.all(penalty > 0):
            solution = jnp.linalg.solve(x.T @ x + lam * jnp.diag(penalty), rhs)
        else:  # dual form: W = Xᵀ (XXᵀ + λI)⁻¹ y, cheaper when D > N
            solution = x.T @ jnp.linalg.solve(x @ x.T + lam * jnp.eye(n), targets)
    else:
        operator = lambda w: x.T @ (x @ w) + lam * penalty[:, None] * w
        solution, _ = jax.scipy.sparse.linalg.cg(operator, rhs, x0=jnp.zeros_like(rhs), maxiter=cg_iters, tol=0.0)
    if intercept:
        return solution[:d], solution[d]
    return solution, jnp.zeros(targets.shape[1])


def _r2(ss_res, ss_tot, n, scale):
    """1 − ss_res / ss_tot, NaN where the target has no variance to explain (:func:`r2_score`)."""
    rounding = n * (64 * jnp.finfo(ss_tot.dtype).eps) ** 2 * scale  # what a constant's round-off can leave
    defined = (n >= 2) & jnp.isfinite(ss_tot) & (ss_tot > rounding)
    return jnp.where(defined, 1.0 - ss_res / jnp.where(defined, ss_tot, 1.0), jnp.nan)


def r2_score(prediction, target):
    """Coefficient of determination per output column: (N, K) -> (K,).

    NaN where a column is degenerate - constant (up to round-off), not finite, or fewer than 2 samples: there is
    no variance to explain, so R² is undefined (never ±inf); figures average the defined columns.
    """
    ss_res = jnp.sum((target - prediction) ** 2, axis=0)
    ss_tot = jnp.sum((target - target.mean(axis=0)) ** 2, axis=0)
    return _r2(ss_res, ss_tot, target.shape[0], jnp.max(target**2, axis=0))


def linear_decoding(
    train_features,
    train_targets,
    test_features,
    test_targets,
    lam,
    cg_iters=None,
    intercept=False,
    penalise_intercept=False,
):
    """Fit a ridge decoder on one set and score it on another.

    Returns ``(r2 (K,), weights (D, K))``: the R² of each target column on the test set and the
    decoder, so that ``targets ≈ features @ weights``.
    """
    weights, bias = ridge_fit(train_features, train_targets, lam, cg_iters, intercept, penalise_intercept)
    return r2_score(test_features @ weights + bias, test_targets), weights


def pooled_r2(prediction, target):
    """R² pooled over columns, 1 - Σ SS_res / Σ SS_tot: defined even when some column is constant (NaN when
    every column is, as in :func:`r2_score`)."""
    ss_res = jnp.sum((target - prediction) ** 2)
    ss_tot = jnp.sum((target - target.mean(axis=0)) ** 2)
    return _r2(ss_res, ss_tot, target.shape[0], jnp.max(target**2))


def effective_dimensions(features):
    """How many directions the rows of ``features`` (N, D) differ in: the participation ratio of their covariance
    spectrum, (Σλ)² / Σλ², from 1 (one direction carries all the variance) to D (all carry the same): ()."""
    spectrum = jnp.linalg.svd(features - features.mean(0), compute_uv=False) ** 2
    return spectrum.sum() ** 2 / jnp.maximum(jnp.sum(spectrum**2), jnp.finfo(spectrum.dtype).tiny)


def nonaffine_share(latents, features):
    """Share of the variance of ``features`` (N, D) that no affine function of ``latents`` (N, K) explains:
    1 − pooled R² of the least-squares fit ``features ≈ latents @ A + b``; 0 when the fit is exact, NaN when the
    features are constant: ()."""
    design = jnp.concatenate([latents, jnp.ones((latents.shape[0], 1), latents.dtype)], axis=1)
    coefficients = jnp.linalg.lstsq(design, features)[0]
    return 1.0 - pooled_r2(design @ coefficients, features)


def _unit(v, axis):
    return v / jnp.maximum(jnp.linalg.norm(v, axis=axis, keepdims=True), 1e-12)


def module_alignment(teacher_modules, student_modules, decoder):
    """Module alignment ``A`` of paper §3.3 (key ``template_alignment_all_mean``).

    teacher_modules (M, n, h), student_modules (T, n, ĥ), decoder F (M, T) with ``z ≈ F ẑ``.
    The student modules are expressed in teacher coordinates with ``P = pinv(F)``; for each teacher
    unit ``i`` and student unit ``j`` the cosines of their per-module incoming weights are averaged
    over modules; ``A`` is the mean over ``i`` of the (signed) max over ``j``. ``A = 1`` means the
    student's modules are a linear re-mixing of the teacher's, up to a permutation of hidden units.
    """
    remix = jnp.linalg.pinv(decoder)  # (T, M)
    in_teacher_coords = jnp.einsum("km,knj->mnj", remix, student_modules)  # (M, n, ĥ)
    cosines = jnp.einsum("mni,mnj->mij", _unit(teacher_modules, 1), _unit(in_teacher_coords, 1))
    return jnp.mean(jnp.max(jnp.mean(cosines, axis=0), axis=1))


def linear_probe(fit_features, fit_targets, eval_features, eval_targets, lam, cg_iters=None):
    """Linear decodability of a task latent from a learner's task representation (paper §4.1).

    A ridge decoder with a penalised intercept is fitted on ``fit_features`` (N, D) -> ``fit_targets`` (N, K)
    (the in-distribution tasks) and scored on the ``eval`` set (the OOD tasks). Returns ``{"r2": (K,) R² per
    latent entry on the eval set, "r2_pooled": () R² pooled over entries on the eval set, "r2_fit_pooled": ()
    pooled on the fit set}``; pooled R² stays defined when an entry is constant on a set.
    """
    weights, bias = ridge_fit(fit_features, fit_targets, lam, cg_iters, intercept=True, penalise_intercept=True)
    prediction = eval_features @ weights + bias
    return {
        "r2": r2_score(prediction, eval_targets),
        "r2_pooled": pooled_r2(prediction, eval_targets),
        "r2_fit_pooled": pooled_r2(fit_features @ weights + bias, fit_targets),
    }
