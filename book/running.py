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
# # Running it yourself
#
# This appendix is for a reader who wants to rebuild the book, change its parameters or run the paper's
# configuration: what each part costs, where the time goes, how fast our code is against the authors' on the same
# machines, what has been checked on a GPU, and the two policies that decide what a run's numbers may depend on
# (precision and identical bytes). Nothing on this page is typed by hand: every table and figure is drawn, when
# the book is built, from a record under `book/records/` that a measurement wrote, and each caption names the
# record, its commit and its date. A record is replaced by measuring again (the command is given with each), so the
# page says what was last measured, not what is true of the code you are reading.

# %% tags=["parameters", "hide-input"]
preset = "quick"  # smoke | quick | paper
force = False  # accepted for a uniform interface; this page trains nothing
seeds = None  # None: the preset's seeds
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

# %% tags=["remove-input"]
from compgen import figures, notebook, steptimes
from compgen.figures import running

notebook.check_parameters(globals())
_book_time = running.load("records/book_time.json")

# %% [markdown]
# ## What the quick book costs
#
# The book is built at the `quick` preset on 2 CPU cores: every claim of the paper that the book tests and every
# control it needs, in smaller worlds and for fewer steps than the paper, within a budget of training time:

# %% tags=["remove-input"]
figures.show(running.budget_policy())

# %% [markdown]
# `make bench` checks it on a book executed
# from an empty results store and fails when a chapter or the book is above it; the record below is the last such
# build, written with `python -m compgen.bench --book book --store <its store> --record`.
#
# The chapters train in one worker process per core, so a chapter's process minutes (the runs' own accounts of
# compiling, setting up, training and evaluating) can exceed its wall minutes. The rest of a notebook's time is
# drawing figures and judging claims. A rebuild loads every stored run instead of training it again, and takes a
# few minutes.

# %% tags=["remove-input"]
figures.show(running.book_cost(_book_time))

# %% [markdown]
# ## Where compilation goes
#
# Each config is one compiled program: its outer steps a `lax.scan`, its seeds and tasks vmapped, its inner loop
# unrolled or scanned as the section writes it. Compilation is paid once per program shape and process, and
# JAX's persistent cache in `_build/jax-cache` lets a second build load most programs instead of compiling them.
# The table lists the longest compilations of the recorded build, each with what sets its run apart from the
# other runs of its section and learner.
#
# What a program holds, not how long it runs, sets its compile time. The outer update, for example, skips a step
# whose gradient or update is not finite everywhere (`compgen.meta.outer_update`); it checks that with one
# reduction over every parameter at once. Checking each parameter array and combining the flags gives the same
# answer, but XLA then copies the chain of flags into the update of every array, so the program grows with the
# square of the number of arrays: a test (`tests/test_meta.py`) keeps it linear.

# %% tags=["remove-input"]
figures.show(running.compile_times(_book_time))

# %% [markdown]
# ## Our outer step against the authors' code
#
# The authors' implementation (`smonsays/modular-hyperteacher`, in JAX with Haiku) and ours were timed at the
# paper's configurations on the same machines: this project's 2-core CPU and one H100. An outer step includes
# drawing its meta-batch of tasks (theirs is sampled by a data loader outside their jitted step, ours inside),
# adapting every task and the meta-gradient. A ratio is given only where both codes were timed in one session on
# one machine: a machine's speed drifts between sessions (on a CPU with its load and its clock), so figures of
# different sessions stay in the table with their dates and are not divided. `make bench` prints the same
# comparison for the machine it runs on and, with `--record`, adds its own reading to `book/records/steps/`.
#
# Two choices of ours matter most on a CPU: a meta-batch of 64 tasks or more is adapted a chunk of tasks at a time
# (`compgen.devices.train_chunk`), so that one chunk's inner loops stay in the caches, and a paper-sized run splits
# its meta-batch over one host device per core (`compgen.devices.shard_tasks`), since XLA runs most of a step's
# small per-task products on one core. Both change float32 round-off at most and are the device's choice, never a
# preset's: a run is stored under its config as given, with the choices in its provenance (`knobs`).

# %% tags=["remove-input"]
figures.show(running.step_times(steptimes.step_records("records")))

# %% [markdown]
# ### Serial work per inner step
#
# On a GPU the inner loop of a paper configuration is too small to fill the device: each inner step waits for its
# operations one after another, so its time is set by how many it executes in sequence rather than by its FLOPs.
# That count is read from the programs themselves, lowered on a CPU: the operations of the lowered program inside
# the inner loop (and, under the meta-gradient, inside its transposed loop), and, as a second count, the
# instructions XLA's optimised CPU program runs there, where one fusion of several operations counts once. Both
# codes are lowered the same way and counted by the same code. `tools/op_counts.py` rewrites the record, and
# `make bench-authors` times the two steps against each other on a CPU, case by case.

# %% tags=["remove-input"]
figures.show(running.serial_work(running.op_counts_record("records")))

# %% [markdown]
# The measurements behind those choices and the device's others, each named by what it set:

# %% tags=["remove-input"]
figures.show(running.device_choices("records/choices.json"))

# %% [markdown]
# ## What the paper's configuration costs
#
# The `paper` preset is the paper's configuration: its worlds, widths, steps and seeds. The table counts, for each
# figure, the configs it trains and their runs (a config trains its seeds together, vmapped, and is stored as one
# entry), and estimates the GPU-hours on one H100 in two ways: from the analytic FLOPs of a step, which is a lower
# bound for the small runs that a GPU cannot fill, and from our measured step time where the bench has timed the
# figure's section and learner. A sweep of the paper (`sweeps/`) trains the same configs with `compgen-cli sweep`,
# one config per GPU of a machine (`--backend devices`) or per task of a Ray cluster (`--backend ray`), and skips
# those already stored.

# %% tags=["remove-input"]
figures.show(running.paper_cost(steptimes.step_records("records")))

# %% [markdown]
# ## On a GPU
#
# The paper's configuration is meant for a GPU: `make execute PRESET=paper`, or one figure with
# `compgen-cli run SECTION FIGURE --preset paper`, after installing the CUDA build of JAX into the virtualenv
# (the README says how). On an accelerator the runner trains the configs of one shape as lanes of one program,
# each still stored under its own key, and the whole meta-batch is adapted at once.
#
# A GPU is lent to this project by chance, minutes at a time, so the paper's runs are a ledger
# (`records/ledger.json`: Fig. 2C first, then the rest of Table A9 and Table A1) that every lease continues with one
# script, `tools/gpu_lease.py`: the device and its versions first, then the ledger's unfinished works, each as lanes
# of one program with a checkpoint after every chunk of steps, until the lease's time is nearly spent; what it
# leaves under `records/paper/` is committed, and the next lease, on any machine, resumes from there. A device
# choice that does not compile within a stated bound (the teacher-student's fused inner loop) gives way to the
# next (the `lax.scan` loop). The paper-scale ledger as it stands:

# %% tags=["remove-input"]
figures.show(running.ledger_table("records/ledger.json", "records/paper"))

# %% [markdown]
# `tools/gpu_check.sh` checks a GPU machine with what a lease leaves, never beside the ledger's runs: the device, a
# compile probe of Fig. 2C's inner loop written both ways, the bench's paper rows, the unit tests and a smoke
# chapter, with nothing but the machine's Python, JAX and the carried wheels of the notebook stack. Each run of it
# leaves a record under `book/records/gpu/`; the checks made so far:

# %% tags=["remove-input"]
figures.show(running.gpu_checks(running.gpu_records("records")))

# %% [markdown]
# **Precision of float32 products.** compgen leaves JAX's matmul precision at the backend's default, as the
# authors' code does: a CPU multiplies float32 matrices in full float32, an NVIDIA GPU from Ampere on in
# TensorFloat-32, whose products keep 10 bits of mantissa. `COMPGEN_MATMUL_PRECISION=highest` asks for full
# float32 (`high`: JAX's intermediate level; `default` or unset: the backend's). It is read when `compgen` is
# imported, so worker processes and notebook kernels, which inherit the environment, run at it; the nodes of a Ray
# cluster need it in their own environment. Each stored run records its precision
# (`provenance.matmul_precision`), which is not part of its key: use `force` to train a stored run again at
# another. Tests that compare two formulations of one function to float32 round-off run at full precision.
#
# **Identical bytes.** On a CPU the stored bytes of a config are the same whatever else was trained beside it,
# with how many workers, on which device of the `devices` backend, and after resuming from a checkpoint (tested in
# `tests/test_runner.py`, `tests/backends/test_workers.py`, `tests/test_sweeps.py` and
# `tests/test_checkpoint.py`). A worker process pinned to one core still splits a large matrix product over as
# many threads as the machine has cores, as the process that started it does: the thread count decides how XLA
# splits the product, and so its last bits. That holds on one machine: XLA compiles for the host processor, and
# another CPU model may round differently, which can move a number in its last digits but is not expected to move
# a verdict. On a GPU it is not promised: XLA picks some kernels by timing candidates in each process and some
# reductions add in no fixed order, so two runs of one config may differ in
# the last bits; the GPU's tests compare to float32 tolerance where a CPU's compare bytes.
