"""Step-time records: the benchmark's cases, and the records of seconds per outer step of ours and the authors'.

A record (``book/records/steps/*.json``, kind ``steps`` of :mod:`compgen.recordfile`) is one code's figures on one
device in one session; :mod:`compgen.bench` measures ours and writes them, the book's appendix
(:mod:`compgen.figures.running`) draws them. This module reads them and names the cases they are keyed by.
"""

from __future__ import annotations

from pathlib import Path

from compgen import records

SHARD_SUFFIX = ", tasks sharded"  # cases run with the meta-batch sharded over one host device per core
CASES = {
    # name: (section, preset, model (None: the section has no models), overrides, the timed chunk's cap on a CPU
    # (chunk_steps), timed chunks)
    "teacher_student paper, 1 run": ("teacher_student", "paper", None, {"seeds": (100,)}, 2, 3),
    f"teacher_student paper, 1 run{SHARD_SUFFIX}": ("teacher_student", "paper", None, {"seeds": (100,)}, 2, 3),
    "teacher_student quick, 1 run": ("teacher_student", "quick", None, {"seeds": (100,)}, 50, 5),
    "teacher_student quick, 3 seeds": ("teacher_student", "quick", None, {}, 20, 3),
}
# The hyperteacher at the configuration of the reference timings (M = 4, K = 2, 128 tasks, 256 + 256 shots)
# and at quick, one seed, for each model.
_HT_PAPER = {"n_modules": 4, "max_hot": 2, "seeds": (2020,)}
# A paper chunk has 2 outer steps on a CPU (a real loop: XLA removes a loop of one step), timed twice but MAML's
# (the slowest step, about 10 s in the hyperteacher), timed once: `make bench` takes about a minute longer than with
# the one-step chunks it timed before.
_PAPER_REPEATS = {"hnet_linear": 2, "hnet_deepmlp": 2, "anil": 2, "maml": 1}
for _model in ("hnet_linear", "hnet_deepmlp", "anil", "maml"):
    _case_args = ("hyperteacher", "paper", _model, _HT_PAPER, 2, _PAPER_REPEATS[_model])
    CASES[f"hyperteacher {_model} paper (M=4, K=2)"] = _case_args
    CASES[f"hyperteacher {_model} paper (M=4, K=2){SHARD_SUFFIX}"] = _case_args
for _model in ("hnet_linear", "hnet_deepmlp", "anil", "maml"):
    CASES[f"hyperteacher {_model} quick"] = ("hyperteacher", "quick", _model, {"seeds": (2020,)}, 20, 3)
# The grid worlds: task generation alone (one meta-batch of tasks with their demonstrations), and one outer step
# per model at the paper configuration and at quick, one seed.
for _section in ("preferences", "goals"):
    for _preset in ("paper", "quick"):
        CASES[f"{_section} task generation, {_preset}"] = (_section, _preset, "tasks", {"seeds": (2020,)}, 5, 5)
    for _model in ("hnet_linear", "hnet_deepmlp", "anil", "maml"):
        CASES[f"{_section} {_model} paper"] = (_section, "paper", _model, {"seeds": (2020,)}, 2, _PAPER_REPEATS[_model])
    for _model in ("hnet_linear", "anil"):
        CASES[f"{_section} {_model} paper{SHARD_SUFFIX}"] = (_section, "paper", _model, {"seeds": (2020,)}, 2, 2)
    for _model in ("hnet_linear", "hnet_deepmlp", "anil", "maml"):
        CASES[f"{_section} {_model} quick"] = (_section, "quick", _model, {"seeds": (2020,)}, 20, 3)
# Step times taken elsewhere (the authors' code on the same machines, our earlier readings) are data records under
# RECORDS/steps/, one file per code, device and session (:func:`step_records`); a run prints those taken on its kind of
# device beside its own rows and, with --record, writes its own. The book's appendix page draws them.
RECORDS = Path("book/records")  # relative to the repository root, where `make bench` runs
COMPARABLE = 0.15  # a CPU ratio is printed only where this run's GEMM is within 15 % of the record's (their spread)


def step_records(folder=None) -> list:
    """The step-time records under ``folder``/steps (default :data:`RECORDS`), oldest first. A record is one code's
    figures on one device in one session: ``who`` ("authors" or "compgen"), ``device`` (a text that the device kind
    of a run on that device contains, case aside: "cpu", "H100"), ``date``, ``code`` (repository@commit), ``how``
    (how it was measured, in words), ``gemm_gflops`` (on a CPU the ``[low, high]`` GEMM readings of that session,
    else ``None``) and ``rows``: ``{key: {"s_per_step", "peak_gb", ...}}``, keyed by the bench's case name (ours) or
    by "section model" (:func:`figure_key`, the authors'); ours also ``code_key`` (:func:`compgen.catalog.code_key`).
    Each is a :class:`compgen.records.Steps`; a damaged one is a one-line :class:`compgen.recordfile.RecordError`."""
    return records.load_folder(records.Steps, Path(RECORDS if folder is None else folder) / "steps")


def on_device(taken: list, who: str, kind: str):
    """The newest of ``taken`` (step-time records, :func:`step_records`) by ``who`` taken on a device of kind ``kind``
    (``jax.devices()[0].device_kind``: "cpu" on any CPU), else ``None``."""
    found = [r for r in taken if r.who == who and r.device.lower() in kind.lower()]
    return found[-1] if found else None


def figure_key(name):
    """Case ``name``'s key in the authors' records ("section model", or the section without models), or ``None`` if
    it is not at the paper configuration (plain, or sharded as ``compgen-cli`` trains a paper run)."""
    section, preset, model = CASES[name][:3]
    return " ".join(filter(None, (section, model))) if preset == "paper" else None


def authors(name, kind="cpu", taken=None):
    """The authors' record on a device of kind ``kind`` and their row for the paper-configuration case ``name``
    (``s_per_step``, ``peak_gb``), else ``None``."""
    record = on_device(step_records() if taken is None else taken, "authors", kind)
    row = None if record is None else record.rows.get(figure_key(name))
    return None if row is None else (record, row)


def earlier(name, kind, taken=None):
    """Our newest record on a device of kind ``kind`` and its row for case ``name``, else ``None``."""
    record = on_device(step_records() if taken is None else taken, "compgen", kind)
    row = None if record is None else record.rows.get(name)
    return None if row is None else (record, row)


def comparable(gemm_gflops, record) -> bool:
    """Whether a run whose GEMM read ``gemm_gflops`` ran on a machine as fast as the one of the CPU ``record``, whose
    GEMM read ``record["gemm_gflops"]`` (low, high) while its figures were taken."""
    low, high = record.gemm_gflops
    return low * (1 - COMPARABLE) <= gemm_gflops <= high * (1 + COMPARABLE)


def record_commit(record) -> str:
    """The short commit of the code a record measured (its ``code``, ``repository@commit``)."""
    return record.code.rpartition("@")[2][:7]
