"""Build hook: a built (non-editable) compgen package records the git commit it was built from.

Everything else about the package is in pyproject.toml. When setuptools builds the package (``pip install .``,
``pip install git+...``, ``pip wheel .``), ``build_py`` writes ``compgen/_build_info.py`` into the build
directory (never into src/) with ``COMMIT``: the commit of the checkout that holds src/compgen, with ``+dirty``
if its tracked files differ from it, or ``None`` where there is no such checkout (e.g. a build from an sdist).
:func:`compgen.results.provenance` reads it when the package runs outside a git checkout. An editable install
(``pip install -e .``) writes nothing: it runs from the checkout, whose commit is read directly.
"""

import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PACKAGE = Path(__file__).resolve().parent / "src" / "compgen"


def source_commit():
    """The commit of the git checkout that tracks src/compgen (``+dirty`` if its files differ), else None."""

    def git(*args):
        return subprocess.run(["git", *args], capture_output=True, text=True, timeout=10, cwd=PACKAGE)

    try:
        head = git("rev-parse", "HEAD")
        if head.returncode != 0 or git("ls-files", "--error-unmatch", "__init__.py").returncode != 0:
            return None
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".").stdout.strip()
        return head.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


class BuildPyWithCommit(build_py):
    """``build_py`` that also writes ``compgen/_build_info.py`` (rewritten at every build, so never stale)."""

    def run(self):
        super().run()
        if not getattr(self, "editable_mode", False):
            target = Path(self.build_lib) / "compgen" / "_build_info.py"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(
                '"""Written by setup.py when this package was built: the git commit of its source."""\n\n'
                f"COMMIT = {source_commit()!r}\n"
            )

    def get_outputs(self, include_bytecode=1):
        outputs = super().get_outputs(include_bytecode)
        if getattr(self, "editable_mode", False):
            return outputs
        return [*outputs, str(Path(self.build_lib) / "compgen" / "_build_info.py")]


setup(cmdclass={"build_py": BuildPyWithCommit})
