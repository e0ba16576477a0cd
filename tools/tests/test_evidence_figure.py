"""tools/evidence_figure.py: the drawn interval, dot, zero line and target sit where the JSON says.

Coordinates are read back from the SVG, so a figure that draws the SE instead of the CI, drops the
sign flip of a lower-is-better comparison, or colours an unresolved row as resolved, fails here.
"""

from __future__ import annotations

import json
import re

import evidence_figure as fig
import pytest


def _c(**kw):
    c = {
        "name": "ours - base",
        "unit": "accuracy",
        "higher_is_better": True,
        "diff": 0.05,
        "ci95": [0.01, 0.09],
        "n": 10,
        "mde": 0.03,
        "target": 0.02,
        "resolved": True,
        "headroom": {"value": 0.2},
    }
    c.update(kw)
    return c


def _row(*comps):
    return {
        "package": "alpha",
        "evidence": {"schema": "icml26-evidence/1", "comparisons": list(comps)},
    }


def _attr(svg: str, cls: str, name: str) -> list[float]:
    tags = re.findall(rf'<[a-z]+ [^>]*class="{cls}"[^>]*>', svg)
    return [float(re.search(rf'{name}="([-0-9.]+)"', t).group(1)) for t in tags]


def _inv(x: float, span: tuple[float, float]) -> float:
    a, b = span
    return a + (x - fig.PLOT_X) / fig.PLOT_W * (b - a)


def test_interval_dot_zero_and_target_are_at_the_jsons_values():
    c = _c()
    svg = fig.render(_row(c))
    span = fig.scale(0.01, 0.09, 0.02)
    (x1,), (x2,) = _attr(svg, "ci", "x1"), _attr(svg, "ci", "x2")
    assert _inv(x1, span) == pytest.approx(0.01, abs=1e-3)
    assert _inv(x2, span) == pytest.approx(0.09, abs=1e-3)
    assert _inv(_attr(svg, "diff", "cx")[0], span) == pytest.approx(0.05, abs=1e-3)
    assert _inv(_attr(svg, "zero", "x1")[0], span) == pytest.approx(0.0, abs=1e-3)
    assert _inv(_attr(svg, "target", "x1")[0], span) == pytest.approx(0.02, abs=1e-3)
    assert fig.COLOURS["resolved"] in svg and fig.COLOURS["unresolved"] not in svg


def test_lower_is_better_is_drawn_so_that_right_is_better():
    """An MSE difference of -3 [-5, -1] (ours lower: better) is drawn at +3 [+1, +5]."""
    c = _c(higher_is_better=False, diff=-3.0, ci95=[-5.0, -1.0], target=None, resolved=False)
    svg = fig.render(_row(c))
    span = fig.scale(1.0, 5.0, None)
    assert _inv(_attr(svg, "diff", "cx")[0], span) == pytest.approx(3.0, abs=1e-2)
    assert _inv(_attr(svg, "zero", "x1")[0], span) == pytest.approx(0.0, abs=1e-2)
    assert _attr(svg, "diff", "cx")[0] > _attr(svg, "zero", "x1")[0]
    assert "target" not in re.findall(r'class="(\w+)"', svg)
    assert fig.COLOURS["unresolved"] in svg


def test_one_panel_per_comparison_and_check_sees_stale_figures(tmp_path):
    row = _row(_c(), _c(name="second"))
    assert len(_attr(fig.render(row), "ci", "x1")) == 2
    bench = tmp_path / "packages" / "alpha" / "benchmarks"
    bench.mkdir(parents=True)
    (bench / "reproduce_row.json").write_text(json.dumps(row))
    assert fig.check(tmp_path) and "missing" in fig.check(tmp_path)[0]
    fig.write(tmp_path)
    assert fig.check(tmp_path) == []
    row["evidence"]["comparisons"][0]["ci95"] = [0.0, 0.1]
    (bench / "reproduce_row.json").write_text(json.dumps(row))
    assert "stale" in fig.check(tmp_path)[0]
    assert fig.main(["--check", "--root", str(tmp_path)]) == 1
