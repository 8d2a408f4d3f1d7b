"""Prepare an executed notebook for the book: hide the cell that papermill injected.

    python tools/tidy_notebook.py book/hyperteacher.ipynb

papermill writes the parameters it was given into a cell tagged ``injected-parameters``. The reader
sees them in the chapter's header (preset, seeds), so the cell gets jupyter-book's ``remove-cell``
tag; it stays in the notebook, where Colab runs it (it sets ``repository``, which the install cell uses).
"""

from __future__ import annotations

import sys

import nbformat


def tidy(path: str) -> None:
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        tags = cell.metadata.setdefault("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            tags.append("remove-cell")
    nbformat.write(notebook, path)


if __name__ == "__main__":
    for name in sys.argv[1:]:
        tidy(name)
