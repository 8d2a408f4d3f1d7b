"""Compare two results stores run by run: are the stored numbers of the same configs bit-identical?

    python tools/compare_stores.py OLD_STORE NEW_STORE

Entries are matched by section and config (the fields both configs have, so a field added by one version is
ignored), not by hash: the hash includes the code fingerprint, which differs between versions by design. For
each matched run it compares every array the two entries share, byte for byte, and reports arrays that only
one side has. Reads both store formats: ``<hash>.npz`` + ``.json`` (before the checksummed store) and
``<hash>.result``. Exit status 1 if any shared array differs.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def read_store(root: Path) -> list:
    """``[(kind, config dict, arrays)]`` of every entry under ``root``."""
    from compgen import results, storage

    entries = []
    for path in sorted(root.glob("*/*")):
        if path.parent.name in ("checkpoints", "damaged"):
            continue
        if path.suffix == ".result":
            arrays = storage.read_arrays(path)
            try:
                meta = results.described(arrays, path)
            except ValueError as error:
                raise SystemExit(f"compare_stores: {path}: {error}") from None
            entries.append((meta.section, meta.config, arrays))
        elif path.suffix == ".npz":  # the store's first layout: the section in the description's kind
            meta = json.loads(path.with_suffix(".json").read_text())
            with np.load(io.BytesIO(path.read_bytes())) as data:
                entries.append((meta["kind"], meta["config"], {k: data[k] for k in data.files}))
    return entries


def same_config(a: dict, b: dict) -> bool:
    return all(a[k] == b[k] for k in set(a) & set(b))


def compare(old, new):
    """Rows ``(kind, config, status, details)`` for every new entry."""
    rows = []
    for kind, config, arrays in new:
        match = [e for e in old if e[0] == kind and same_config(e[1], config)]
        if not match:
            rows.append((kind, config, "no old entry", ""))
            continue
        old_arrays = match[0][2]
        differing = []
        for name in sorted(set(arrays) & set(old_arrays)):
            a, b = np.asarray(old_arrays[name]), np.asarray(arrays[name])
            if a.shape != b.shape or a.dtype != b.dtype or a.tobytes() != b.tobytes():
                diff = np.nanmax(np.abs(a.astype(float) - b.astype(float))) if a.shape == b.shape else "shape"
                differing.append(f"{name} (max |diff| {diff})")
        only_new = sorted(set(arrays) - set(old_arrays))
        only_old = sorted(set(old_arrays) - set(arrays))
        details = "; ".join(
            filter(
                None,
                [
                    ("differ: " + ", ".join(differing)) if differing else "",
                    ("new arrays: " + ", ".join(only_new)) if only_new else "",
                    ("dropped arrays: " + ", ".join(only_old)) if only_old else "",
                ],
            )
        )
        rows.append((kind, config, "identical" if not differing else "DIFFERENT", details))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    args = parser.parse_args(argv)
    rows = compare(read_store(args.old), read_store(args.new))
    for kind, config, status, details in rows:
        name = config.get("model", "") + " " + str(config.get("split", config.get("masks", "")))
        print(f"{kind:16s} {name:40s} {status:10s} {details}")
    counts = {s: sum(r[2] == s for r in rows) for s in ("identical", "DIFFERENT", "no old entry")}
    print(f"{len(rows)} new entries: {counts}")
    return 1 if counts["DIFFERENT"] else 0


if __name__ == "__main__":
    sys.exit(main())
