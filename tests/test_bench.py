"""The bench's comparison with the authors' figures: only plain-process paper cases have one."""

from compgen import bench


def test_authors_figures_belong_to_plain_process_paper_cases_only():
    with_figures = {name for name in bench.CASES if bench.authors(name)}
    assert "hyperteacher hnet_linear paper (M=4, K=2)" in with_figures
    assert "goals anil paper" in with_figures and "preferences hnet_linear paper" in with_figures
    assert not any(name.endswith(bench.SPLIT_SUFFIX) or "quick" in name for name in with_figures)
    assert len(with_figures) == len(bench.AUTHORS)  # every figure of the authors has its case


def test_the_ratio_reads_as_authors_over_ours():
    cells = bench._authors_cells("hyperteacher maml paper (M=4, K=2)", 11.375)
    assert "22.75 (14.7 GB)" in cells and "2.00×" in cells
    assert "–" in bench._authors_cells("hyperteacher maml quick", 1.0)
