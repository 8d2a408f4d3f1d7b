"""A chapter opened in Colab: its install cell, run in a clean virtualenv that holds what Colab preinstalls, installs
compgen at the commit it names from a ``file://`` repository, keeps the preinstalled jax, and the chapter executes
at ``smoke`` with papermill (``google.colab`` importable, as in Colab). Builds a virtualenv from the package index
(pip's cache after ``make install``): a few minutes."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COLAB_PACKAGES = ("jax", "jaxlib", "flax", "optax", "numpy", "matplotlib", "ipykernel")  # preinstalled there
CHAPTER = "teacher_student"


def _run(cmd, **kwargs):
    out = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    assert out.returncode == 0, f"{cmd}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


def _repository(tmp: Path) -> tuple[Path, str]:
    """This checkout's files (tracked and untracked, not ignored) committed into a fresh repository: (path, sha)."""
    repo = tmp / "repo"
    files = _run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT).split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, repo / name)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "snapshot"]):
        _run(["git", *cmd], cwd=repo, env=env)
    return repo, _run(["git", "rev-parse", "HEAD"], cwd=repo).strip()


def _versions(python: Path) -> dict:
    code = "import importlib.metadata as m, json, sys; print(json.dumps({p: m.version(p) for p in sys.argv[1:]}))"
    return json.loads(_run([str(python), "-c", code, *COLAB_PACKAGES]))


@pytest.mark.skipif(shutil.which("git") is None, reason="git is needed for the install cell")
def test_a_chapter_installs_its_commit_in_colab_and_keeps_colabs_jax(tmp_path):
    repo, sha = _repository(tmp_path)
    venv = tmp_path / "colab-venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    lock = str(ROOT / "requirements-lock.txt")
    _run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-c", lock, *COLAB_PACKAGES])
    before = _versions(python)
    # Colab's marker module, imported at start-up as Colab's kernel has it
    stub = tmp_path / "colab-stub"
    (stub / "google" / "colab").mkdir(parents=True)
    (stub / "google" / "colab" / "__init__.py").write_text("")
    (stub / "google" / "colab" / "output.py").write_text("")  # jax imports it when it sees google.colab
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip())
    (site / "colab_stub.pth").write_text(f"import sys; sys.path.append({str(stub)!r}); import google.colab\n")
    jupyter = tmp_path / "jupyter"
    _run([str(python), "-m", "ipykernel", "install", "--prefix", str(jupyter), "--name", "colab-test"])

    notebook = tmp_path / f"{CHAPTER}.ipynb"
    _run([sys.executable, "-m", "jupytext", "--to", "ipynb", str(ROOT / "book" / f"{CHAPTER}.py"), "-o", str(notebook)])
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **os.environ,
        "HOME": str(home),
        "JUPYTER_PATH": str(jupyter / "share" / "jupyter"),
        "COMPGEN_RESULTS": str(tmp_path / "store"),
        "JAX_PLATFORMS": "cpu",
        "PYTHONPATH": "",
    }
    executed = tmp_path / "executed.ipynb"
    _run(
        [sys.executable, "-m", "papermill", str(notebook), str(executed), "-k", "colab-test", "--cwd", str(tmp_path),
         "-p", "preset", "smoke", "-p", "repository", f"file://{repo}@{sha}"],
        env=env,
    )  # fmt: skip
    assert _versions(python) == before  # Colab's jax, flax, optax, numpy and matplotlib are kept
    built = "import compgen._build_info as b, compgen; print(b.COMMIT, compgen.__file__)"
    commit, where = _run([str(python), "-c", built], cwd=tmp_path).split()
    assert commit == sha and where.startswith(str(venv))  # the named commit, installed (not this checkout)
    cells = json.loads(executed.read_text())["cells"]
    errors = [o for c in cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert errors == []
