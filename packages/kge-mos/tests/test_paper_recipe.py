"""Issue 64: the paper's recipe (benchmarks/paper.py) end to end offline.

A few triples in PyKEEN's TSV schema go through the recipe's loader (``TriplesFactory.from_path``
when pykeen is installed, else the package's ``load_tsv``); linear and MoS DistMult train,
checkpoint, reload and are scored by filtered MRR. Skipped in an installed wheel.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
LINT = Path(__file__).resolve().parents[3] / "tools" / "evidence_lint.py"
pytestmark = pytest.mark.skipif(not (BENCH / "paper.py").is_file(), reason="benchmarks not shipped")


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_smoke_writes_a_linted_json(tmp_path, capsys):
    paper = _load(BENCH / "paper.py", "kgemos_paper")
    out = tmp_path / "p.json"
    assert paper.main(["--smoke", "--out", str(out), "--quiet"]) == 0
    assert "epoch " not in capsys.readouterr().err  # --quiet turns train_kge's progress off
    doc = json.loads(out.read_text())
    assert {"recipe", "paper", "config", "smoke", "hardware", "results", "evidence"} <= set(doc)
    assert doc["recipe"] == "kge-mos" and doc["smoke"] is True
    r = doc["results"]
    assert r["n_entities"] == 12 and r["n_relations"] == 2 and r["n_train"] == 40
    assert r["loader"] in ("TriplesFactory.from_path", "load_tsv")
    for arm in ("linear", "mos"):
        assert len(r["arms"][arm]) == 3
        for m in r["arms"][arm]:
            assert 0 < m["mrr"] <= 1 and m["hits@1"] <= m["hits@3"] <= m["hits@10"] <= 1
    assert r["arms"]["mos"][0]["params"] > r["arms"]["linear"][0]["params"]
    if LINT.is_file():
        assert _load(LINT, "evidence_lint").check_evidence(doc["evidence"], "paper.json") == []


def test_both_loaders_give_the_same_ids(tmp_path):
    pytest.importorskip("pykeen")
    paper = _load(BENCH / "paper.py", "kgemos_paper")
    from icml26_kge_mos.data import load_tsv

    paper.write_smoke_tsv(tmp_path)
    pk, how = paper.load_data(str(tmp_path))
    own = load_tsv(tmp_path / "train.txt", tmp_path / "valid.txt", tmp_path / "test.txt")
    assert how == "TriplesFactory.from_path"

    # PyKEEN numbers the entities of train.txt only (sorted labels), load_tsv the union of the
    # three files: the ids may differ, the labelled triples may not
    def labels(d, part):
        e = {i: k for k, i in d.entity_to_id.items()}
        r = {i: k for k, i in d.relation_to_id.items()}
        return sorted((e[s], r[p], e[o]) for s, p, o in getattr(d, part).tolist())

    for part in ("train", "valid", "test"):
        assert labels(pk, part) == labels(own, part)


def test_paper_constants_and_defaults():
    paper = _load(BENCH / "paper.py", "kgemos_paper")
    P = paper.PAPER
    assert P["datasets"] == ["fb15k237", "wn18rr"] and P["n_components"] == 4
    args = paper.build_parser().parse_args([])
    assert args.dataset == P["datasets"][0] and args.k == P["n_components"]
    assert (args.dim, args.epochs, args.batch_size, args.lr) == (
        P["dim"],
        P["epochs"],
        P["batch_size"],
        P["lr"],
    )
    assert args.model == P["scorer"]
