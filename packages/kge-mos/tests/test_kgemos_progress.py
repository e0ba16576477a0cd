"""Issue 66 finding 4: ``train_kge`` and ``fit_1n`` show their progress by default (a line per
``epochs // 10`` epochs on stderr: epoch, that epoch's mean loss, elapsed seconds) and are silent
with ``progress=False``."""

import re

import pytest
import torch
from icml26_kge_mos import FreeQueryModel, KGEModel, QueryIndex, fit_1n, synthetic_graph, train_kge

LINE = re.compile(r"^epoch (\d+)/(\d+) loss (\d+\.\d+) \(\d+\.\d s\)$")


def _fit(**kw):
    trip = synthetic_graph(8, 2, n_queries=6, seed=0)
    torch.manual_seed(0)
    model = KGEModel(8, 1, 4, scorer="distmult", n_components=2)
    return train_kge(model, trip, epochs=20, batch_size=8, lr=0.05, **kw)


def test_default_prints_about_ten_progress_lines_to_stderr(capsys):
    hist = _fit()
    out, err = capsys.readouterr()
    assert out == ""  # stdout stays the caller's
    lines = err.strip().splitlines()
    assert [LINE.match(s) is not None for s in lines] == [True] * len(lines), lines
    epochs = [int(LINE.match(s).group(1)) for s in lines]
    assert epochs == list(range(2, 21, 2))  # every epochs // 10, the last included
    # each line reports that epoch's mean loss
    for s in lines:
        e, _, loss = LINE.match(s).groups()
        assert float(loss) == pytest.approx(hist[int(e) - 1], abs=6e-5)


def test_progress_false_prints_nothing_and_trains_the_same(capsys):
    loud = _fit()
    capsys.readouterr()
    quiet = _fit(progress=False)
    assert capsys.readouterr() == ("", "")
    assert quiet == loud


def test_log_and_log_every_route_and_space_the_lines(capsys):
    got = []
    _fit(log=got.append, log_every=7)
    assert capsys.readouterr() == ("", "")
    assert [int(LINE.match(s).group(1)) for s in got] == [7, 14, 20]
    got.clear()
    _fit(log=got.append, progress=False)  # the off switch wins over a given log
    assert got == []
    with pytest.raises(ValueError, match="log_every"):
        _fit(log_every=0)
    with pytest.raises(ValueError, match="log_every"):
        _fit(log_every=True)
    with pytest.raises(ValueError, match="progress"):
        _fit(progress="no")
    with pytest.raises(ValueError, match="log"):
        _fit(log="stderr")


def test_fit_1n_also_prints_by_default_and_progress_false_silences_it(capsys):
    trip = synthetic_graph(8, 2, n_queries=6, seed=0)
    labels = QueryIndex.from_triples(trip, 8, 1, reciprocal=False)

    def run(**kw):
        torch.manual_seed(0)
        model = FreeQueryModel(len(labels), 8, 3, n_components=2)
        return fit_1n(model, model.parameters(), labels, epochs=5, batch_size=4, lr=0.05, **kw)

    hist = run()
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and [int(LINE.match(s).group(1)) for s in lines] == [1, 2, 3, 4, 5]
    assert [float(LINE.match(s).group(3)) for s in lines] == pytest.approx(hist, abs=6e-5)
    assert run(progress=False) == hist
    assert capsys.readouterr() == ("", "")
