"""A comparison as the book words it: the learner's claims, then the paper's hypernetworks', and one sentence."""

from compgen.analysis import claims as C
from compgen.analysis.compare import Comparison
from compgen.figures import compare

SPEC = C.ClaimSpec(
    "hyperteacher",
    "Fig. 3B",
    "{model}: higher OOD accuracy than ANIL and MAML",
    "a criterion",
    id="fig3b/{model}",
    reads=("fig3b",),
)


def _claim(model, better):
    return SPEC.judge(C.paired(better, [0.0, 0.0], margin=1.0), "ours", (1, 2), model=model)


def test_the_table_and_the_sentence_count_the_learners_claims_against_the_papers(importable):
    own = [_claim("gated_heads", [2.0, 3.0])]
    reference = [_claim("Linear hnet", [2.0, 2.5]), _claim("Nonlinear hnet", [0.1, 0.2])]
    found = Comparison("own_learner:gated_heads", "hyperteacher", "fig3b", "smoke", None, own, reference)
    table = compare.table(found).splitlines()
    assert len(table) == 2 + 3 and "gated_heads: higher OOD accuracy" in table[2] and "Nonlinear hnet" in table[4]
    sentence = compare.summary(found)
    assert "1 of 1 claims hold (Fig. 3B: higher OOD accuracy than ANIL and MAML)" in sentence
    assert "the paper's hypernetworks, on the same runs: 1 of 2." in sentence
