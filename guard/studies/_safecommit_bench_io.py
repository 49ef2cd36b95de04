"""SafeCommitBench-Controlled: the frozen JSONL splits, written and read (:mod:`guard.studies.safecommit_bench`)."""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from guard.errors import CorpusError
from guard.jsonio import json_lines, loads_strict
from guard.safecommit.types import Action, ProbeSpec, World
from guard.studies._safecommit_bench_data import ACTION_NAMES as ACTION_NAMES
from guard.studies._safecommit_bench_data import BASE_SEED as BASE_SEED
from guard.studies._safecommit_bench_data import DATA_DIR as DATA_DIR
from guard.studies._safecommit_bench_data import DEFAULT_ETA as DEFAULT_ETA
from guard.studies._safecommit_bench_data import FAMILIES as FAMILIES
from guard.studies._safecommit_bench_data import MAX_WORLDS as MAX_WORLDS
from guard.studies._safecommit_bench_data import METHODS as METHODS
from guard.studies._safecommit_bench_data import PENALTY as PENALTY
from guard.studies._safecommit_bench_data import REVERSIBLE as REVERSIBLE
from guard.studies._safecommit_bench_data import REWARD as REWARD
from guard.studies._safecommit_bench_data import SPLIT_SIZES as SPLIT_SIZES
from guard.studies._safecommit_bench_data import SPLITS as SPLITS
from guard.studies._safecommit_bench_data import UTILITY as UTILITY
from guard.studies._safecommit_bench_data import BoolArray as BoolArray
from guard.studies._safecommit_bench_data import Episodes as Episodes
from guard.studies._safecommit_bench_data import FloatArray as FloatArray
from guard.studies._safecommit_bench_data import IntArray as IntArray
from guard.studies._safecommit_bench_data import Row as Row
from guard.studies._safecommit_bench_data import generate as generate
from guard.studies._safecommit_bench_data import split_episodes as split_episodes


def _facts(family: str, gamma_row: BoolArray) -> dict[str, str]:
    if family == "stale":
        return {"evidence": "pending"}
    if family == "authorization_drift" and not gamma_row[0]:
        return {"authority": "missing"}
    return {}


def episode_records(eps: Episodes, split: str) -> Iterator[Row]:
    """One JSON-ready dict per episode (schema: see the module docstring)."""
    for i in range(len(eps)):
        family = FAMILIES[int(eps.family[i])]
        names = [f"w{j}" for j in np.flatnonzero(eps.present[i])]
        slots = [int(j) for j in np.flatnonzero(eps.present[i])]
        acts = ACTION_NAMES[family]
        yield {
            "id": f"{split}-{i:05d}",
            "family": family,
            "actions": [
                {
                    "name": a,
                    "reward": float(REWARD[j]),
                    "severity_penalty": float(PENALTY[j]),
                    "reversible": REVERSIBLE[j],
                }
                for j, a in enumerate(acts)
            ],
            "worlds": [
                {
                    "name": name,
                    "facts": _facts(family, eps.gamma[i, j]),
                    "score": float(eps.scores[i, j]),
                    "weight": float(eps.weights[i, j]),
                }
                for name, j in zip(names, slots, strict=True)
            ],
            "safe": {
                name: [acts[a] for a in range(3) if eps.gamma[i, j, a]] for name, j in zip(names, slots, strict=True)
            },
            "probes": [
                {"name": f"is_{p}", "cost": 1.0, "outcomes": {q: "yes" if q == p else "no" for q in names}}
                for p in names
            ],
            "true_world": f"w{int(eps.true[i])}",
        }


def _gzip_bytes(lines: Iterator[str]) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        for line in lines:
            gz.write(line.encode("utf-8") + b"\n")
    return buf.getvalue()


def split_bytes(split: str, *, base_seed: int = BASE_SEED) -> bytes:
    """The gzipped JSONL of one frozen split, byte for byte (gzip mtime 0, no file name)."""
    eps = split_episodes(split, base_seed=base_seed)
    return _gzip_bytes(json.dumps(r, separators=(",", ":")) for r in episode_records(eps, split))


def write_splits(directory: Path | str, *, base_seed: int = BASE_SEED) -> list[Path]:
    """Write ``{train,validation,calibration,test}.jsonl.gz`` into ``directory``."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for split in SPLITS:
        path = out / f"{split}.jsonl.gz"
        path.write_bytes(split_bytes(split, base_seed=base_seed))
        paths.append(path)
    return paths


def read_split(path: Path | str) -> list[Row]:
    """The episode dicts of one gzipped JSONL split."""
    try:
        with gzip.open(path, "rt", encoding="utf-8", newline="") as fh:
            text = fh.read()
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise CorpusError(f"{path}: not a gzipped JSONL SafeCommitBench split ({exc})") from exc
    return [loads_strict(line, f"{path}:{number}") for number, line in json_lines(text)]


def episode_problem(record: Row) -> tuple[list[World], list[Action], dict[str, list[str]], list[ProbeSpec]]:
    """Worlds, actions, safety map and probes of one episode dict, as the controller takes them."""
    try:
        worlds = [World(w["name"], w["facts"], w["score"], w["weight"]) for w in record["worlds"]]
        actions = [Action(a["name"], a["reward"], a["severity_penalty"], a["reversible"]) for a in record["actions"]]
        probes = [ProbeSpec(p["name"], p["cost"], p["outcomes"]) for p in record["probes"]]
        return worlds, actions, {k: list(v) for k, v in record["safe"].items()}, probes
    except (KeyError, TypeError) as exc:
        raise CorpusError(f"episode {record.get('id')!r}: missing or malformed field {exc}") from exc
