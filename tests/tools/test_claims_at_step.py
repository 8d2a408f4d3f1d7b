"""The shorter-budget tool: claims read from the evaluations up to a step, and only where a shorter run is the first
part of a longer one."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from compgen import params
from compgen.analysis import claims as C
from compgen.analysis import goals as A

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("claims_at_step", ROOT / "tools" / "claims_at_step.py")
claims_at_step = importlib.util.module_from_spec(spec)
sys.modules["claims_at_step"] = claims_at_step
spec.loader.exec_module(claims_at_step)


def _lead_from(step_index, fake):
    """Outputs with evaluations at steps 0, 1000, 2000 where the hypernetworks lead by 10 points only at the last."""

    def outputs(cfg):
        n, hnet = len(cfg.seeds), cfg.model.startswith("hnet")
        out = fake(cfg, {}, evals=3, steps=1000)
        acc = np.full((n, 3, len(cfg.eval_set_names())), 0.6)
        acc[:, step_index:] += 0.1 * hnet
        out["eval/acc"], out["eval/acc_all"] = acc, acc / 2
        return out

    return outputs


def test_claims_read_the_evaluations_up_to_the_step(runs_of, fake):
    runs = runs_of("goals", "quick", _lead_from(2, fake))
    assert claims_at_step.shared_steps(runs) == [1000, 2000]
    early = claims_at_step.truncated(runs, 1500)
    cfg = next(c for c in runs.outputs if runs.outputs[c] is not None)
    assert list(early.outputs[cfg]["eval_steps"]) == [0, 1000] and early.outputs[cfg]["eval/acc"].shape[1] == 2
    assert runs.outputs[cfg]["eval/acc"].shape[1] == 3  # the stored runs are left as they are
    lead = lambda r: {c.verdict for c in A.claims(r) if c.figure == "Fig. 4E"}
    assert lead(early) == {C.NOT_REPRODUCED} and lead(claims_at_step.truncated(runs, 2000)) == {C.HOLDS}


def test_a_decaying_schedule_is_refused(runs_of, fake):
    claims_at_step.check_constant_schedule(runs_of("goals", "quick", lambda c: None))
    with pytest.raises(params.ParameterError, match="outer_schedule must be 'constant'.*warmup_cosine"):
        claims_at_step.check_constant_schedule(runs_of("preferences", "quick", lambda c: None))
