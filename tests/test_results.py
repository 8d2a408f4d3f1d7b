"""The results store: round trip with provenance, keys that follow config and code, and damaged entries."""

import dataclasses
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import compgen
from compgen import programs, records, results, storage


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    steps: int = 3
    seeds: tuple = (1, 2)


def toy_section(name, fingerprint):
    """A section as the store sees it: its name and the fingerprint of its code, the same for every config."""
    return SimpleNamespace(
        name=name,
        fingerprint=fingerprint,
        fingerprint_of=lambda config: fingerprint,
        key_of=lambda config: results.config_hash(config, fingerprint),
    )


TOY = toy_section("toy", "c0de00000001")
OTHER_CODE = toy_section("toy", "c0de00000002")
OTHER_SECTION = toy_section("other", TOY.fingerprint)


def _save(root, config=ToyConfig(), value=0.0, section=TOY):
    return results.Store(root).save(section, config, {"x": np.full(3, value)}, 0.5)


def _load(root, config=ToyConfig(), log=print, section=TOY):
    return results.Store(root).load(section, config, log=log)


def test_round_trip_with_provenance(tmp_path):
    arrays = {"loss": np.arange(6.0).reshape(2, 3)}
    store = results.Store(tmp_path)
    store.save(TOY, ToyConfig(), arrays, 1.25)
    loaded, meta = store.load(TOY, ToyConfig())
    np.testing.assert_array_equal(loaded["loss"], arrays["loss"])
    assert meta.config == {"steps": 3, "seeds": [1, 2]}
    assert meta.provenance["code_fingerprint"] == TOY.fingerprint
    assert meta.provenance["gemm_gflops"] > 0  # how fast this machine multiplies (compgen.timing)
    for field in ("compgen_version", "code_fingerprint", "git_commit", "jax_version", "device", "wall_time_s"):
        assert field in meta.provenance
    entry, sidecar = store.paths(TOY, ToyConfig())
    assert json.loads(sidecar.read_text())["config"] == meta.config  # a readable copy beside the entry
    assert store.entries("toy") == [(entry, records.load(sidecar))]  # a record of its own kind
    assert store.provenance(TOY, ToyConfig()) == meta.provenance  # the sidecar's copy, without the arrays
    assert store.provenance(TOY, ToyConfig(steps=4)) is None


def test_save_leaves_only_the_two_files_and_overwrites_in_place(tmp_path):
    _save(tmp_path, value=0.0)
    _save(tmp_path, value=1.0)  # a second writer
    stem = results.config_hash(ToyConfig(), TOY.fingerprint)
    assert sorted(p.name for p in (tmp_path / "toy").iterdir()) == [f"{stem}.json", f"{stem}.result"]
    np.testing.assert_array_equal(_load(tmp_path)[0]["x"], [1.0] * 3)


def test_other_config_or_other_code_is_not_reused(tmp_path):
    _save(tmp_path)
    assert _load(tmp_path, ToyConfig(steps=4)) is None
    assert _load(tmp_path, section=OTHER_CODE) is None
    assert results.config_hash(ToyConfig(), TOY.fingerprint) != results.config_hash(ToyConfig(), OTHER_CODE.fingerprint)


def test_the_store_is_a_value_and_the_environment_only_picks_the_default(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPGEN_RESULTS", str(tmp_path / "env"))
    monkeypatch.delenv("COMPGEN_CHECKPOINTS", raising=False)
    assert results.Store.default() == results.Store(tmp_path / "env", tmp_path / "env" / "checkpoints")
    monkeypatch.setenv("COMPGEN_CHECKPOINTS", str(tmp_path / "ckpt"))
    assert results.Store.default().checkpoints == tmp_path / "ckpt"
    _save(tmp_path / "mine")  # an explicit store ignores the environment
    assert _load(tmp_path / "mine") is not None and not (tmp_path / "env").exists()


def test_a_store_under_the_home_folder_is_found_there(tmp_path, monkeypatch):
    """COMPGEN_RESULTS='~/store' (quoted, so the shell left the ~) made a folder named ~ in the working directory."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COMPGEN_RESULTS", "~/store")
    monkeypatch.setenv("COMPGEN_CHECKPOINTS", " ~/ckpt ")  # blanks around a value are ignored, as everywhere
    store = results.Store.default()
    assert store.root == tmp_path / "home" / "store" and store.checkpoints == tmp_path / "home" / "ckpt"
    _save(store.root)
    assert _load(tmp_path / "home" / "store") is not None and not (tmp_path / "~").exists()


def test_a_full_disk_is_one_line_naming_the_store_file_and_the_stored_run_is_kept(tmp_path, monkeypatch, capsys):
    """A full disk printed "the results store  could not be written" (no path); the run stored before stays."""
    import errno

    from compgen import cli, dispatch, storage
    from compgen.experiments import teacher_student as ts
    from compgen.section import figure_configs

    monkeypatch.setenv("COMPGEN_RESULTS", str(tmp_path / "store"))
    monkeypatch.setenv("COMPGEN_WORKERS", "1")
    config = figure_configs(ts.SECTION, "fig2c", "smoke")[0]
    store = results.Store.default()
    store.save(ts.SECTION, config, {"loss": np.ones(2)}, 1.0)
    entry = store.paths(ts.SECTION, config)[0]
    before = entry.read_bytes()

    def train_or_load(section, configs, *args, **kwargs):  # a run finishes, and its store is full
        monkeypatch.setattr(storage.os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space")))
        results.Store.default().save(section, configs[0], {"loss": np.zeros(2)}, 1.0)

    monkeypatch.setattr(dispatch, "train_or_load", train_or_load)
    assert cli.main(["run", "teacher_student", "fig2c", "--preset", "smoke", "--force"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"error: the results store {entry} could not be written: No space", err
    assert entry.read_bytes() == before and not [p for p in entry.parent.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "garbage", "no_entry"])
def test_a_damaged_entry_is_reported_once_moved_aside_and_treated_as_missing(tmp_path, damage):
    _save(tmp_path)
    entry, sidecar = results.Store(tmp_path).paths(TOY, ToyConfig())
    data = entry.read_bytes()
    if damage == "truncate":
        entry.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        entry.write_bytes(data[:100] + bytes([data[100] ^ 0x10]) + data[101:])
    elif damage == "empty":
        entry.write_bytes(b"")
    elif damage == "garbage":
        entry.write_text("not a result")
    else:
        entry.unlink()  # half of the pair is missing
    lines = []
    assert _load(tmp_path, log=lines.append) is None
    assert len(lines) == 1 and "damaged entry" in lines[0] and str(tmp_path) in lines[0]
    assert not entry.exists() and not sidecar.exists() and any((tmp_path / "toy" / "damaged").iterdir())
    assert _load(tmp_path, log=lines.append) is None and len(lines) == 1  # reported once
    _save(tmp_path, value=2.0)  # recomputed and stored again
    np.testing.assert_array_equal(_load(tmp_path)[0]["x"], [2.0] * 3)


def test_an_entry_that_holds_another_config_is_quarantined_not_reused(tmp_path):
    """A valid entry copied over another config's file name was reused silently."""
    _save(tmp_path, ToyConfig(steps=4), value=4.0)
    theirs = results.Store(tmp_path).paths(TOY, ToyConfig(steps=4))[0]
    ours = results.Store(tmp_path).paths(TOY, ToyConfig())[0]
    ours.write_bytes(theirs.read_bytes())  # the other run, under our name
    lines = []
    assert _load(tmp_path, log=lines.append) is None
    assert len(lines) == 1 and "another config" in lines[0] and str(ours.with_suffix("")) in lines[0]
    assert not ours.exists() and any((tmp_path / "toy" / "damaged").iterdir())
    assert _load(tmp_path, ToyConfig(steps=4))[0]["x"][0] == 4.0  # the other run itself is untouched


def test_an_entry_of_other_code_or_section_under_our_name_is_quarantined(tmp_path):
    store = results.Store(tmp_path)
    _save(tmp_path, section=OTHER_CODE)
    stale = store.paths(OTHER_CODE, ToyConfig())[0]
    ours = store.paths(TOY, ToyConfig())[0]
    stale.replace(ours)
    lines = []
    assert _load(tmp_path, log=lines.append) is None and "stored under another key" in lines[0]
    _save(tmp_path, section=OTHER_SECTION)
    ours.parent.mkdir(exist_ok=True)
    store.paths(OTHER_SECTION, ToyConfig())[0].replace(ours)
    assert _load(tmp_path, log=lines.append) is None and "section 'other'" in lines[1]


def test_a_damaged_entry_in_a_store_it_cannot_write_is_reported_and_not_used(tmp_path, monkeypatch):
    _save(tmp_path)
    entry = results.Store(tmp_path).paths(TOY, ToyConfig())[0]
    entry.write_bytes(b"garbage")

    def read_only(self, *args, **kwargs):
        raise PermissionError(13, "Read-only file system")

    monkeypatch.setattr(Path, "mkdir", read_only)
    lines = []
    assert _load(tmp_path, log=lines.append) is None  # no crash
    assert "could not be moved aside" in lines[0] and entry.exists()


def test_reading_refuses_arrays_that_would_decompress_beyond_the_limit(tmp_path):
    from compgen import storage

    path = tmp_path / "big.result"
    storage.write_arrays(path, {"zeros": np.zeros(2**20)}, compress=True)  # 8 MB that compress to a few KB
    assert path.stat().st_size < 100_000
    assert storage.read_arrays(path)["zeros"].shape == (2**20,)
    with pytest.raises(storage.CorruptFile, match="would take 8,388,7"):
        storage.read_arrays(path, max_bytes=2**20)


def test_a_missing_sidecar_is_harmless(tmp_path):
    _save(tmp_path)
    results.Store(tmp_path).paths(TOY, ToyConfig())[1].unlink()
    assert _load(tmp_path) is not None  # the entry carries its own metadata


# --- provenance: the commit of the compgen source that ran ---------------------------------------------------

REPOSITORY = Path(__file__).resolve().parents[1]
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(folder, *args) -> str:
    identity = ["-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false"]
    out = subprocess.run(["git", *identity, *args], cwd=folder, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _repository_with_one_commit(folder: Path) -> str:
    """A fresh git repository in ``folder`` with one commit of an unrelated file; returns that commit."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "notes.txt").write_text("unrelated\n")
    _git(folder, "init", "-q")
    _git(folder, "add", "notes.txt")
    _git(folder, "commit", "-q", "-m", "unrelated")
    return _git(folder, "rev-parse", "HEAD")


def _copy_package(target: Path) -> Path:
    package = Path(compgen.__file__).parent
    shutil.copytree(package, target / "compgen", ignore=shutil.ignore_patterns("__pycache__", "_build_info.py"))
    return target / "compgen"


@needs_git
def test_a_copy_inside_another_repository_does_not_record_that_repositorys_commit(tmp_path):
    other = tmp_path / "other"
    commit = _repository_with_one_commit(other)
    _copy_package(other / "vendor")  # untracked by `other`
    env = {**os.environ, "PYTHONPATH": str(other / "vendor")}
    script = "import compgen\nfrom compgen import results\nprint(compgen.__file__)\nprint(*results._source_commit())"
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    where, recorded = out.stdout.splitlines()[-2:]
    assert Path(where).is_relative_to(other / "vendor")  # the copy ran, not the installed package
    assert commit not in recorded and recorded == "unknown unknown"


@needs_git
def test_a_tracked_package_records_its_checkout_and_only_its_own_files_make_it_dirty(tmp_path):
    repo = tmp_path / "repo"
    _repository_with_one_commit(repo)
    package = _copy_package(repo / "src")
    _git(repo, "add", "src")
    _git(repo, "commit", "-q", "-m", "compgen")
    head = _git(repo, "rev-parse", "HEAD")
    assert results._checkout_commit(package) == head
    (repo / "notes.txt").write_text("changed, outside the package\n")
    (package / "scratch.txt").write_text("untracked\n")
    assert results._checkout_commit(package) == head
    (package / "__init__.py").write_text((package / "__init__.py").read_text() + "# edited\n")
    assert results._checkout_commit(package) == head + "+dirty"
    assert results._checkout_commit(tmp_path) is None  # not a git checkout at all


@needs_git
@pytest.mark.skipif(importlib.util.find_spec("setuptools") is None, reason="setuptools is not installed")
def test_a_built_package_records_the_commit_it_was_built_from(tmp_path):
    if subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPOSITORY, capture_output=True).returncode != 0:
        pytest.skip("the tests do not run from a git checkout")
    if importlib.util.find_spec("setuptools") is None:  # the build backend, used without build isolation
        pytest.skip("setuptools is not installed, so the package cannot be built offline")
    head = _git(REPOSITORY, "rev-parse", "HEAD")
    # a clone at HEAD with this working tree's build files laid over it, so that the build leaves no build/
    # folder here and sees the files as they are now (committed or not)
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", "--shared", str(REPOSITORY), str(clone))
    listed = _git(REPOSITORY, "ls-files", "-co", "--exclude-standard", "--", "src", "pyproject.toml", "setup.py")
    for name in [*listed.splitlines(), "README.md"]:
        if (REPOSITORY / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPOSITORY / name, clone / name)
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", "-q"]
    build = subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(wheels), str(clone)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    (wheel,) = wheels.glob("compgen-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = {}
        exec(archive.read("compgen/_build_info.py").decode(), info)
        scripts = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert info["COMMIT"].split("+")[0] == head
    assert "compgen/__main__.py" in names and "compgen-cli = compgen.cli:entry_point" in scripts
    # installed outside any checkout, the package reports that commit as where its code came from
    site = tmp_path / "site"
    install = subprocess.run(
        [*pip, "install", "--no-deps", "--no-index", "--target", str(site), str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    script = "import compgen\nfrom compgen import results\nprint(compgen.__file__)\nprint(*results._source_commit())"
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    where, recorded = out.stdout.splitlines()[-2:]
    assert Path(where).is_relative_to(site) and recorded == f"{info['COMMIT']} build"


def _legacy_entry(root, sec, cfg, fingerprint):
    """A run stored as before runs were keyed by their programs: under the hash of its config and source fingerprint,
    its description naming that fingerprint and no key."""
    provenance = {**results.provenance(1.0, fingerprint), "code_fingerprint": fingerprint}
    meta = {"kind": sec.name, "config": results.config_dict(cfg), "provenance": provenance}
    stem = results.config_hash(cfg, fingerprint)
    folder = Path(root) / sec.name
    folder.mkdir(parents=True, exist_ok=True)
    text = json.dumps(meta).encode()
    from compgen import storage

    storage.write_arrays(folder / f"{stem}.result", {"x": np.ones(2), "__meta__": np.frombuffer(text, np.uint8)})
    (folder / f"{stem}.json").write_bytes(text)
    return folder / f"{stem}.result"


def test_a_run_stored_under_the_last_source_fingerprint_is_moved_under_its_key_not_trained_again(tmp_path, monkeypatch):
    from compgen import catalog, legacy
    from compgen.section import make_config

    sec = catalog.get("teacher_student")
    cfg = make_config(sec, "smoke")
    old = _legacy_entry(tmp_path, sec, cfg, legacy.LEGACY[sec.name][0])
    other = _legacy_entry(tmp_path, sec, make_config(sec, "smoke", seeds=(7,)), "0123456789ab")  # other code's
    monkeypatch.setattr(programs, "section_key", lambda s, *a: legacy.LEGACY[s.name][1])  # it computes what it did
    lines = []
    arrays, meta = results.Store(tmp_path).load(sec, cfg, log=lines.append)
    assert arrays["x"].tolist() == [1.0, 1.0] and meta.key == programs.key_of(sec, cfg) and meta.legacy_key == old.stem
    assert not old.exists() and results.Store(tmp_path).paths(sec, cfg)[0].exists()
    assert "now stored under its key" in lines[0]
    assert results.Store(tmp_path).load(sec, make_config(sec, "smoke", seeds=(7,))) is None and other.exists()


def test_a_legacy_run_of_a_section_that_computes_something_else_now_is_not_reused(tmp_path, monkeypatch):
    from compgen import catalog, legacy
    from compgen.section import make_config

    sec = catalog.get("teacher_student")
    cfg = make_config(sec, "smoke")
    old = _legacy_entry(tmp_path, sec, cfg, legacy.LEGACY[sec.name][0])
    monkeypatch.setattr(programs, "section_key", lambda s, *a: "another program")
    assert results.Store(tmp_path).load(sec, cfg) is None and old.exists()


def test_a_description_is_a_record_of_kind_run_and_one_written_before_it_was_reads_through_its_migration(tmp_path):
    store = results.Store(tmp_path)
    store.save(TOY, ToyConfig(), {"x": np.zeros(2)}, 0.5)
    entry, sidecar = store.paths(TOY, ToyConfig())
    written = json.loads(sidecar.read_text())
    assert (written["kind"], written["schema"], written["section"]) == ("run", records.StoredRun.VERSION, "toy")
    # as the store wrote it before: the section in ``kind``, no schema, in the entry and beside it
    before = {"kind": "toy", **{k: v for k, v in written.items() if k not in ("kind", "schema", "section")}}
    arrays = storage.read_arrays(entry)
    arrays["__meta__"] = np.frombuffer(json.dumps(before).encode(), np.uint8)
    storage.write_arrays(entry, arrays, compress=True)
    sidecar.write_text(json.dumps(before))
    loaded, meta = store.load(TOY, ToyConfig())
    assert meta == records.StoredRun.load(sidecar) and (meta.section, meta.key) == ("toy", entry.stem)
    assert store.entries("toy") == [(entry, meta)] and json.loads(sidecar.read_text()) == before  # read, not rewritten
    # a description of another section, in either form, is not this run's: moved aside, trained again
    other = {**before, "kind": "other"}
    arrays["__meta__"] = np.frombuffer(json.dumps(other).encode(), np.uint8)
    storage.write_arrays(entry, arrays, compress=True)
    lines = []
    assert store.load(TOY, ToyConfig(), log=lines.append) is None
    assert "it holds a run of section 'other', not 'toy'" in lines[0]
