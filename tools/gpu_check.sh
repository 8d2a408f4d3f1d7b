#!/usr/bin/env bash
# tools/gpu_check.sh: check compgen on a GPU machine in under 8 minutes, with nothing but the machine's image.
#
#   bash tools/gpu_check.sh          # on the GPU machine, from the repository root
#   bash tools/gpu_check.sh --cpu    # a small version of the same checks, here on a CPU (a few minutes)
#
# It expects the image's python3 (3.12) with jax (CUDA), flax, optax, numpy, matplotlib, pytest and pytest-xdist,
# and no internet. compgen is used from this checkout (PYTHONPATH=$PWD/src), not installed. Each step runs under
# `timeout`, writes its log to $WORK (default /tmp/gpu_check_work) and goes into the summary table printed at the end.
# $OUT (default /tmp/gpu_check) receives at most five files, as a device machine sends back: summary.md and
# gpu_check.json (the same table as a record: with what each step found, written in by hand, it goes to
# book/records/gpu/, which the book's appendix draws) and logs.tgz (every step's log, refreshed every 20 s and after
# each step). The paper-scale runs are not here: tools/gpu_lease.py spends a lease on them first, and these checks
# run only with what a lease has left, never beside its runs. The steps, in order:
#   device   jax's devices, versions, nvidia-smi
#   wheels   installs .whl/*.whl (the notebook stack, below) into $SITE (default /tmp/site), if the folder exists
#   probe    tools/compile_probe.py $PROBE_ARGS: the teacher-student paper config (one seed) with its inner loop fused
#            and as a lax.scan, each in a process stopped after 75 s: init, evaluate compile and run, a 20-step
#            chunk's compile and ms per outer step, phase by phase (a compilation that never ends shows where)
#   bench    python -m compgen.bench --only "$BENCH_ONLY" (default: the paper rows with the authors' H100 figures),
#            chunks of at most BENCH_STEPS outer steps (default 20); alone on the device; rows print as they
#            finish, so a bench stopped by its timeout still leaves them
#   tests    the unit tests, JOBS (default 8) pytest-xdist workers sharing the GPU; the book's own tests skip
#            themselves when jupytext or beautifulsoup4 is missing
#   chapter  book/$CHAPTER.py (default teacher_student) at preset smoke: jupytext, then papermill, into a fresh
#            results store under $WORK; then the device and precision the stored runs record
#   twin     with TWIN_REFERENCE (a checkout of the authors' code; .twin/reference when carried), the twin runs of
#            tools/twin.py for TWIN_CHAPTERS (default "preferences goals"): the reference's runs, TWIN_JOBS (default 6)
#            processes per chapter sharing the GPU, into $OUT/twin_<chapter>.json (started from the book's record, so
#            a rerun resumes), and ours at the matched world in the background (TWIN_WORKERS runner workers per
#            chapter, default 2) into a store at /tmp/twin-store, packed into $OUT/twin-store.tgz every minute and at
#            the end (started from .twin/store.tgz if carried). Both at full float32 products, as on a CPU. The
#            reference runs in TWIN_PYTHON (default PYTHON), its own packages (dm-haiku, ml_collections, jmp) carried
#            as wheels in .twin/whl/.
# TWIN_ARGS are passed on to tools/twin.py (e.g. "--figures fig4b --seeds 2020 2021 2022").
# ONLY (space-separated step names) runs those steps alone; the others are listed as skipped.
# The steps together never run longer than BUDGET_S seconds (default 560): a step's limit is cut to what is left.
# Overrides (environment): OUT, WORK, SITE, JOBS, BUDGET_S, DEVICE_TIMEOUT, WHEELS_TIMEOUT, TESTS_TIMEOUT,
# CHAPTER_TIMEOUT, BENCH_TIMEOUT, PROBE_TIMEOUT, TWIN_TIMEOUT, TESTS (the pytest arguments), CHAPTER, BENCH_ONLY, BENCH_STEPS,
# PROBE_ARGS, ONLY, TWIN_REFERENCE, TWIN_PYTHON, TWIN_CHAPTERS, TWIN_JOBS, TWIN_WORKERS, PYTHON
# (default python3).
# COMPGEN_MATMUL_PRECISION and XLA_FLAGS pass through (book/running.py, "On a GPU"). Exit status: 0 if no step
# failed or timed out.
#
# The notebook stack as wheels (.whl/ is in .gitignore; the device tool carries it with carry=[".whl"]): on a machine
# with internet, for the image's Python 3.12 on x86_64 Linux, from the repository root, the versions of
# requirements-lock.txt, each package's wheel alone (its needs are in the list; `pip show` Requires, checked in
# .venv):
#
#   for spec in papermill==2.7.0 jupytext==1.19.6 mdit-py-plugins==0.7.0 nbclient==0.11.0 nbformat==5.11.1 \
#       fastjsonschema==2.22.3 jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 \
#       rpds-py==2026.9.1 attrs==26.1.0 jupyter_client==8.10.0 jupyter_core==5.9.1 platformdirs==4.14.7 \
#       traitlets==5.16.1 pyzmq==27.3.0 tornado==6.6.1 ipykernel==7.4.0 comm==0.2.3 debugpy==1.8.22 \
#       nest-asyncio2==1.7.4 matplotlib-inline==0.2.2 ipython==9.18.1 ipython_pygments_lexers==1.1.1 \
#       jedi==0.20.1 parso==0.8.7 pexpect==4.9.0 ptyprocess==0.7.0 prompt_toolkit==3.0.53 wcwidth==0.9.4 \
#       stack-data==0.6.3 executing==2.3.0 asttokens==3.0.2 pure_eval==0.2.4 click==8.5.1 entrypoints==0.4.2 \
#       requests==2.34.2 charset-normalizer==3.5.2 idna==3.20 urllib3==2.8.0 certifi==2026.10.18 \
#       tenacity==9.2.1 tqdm==4.70.1 beautifulsoup4==4.15.0 soupsieve==4.1.2; do
#     python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#       -d .whl "$spec"
#   done
#
# Left out, because the image has them (flax, orbax-checkpoint, matplotlib and pytest need them): PyYAML,
# markdown-it-py, mdurl, pygments, packaging, python-dateutil, typing_extensions, psutil. papermill declares aiohttp
# on Python 3.12 but never imports it. pyzmq, tornado, rpds-py, charset-normalizer and wcwidth come compiled (cp312
# or abi3 wheels), the rest pure Python: 45 wheels, 16 MB, downloaded and installed with `--target` in a dry run.
# beautifulsoup4 and soupsieve serve only tests/tools/test_check_book.py.

set -uo pipefail

MODE=gpu
case "${1:-}" in
  "") ;;
  --cpu) MODE=cpu ;;
  -h | --help)
    sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "usage: bash tools/gpu_check.sh [--cpu]" >&2
    exit 2
    ;;
esac

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
OUT=${OUT:-/tmp/gpu_check}
WORK=${WORK:-/tmp/gpu_check_work}
SITE=${SITE:-/tmp/site}
PYTHON=${PYTHON:-python3}
BUDGET_S=${BUDGET_S:-560}
CHAPTER=${CHAPTER:-teacher_student}
mkdir -p "$OUT" "$WORK" || exit 2
export OUT WORK SITE PYTHON CHAPTER MODE
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
# Several processes share one GPU (pytest-xdist workers, a notebook's kernel): none may take most of its memory.
export XLA_PYTHON_CLIENT_PREALLOCATE=false
export MPLBACKEND=Agg

if [[ $MODE == gpu ]]; then
  JOBS=${JOBS:-8}
  DEVICE_TIMEOUT=${DEVICE_TIMEOUT:-40}
  WHEELS_TIMEOUT=${WHEELS_TIMEOUT:-30}
  TESTS_TIMEOUT=${TESTS_TIMEOUT:-240}
  CHAPTER_TIMEOUT=${CHAPTER_TIMEOUT:-90}
  BENCH_TIMEOUT=${BENCH_TIMEOUT:-100}
  PROBE_TIMEOUT=${PROBE_TIMEOUT:-160}
  PROBE_ARGS=${PROBE_ARGS:---timeout 75}
  TWIN_TIMEOUT=${TWIN_TIMEOUT:-400}
  TESTS=${TESTS:-tests}
  BENCH_ONLY=${BENCH_ONLY:-"hyperteacher hnet_linear paper|hyperteacher anil paper|hyperteacher maml paper|preferences hnet_linear paper|preferences anil paper|goals hnet_linear paper|goals anil paper"}
  BENCH_STEPS=${BENCH_STEPS:-20}
else
  # This machine: the library's venv, a few tests, one quick bench case.
  JOBS=${JOBS:-0}
  DEVICE_TIMEOUT=${DEVICE_TIMEOUT:-60}
  WHEELS_TIMEOUT=${WHEELS_TIMEOUT:-10}
  TESTS_TIMEOUT=${TESTS_TIMEOUT:-120}
  CHAPTER_TIMEOUT=${CHAPTER_TIMEOUT:-150}
  BENCH_TIMEOUT=${BENCH_TIMEOUT:-90}
  PROBE_TIMEOUT=${PROBE_TIMEOUT:-150}
  PROBE_ARGS=${PROBE_ARGS:---preset smoke --timeout 60}
  TWIN_TIMEOUT=${TWIN_TIMEOUT:-150}
  TESTS=${TESTS:-tests/test_precision.py tests/test_book_layout.py tests/tools/test_check_book.py \
    tests/models/test_incontext.py::test_transformer_equals_a_masked_joint_sequence \
    tests/test_sweeps.py::test_devices_backend_matches_local}
  BENCH_ONLY=${BENCH_ONLY:-hyperteacher hnet_linear quick}
  BENCH_STEPS=${BENCH_STEPS:-5}
fi

ONLY=${ONLY:-}
TWIN_REFERENCE=${TWIN_REFERENCE:-}
[[ -z $TWIN_REFERENCE && -d .twin/reference ]] && TWIN_REFERENCE=.twin/reference
export TWIN_ARGS=${TWIN_ARGS:-} TWIN_PYTHON=${TWIN_PYTHON:-$PYTHON} TWIN_CHAPTERS=${TWIN_CHAPTERS:-preferences goals} TWIN_JOBS=${TWIN_JOBS:-6} TWIN_WORKERS=${TWIN_WORKERS:-2}
export TWIN_REFERENCE

START=$SECONDS
STEPS=()
STATUS=()
TIMES=()

# pack_logs: every step's log so far into $OUT/logs.tgz, written beside, then renamed.
pack_logs() {
  (cd "$WORK" && tar -czf "$OUT/logs.tgz.part" ./*.log ./*.ipynb 2>/dev/null; mv "$OUT/logs.tgz.part" "$OUT/logs.tgz")
}
(while sleep 20; do pack_logs; done) &
PACKER=$!

# run_step NAME LIMIT COMMAND...: COMMAND under `timeout` (LIMIT seconds, cut to what is left of BUDGET_S), its
# output in $WORK/NAME.log; records ok, FAILED (status), TIMEOUT or skipped.
run_step() {
  local name=$1 limit=$2 log="$WORK/$1.log" rc begin status
  shift 2
  local left=$((BUDGET_S - (SECONDS - START)))
  ((limit > left)) && limit=$left
  begin=$SECONDS
  if [[ -n $ONLY && " $ONLY " != *" $name "* ]]; then
    status="skipped (not in ONLY)"
    echo "[$name] $status"
  elif ((limit < 10)); then
    status="skipped (budget spent)"
    echo "[$name] $status"
  else
    local shown="$*"
    shown=$(tr -s ' \n' '  ' <<<"$shown")
    echo "[$name] up to ${limit}s: ${shown:0:150}"
    timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1
    rc=$?
    case $rc in
      0) status=ok ;;
      124 | 137) status="TIMEOUT (${limit}s)" ;;
      *) status="FAILED ($rc)" ;;
    esac
    tail -n 3 "$log" | sed "s/^/[$name]   /"
  fi
  STEPS+=("$name")
  STATUS+=("$status")
  TIMES+=("$((SECONDS - begin))")
  pack_logs
}

skip_step() {
  STEPS+=("$1")
  STATUS+=("skipped ($2)")
  TIMES+=(0)
  echo "[$1] skipped: $2"
}

# ---------------------------------------------------------------------------------------------------------------
if [[ $MODE == cpu ]]; then
  run_step syntax 30 bash -c 'bash -n tools/gpu_check.sh && echo "bash -n: ok" &&
    if command -v shellcheck >/dev/null; then shellcheck tools/gpu_check.sh && echo "shellcheck: ok";
    else echo "shellcheck is not installed"; fi'
fi

# (a) the device
# shellcheck disable=SC2016  # expanded by the inner bash, from the exported variables
run_step device "$DEVICE_TIMEOUT" bash -c '
  "$PYTHON" - <<EOF
import sys
import jax, flax, optax, numpy
import compgen
print("python", sys.version.split()[0], "| jax", jax.__version__, "| flax", flax.__version__, "| optax",
      optax.__version__, "| numpy", numpy.__version__)
print("backend", jax.default_backend(), "| devices", jax.devices())
print("matmul precision", jax.config.jax_default_matmul_precision or "default", "| XLA_FLAGS", repr(__import__("os").environ.get("XLA_FLAGS", "")))
if "$MODE" == "gpu" and jax.default_backend() != "gpu":
    sys.exit("no GPU: jax runs on " + jax.default_backend())
EOF
  status=$?
  if command -v nvidia-smi >/dev/null; then nvidia-smi; fi
  exit $status'

# (b) the notebook stack, as wheels carried in .whl/
shopt -s nullglob
WHEELS=(.whl/*.whl)
shopt -u nullglob
if [[ $MODE == cpu ]]; then
  skip_step wheels "--cpu: this environment"
elif ((${#WHEELS[@]} == 0)); then
  skip_step wheels "no .whl/ folder"
else
  run_step wheels "$WHEELS_TIMEOUT" "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target "$SITE" "${WHEELS[@]}"
  export PYTHONPATH="$SITE:$PYTHONPATH"
fi

# (c) the teacher-student's paper config, inner loop fused and as a scan: where its first minutes go
# (tools/compile_probe.py)
# shellcheck disable=SC2086  # PROBE_ARGS is a list of arguments
run_step probe "$PROBE_TIMEOUT" "$PYTHON" -u tools/compile_probe.py $PROBE_ARGS --out "$WORK/probe.json"

# (c') the bench, alone on the device (no compilation cache: it times compilation)
run_step bench "$BENCH_TIMEOUT" "$PYTHON" -m compgen.bench --only "$BENCH_ONLY" --steps "$BENCH_STEPS"
if [[ ${STATUS[-1]} == ok ]] && grep -q "| failed:" "$WORK/bench.log"; then
  STATUS[-1]="FAILED (a case)"
fi

# (d) the unit tests
# shellcheck disable=SC2086  # TESTS is a list of pytest arguments
run_step tests "$TESTS_TIMEOUT" env JAX_COMPILATION_CACHE_DIR="$WORK/jax-cache" \
  "$PYTHON" -m pytest -v -p no:cacheprovider -n "$JOBS" --dist loadfile --durations=10 -rfEs $TESTS

# (e) one chapter at preset smoke, through papermill, into a fresh results store
if "$PYTHON" -c 'import papermill, jupytext, ipykernel' 2>/dev/null; then
  # shellcheck disable=SC2016  # expanded by the inner bash, from the exported variables
  run_step chapter "$CHAPTER_TIMEOUT" bash -c '
    set -eo pipefail
    rm -rf "$WORK/results" && mkdir -p "$WORK/results"
    export COMPGEN_RESULTS="$WORK/results" COMPGEN_WORKERS=${COMPGEN_WORKERS:-1} JAX_COMPILATION_CACHE_DIR="$WORK/jax-cache"
    "$PYTHON" -m jupytext --to ipynb --output - "book/$CHAPTER.py" |
      "$PYTHON" -m papermill - "$WORK/$CHAPTER.ipynb" --cwd book -k python3 --language python \
        --no-progress-bar --log-output -p preset smoke
    "$PYTHON" - <<EOF
import collections, json, pathlib
seen = collections.Counter()
for sidecar in pathlib.Path("$WORK/results").glob("*/*.json"):
    p = json.loads(sidecar.read_text())["provenance"]
    seen[(p["device"], p.get("matmul_precision", "?"))] += 1
assert seen, "the chapter stored no run"
for (device, precision), n in sorted(seen.items()):
    print(f"{n} stored run(s) on {device}, matmul precision {precision}")
EOF'
else
  skip_step chapter "no papermill/jupytext/ipykernel"
fi

# (f) the twin runs: the authors' code and ours at the same configs (tools/twin.py)
if [[ -z $TWIN_REFERENCE ]]; then
  skip_step twin "no TWIN_REFERENCE and no .twin/reference"
else
  # shellcheck disable=SC2016  # expanded by the inner bash, from the exported variables
  run_step twin "$TWIN_TIMEOUT" bash -c '
    export JAX_DEFAULT_MATMUL_PRECISION=highest COMPGEN_MATMUL_PRECISION=highest COMPGEN_RESULTS=/tmp/twin-store
    if wheels=$(ls .twin/whl/*.whl 2>/dev/null); then
      # shellcheck disable=SC2086  # the wheels, one word each
      "$TWIN_PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" $wheels ||
        exit 2
      export PYTHONPATH="$SITE:$PYTHONPATH"
    fi
    "$TWIN_PYTHON" -c "import haiku, ml_collections, jmp, jax; print(\"reference stack: haiku\", haiku.__version__, \"jax\", jax.__version__)" ||
      exit 2
    [[ $MODE == gpu ]] && export TWIN_JAX_PLATFORMS=cuda
    mkdir -p /tmp/twin-store
    [[ -f .twin/store.tgz ]] && tar -xzf .twin/store.tgz -C /tmp/twin-store
    pack() { tar -czf "$OUT/twin-store.tgz.part" -C /tmp/twin-store . && mv "$OUT/twin-store.tgz.part" "$OUT/twin-store.tgz"; }
    (while sleep 60; do pack; done) & packer=$!
    pids=()
    for ch in $TWIN_CHAPTERS; do
      [[ -f book/search/twin_$ch.json ]] && cp "book/search/twin_$ch.json" "$OUT/twin_$ch.json"
      "$PYTHON" tools/twin.py --chapter "$ch" --reference "$TWIN_REFERENCE" --ours-only --workers "$TWIN_WORKERS" $TWIN_ARGS \
        > >(sed -u "s/^/[ours $ch] /") 2>&1 &
      pids+=($!)
      "$PYTHON" tools/twin.py --chapter "$ch" --reference "$TWIN_REFERENCE" --python "$TWIN_PYTHON" --jobs "$TWIN_JOBS" \
        --workers "$TWIN_WORKERS" --out "$OUT/twin_$ch.json" $TWIN_ARGS 2>&1 &
      pids+=($!)
    done
    trap "kill \${pids[*]} \$packer 2>/dev/null; sleep 2; pack; exit 124" TERM
    status=0
    for pid in "${pids[@]}"; do wait "$pid" || status=1; done
    kill $packer; pack
    exit $status'
fi

kill "$PACKER" 2>/dev/null
pack_logs

# ---------------------------------------------------------------------------------------------------------------
{
  echo
  echo "tools/gpu_check.sh${1:+ $1} on $(hostname) at $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- 2>/dev/null || echo +dirty); logs in $WORK and $OUT/logs.tgz"
  printf '| %-8s | %-32s | %7s |\n' step status seconds
  printf '|%s|%s|%s|\n' ---------- ---------------------------------- ---------
  for i in "${!STEPS[@]}"; do
    printf '| %-8s | %-32s | %7s |\n' "${STEPS[$i]}" "${STATUS[$i]}" "${TIMES[$i]}"
  done
  printf '| %-8s | %-32s | %7s |\n' total "" "$((SECONDS - START))"
} | tee "$OUT/summary.md"

# The record of this check (book/records/gpu/, compgen.figures.running.gpu_checks), "found" left for a person to fill
for i in "${!STEPS[@]}"; do printf '%s\t%s\t%s\n' "${STEPS[$i]}" "${STATUS[$i]}" "${TIMES[$i]}"; done |
  COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" "$PYTHON" -c '
import datetime, json, os, sys
try:
    import jax, flax
    device, versions = jax.devices()[0].device_kind, (jax.__version__ + " (" + jax.default_backend() + ")", flax.__version__)
except Exception as error:  # the record still says which steps ran
    device, versions = f"unknown ({error})", ("unknown", "unknown")
steps = [dict(zip(("step", "status", "seconds"), line.rstrip("\n").split("\t"))) for line in sys.stdin]
steps = [{**s, "seconds": float(s["seconds"]), "found": ""} for s in steps]
try:  # the code the check ran, as the appendix compares it (compgen.recordfile)
    from compgen import catalog, programs, recordfile
    schema, key, lib = recordfile.version("gpu"), catalog.code_key(), programs.versions()
except Exception:  # the record still says which steps ran; the appendix then says its code is not recorded
    schema, key, lib = 2, None, None
record = {"schema": schema, "device": device, "date": datetime.date.today().isoformat(),
          "code": "compgen@" + os.environ["COMMIT"], "code_key": key, "code_versions": lib,
          "jax": versions[0], "flax": versions[1], "how": "`tools/gpu_check.sh` in one call", "steps": steps}
print(json.dumps(record, indent=1))' >"$OUT/gpu_check.json" 2>"$WORK/record.log" || echo "gpu_check.json: not written ($WORK/record.log)"

for s in "${STATUS[@]}"; do
  [[ $s == ok || $s == skipped* ]] || exit 1
done
exit 0
