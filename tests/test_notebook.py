"""What a chapter's notebook calls: opening the book in Colab (the chapters' training is tested with the sections)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from compgen import notebook, params


@pytest.mark.parametrize(
    "repository, expected",
    [
        ("https://github.com/o/r@1a2b", ("https://github.com/o/r", "1a2b")),
        ("https://github.com/o/r", ("https://github.com/o/r", "")),
        ("file:///tmp/repo@c0ffee", ("file:///tmp/repo", "c0ffee")),
        ("git@github.com:o/r", ("git@github.com:o/r", "")),  # the @ of ssh's user is not a commit
        ("git@github.com:o/r@c0ffee", ("git@github.com:o/r", "c0ffee")),
    ],
)
def test_a_repository_parameter_splits_into_address_and_commit(repository, expected):
    assert notebook.split_repository(repository) == expected


def _git(*args, cwd):
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


@pytest.mark.skipif(shutil.which("git") is None, reason="git clones the book")
def test_the_book_opens_at_the_commit_named_and_a_second_chapter_reuses_the_checkout(tmp_path, monkeypatch):
    origin = tmp_path / "origin"
    (origin / "book").mkdir(parents=True)
    _git("init", "-q", cwd=origin)
    commits = []
    for text in ("first", "second"):
        (origin / "book" / "records.txt").write_text(text)
        _git("add", "-A", cwd=origin)
        _git("commit", "-q", "-m", text, cwd=origin)
        commits.append(_git("rev-parse", "HEAD", cwd=origin))
    monkeypatch.chdir(tmp_path)
    home = tmp_path / "home"
    book = notebook.open_book(f"file://{origin}@{commits[0]}", home=home)
    assert Path.cwd() == book == home / "compgen-companion" / "book" and (book / "records.txt").read_text() == "first"
    notebook.open_book(f"file://{origin}@{commits[1]}", home=home)  # the next chapter, of another commit
    assert (book / "records.txt").read_text() == "second"


@pytest.mark.parametrize("repository", [None, ""])
def test_no_repository_is_one_line(repository, tmp_path):
    with pytest.raises(params.ParameterError, match="^repository is not set: give where compgen comes from"):
        notebook.open_book(repository, home=tmp_path)
