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


def test_paper_cases_run_with_huge_pages_and_a_split_case_with_host_devices(monkeypatch):
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    assert "GLIBC_TUNABLES" not in bench.case_environment("hyperteacher maml quick")
    plain = bench.case_environment("hyperteacher maml paper (M=4, K=2)")
    split = bench.case_environment(f"hyperteacher maml paper (M=4, K=2){bench.SPLIT_SUFFIX}")
    assert "glibc.malloc.hugetlb=1" in plain["GLIBC_TUNABLES"] and "glibc.malloc.hugetlb=1" in split["GLIBC_TUNABLES"]
    assert "host_platform_device_count" in split["XLA_FLAGS"]
    assert "host_platform_device_count" not in plain.get("XLA_FLAGS", "")
