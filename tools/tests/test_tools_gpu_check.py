"""tools/gpu_check.py: what it would run (no CUDA needed), the no-CUDA refusal, the report.

The report is checked on a synthetic workspace whose items really run (pytest, benchmarks as
subprocesses) while the machine probe is replaced by a fake CUDA card.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gpu_check
import pytest
import workspace
from conftest import PYPROJECT, REPO, TOOLS, write

SCRIPT = TOOLS / "gpu_check.py"
MARKERS = '\n[tool.pytest.ini_options]\nmarkers = ["gpu: needs CUDA", "slow: slow"]\n'


def cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300, **kw
    )


def test_list_names_every_member_and_every_benchmark_without_cuda():
    res = cli("--list")
    assert res.returncode == 0, res.stderr
    rows = {line.split("\t")[0]: line.split("\t")[1] for line in res.stdout.splitlines()}
    members = workspace.discover(REPO)
    assert {f"gpu-tests:{m.name}" for m in members} <= rows.keys()
    benches = {
        f"bench:{m.name}/{p.name}"
        for m in members
        for p in (m.path / "benchmarks").glob("bench_*.py")
    }
    assert benches <= rows.keys()  # none is silently left out
    assert "triton-api" in rows and "suite:kernels" in rows
    # the kernel benchmarks opt in; the others are listed with the reason they do not run
    for bench in ("latentmoe/bench_kernels.py", "lazyattention/bench_kernels.py"):
        assert "not a kernel benchmark" not in rows[f"bench:{bench}"]
    assert "not a kernel benchmark" in rows["bench:online-fair/bench_speed.py"]
    assert rows["gpu-tests:online-fair"] == "skip: no gpu-marked tests"
    assert not rows["gpu-tests:kernels"].startswith("skip: no gpu-marked")


def test_without_cuda_exits_2_with_a_clear_message(tmp_path):
    machine = gpu_check.probe_machine(sys.executable, gpu_check._env([]), REPO)
    if machine.get("cuda_available"):
        pytest.skip("this machine has CUDA")
    res = cli("--out", str(tmp_path / "rep"), "--only", "gpu-tests:online-fair")
    assert res.returncode == 2
    assert "gpu_check: no CUDA device:" in res.stderr and "--list" in res.stderr
    report = json.loads((tmp_path / "rep" / "gpu_check.json").read_text())
    assert report["error"].startswith("gpu_check: no CUDA device") and report["items"] == []


def test_out_is_required_unless_listing():
    res = cli()
    assert res.returncode == 2 and "--out DIR is required" in res.stderr


def test_member_requirements_expand_the_kernels_extras():
    members = workspace.discover(REPO)
    latentmoe = next(m for m in members if m.name == "latentmoe")
    base = gpu_check.member_requirements(latentmoe, members, dev=False)
    assert "triton" not in [gpu_check._req_name(r)[0] for r in base]  # opt-in for CPU users
    extras = gpu_check._test_extras(latentmoe)
    assert extras == ("triton",)  # the GPU check installs it
    reqs = gpu_check.member_requirements(latentmoe, members, extras=extras)
    names = [gpu_check._req_name(r)[0] for r in reqs]
    assert "triton" in names and "torch" in names and "transformers" in names  # dev group too
    assert not any(n.startswith("icml26") for n in names)
    kernels = members[0]
    assert "triton" in [
        gpu_check._req_name(r)[0]
        for r in gpu_check.member_requirements(kernels, members, extras=("triton",))
    ]


KERNEL = """\
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, n: tl.constexpr):
    a = tl.load(x_ptr + tl.arange(0, n))
    b = tl.dot(a, a, input_precision="ieee")
    tl.store(x_ptr, tl.math.erf(b))


def grid(n):
    return (triton.cdiv(n, 128),)
"""


def test_triton_api_check_names_the_missing_feature(tmp_path):
    """An older Triton (here a stand-in without tl.math and tl.dot's input_precision) is
    reported as the names it lacks, before any kernel is compiled."""
    src = write(tmp_path / "repo/src/kern.py", KERNEL)
    uses = gpu_check.triton_uses([src], tmp_path / "repo")
    names = {u["name"]: u["keywords"] for u in uses}
    assert names["triton.language.dot"] == ["input_precision"]
    assert {"triton.jit", "triton.cdiv", "triton.language.math.erf"} <= names.keys()
    fake = tmp_path / "fake"
    write(fake / "triton/__init__.py", "__version__ = '2.0.fake'\njit = cdiv = object()\n")
    write(
        fake / "triton/language/__init__.py",
        "constexpr = object()\ndef dot(a, b, acc=None, allow_tf32=True): ...\n"
        "def load(p): ...\ndef store(p, v): ...\ndef arange(a, b): ...\n",
    )
    item = gpu_check.Item(
        id="triton-api",
        kind="preflight",
        member=None,
        description="",
        args=["-c", gpu_check._TRITON_API_SCRIPT],
        cwd=tmp_path,
        stdin=json.dumps(uses),
    )
    env = {**gpu_check._env([]), "PYTHONPATH": str(fake)}
    row = gpu_check.run_item(item, sys.executable, env, 60, tmp_path)
    assert row["status"] == "failed"
    assert "installed Triton lacks" in row["reason"]
    assert "triton.language.dot(input_precision=...)" in row["reason"]
    assert "triton.language.math.erf" in row["reason"]
    assert "triton.jit" not in row["reason"] and row["result"]["triton"] == "2.0.fake"


GPU_TESTS = """\
import pytest


@pytest.mark.gpu
def test_gpu_ok():
    pass


@pytest.mark.gpu
def test_gpu_broken():
    assert 1 == 2, "planted"


@pytest.mark.gpu
@pytest.mark.skip(reason="not on this card")
def test_gpu_skipped():
    pass


def test_cpu_only_not_selected():
    raise AssertionError("a test without the gpu mark must not run")
"""


@pytest.fixture
def gpu_repo(fake_repo: Path) -> Path:
    alpha = fake_repo / "packages/alpha"
    (alpha / "pyproject.toml").write_text((alpha / "pyproject.toml").read_text() + MARKERS)
    write(alpha / "tests/test_alpha_gpu.py", GPU_TESTS)
    write(
        alpha / "benchmarks/bench_fast.py",
        """\
        # gpu-check: --json {json} --size 3  # the real shape
        import argparse, json, sys
        from icml26_alpha import double
        p = argparse.ArgumentParser()
        p.add_argument("--json")
        p.add_argument("--size", type=int)
        a = p.parse_args()
        full = {"bench": "fast", "out": double(list(range(a.size))), "from": "file"}
        open(a.json, "w").write(json.dumps(full))
        print("table on stderr", file=sys.stderr)
        print(json.dumps({"bench": "fast", "from": "stdout"}))
        """,
    )
    write(alpha / "benchmarks/bench_plain.py", "print('cpu only')\n")
    write(
        fake_repo / "packages/beta/benchmarks/bench_hangs.py",
        "# gpu-check:\nimport time\ntime.sleep(120)\n",
    )
    write(
        fake_repo / "packages/gamma/pyproject.toml",
        PYPROJECT.format(
            dist="icml26-gamma",
            desc="Gamma",
            deps='"definitely-not-installed-dist>=1"',
            paper="Gamma paper",
        )
        + MARKERS,
    )
    write(fake_repo / "packages/gamma/src/icml26_gamma/__init__.py", "")
    write(fake_repo / "packages/gamma/tests/test_g.py", GPU_TESTS)
    return fake_repo


FAKE_CARD = {
    "cuda_available": True,
    "device": "Fake H200",
    "capability": [9, 0],
    "torch": "2.11.0",
    "torch_cuda": "13.0",
    "triton": "3.6.0",
}


def test_report_schema_and_statuses_on_fake_items(gpu_repo, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(gpu_check, "probe_machine", lambda *a: dict(FAKE_CARD))
    monkeypatch.setitem(gpu_check.TIMEOUTS, "bench", 3.0)
    monkeypatch.setattr(gpu_check, "MIN_ITEM_SECONDS", 1.0)
    rc = gpu_check.main(["--root", str(gpu_repo), "--out", str(tmp_path / "rep")])
    assert rc == 1  # a planted failure
    report = json.loads((tmp_path / "rep" / "gpu_check.json").read_text())
    assert report["schema"] == 1 and report["machine"]["device"] == "Fake H200"
    assert {"started", "finished", "seconds", "commit", "budget_s", "summary"} <= report.keys()
    items = {row["id"]: row for row in report["items"]}
    for row in items.values():
        assert {"id", "kind", "member", "status", "reason", "seconds", "command"} <= row.keys()
        assert row["status"] in gpu_check.STATUSES
    assert report["summary"] == {
        s: sum(r["status"] == s for r in report["items"]) for s in gpu_check.STATUSES
    }

    alpha = items["gpu-tests:alpha"]
    assert alpha["status"] == "failed" and alpha["reason"] == "1 of 3 tests failed"
    assert alpha["counts"] == {"passed": 1, "failed": 1, "skipped": 1}
    by_name = {t["test"].split("::")[-1]: t for t in alpha["tests"]}
    assert by_name.keys() == {"test_gpu_ok", "test_gpu_broken", "test_gpu_skipped"}
    assert "planted" in by_name["test_gpu_broken"]["message"]
    assert by_name["test_gpu_skipped"]["message"] == "not on this card"

    fast = items["bench:alpha/bench_fast.py"]
    assert fast["status"] == "passed" and fast["seconds"] > 0
    assert fast["result"] == {"bench": "fast", "out": [0, 2, 4], "from": "file"}
    assert items["bench:alpha/bench_plain.py"]["reason"].startswith("not a kernel benchmark")
    hangs = items["bench:beta/bench_hangs.py"]
    # a time limit is not a failure of the code: incomplete, distinct from failed
    assert hangs["status"] == "incomplete" and hangs["reason"].startswith("timed out after 3")
    gamma = items["gpu-tests:gamma"]
    assert gamma["status"] == "skipped"
    assert gamma["reason"] == "missing: definitely-not-installed-dist (not installed)"
    assert items["gpu-tests:beta"]["reason"] == "no gpu-marked tests"
    assert items["triton-api"]["reason"] == "no Triton kernels in any member"
    log = (tmp_path / "rep" / "gpu_check.log").read_text()
    assert "planted" in log and "===== bench:alpha/bench_fast.py: passed =====" in log
    assert "Fake H200" in capsys.readouterr().out


def test_budget_skips_what_does_not_fit(gpu_repo, tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_check, "probe_machine", lambda *a: dict(FAKE_CARD))
    out = tmp_path / "r.json"
    rc = gpu_check.main(
        ["--root", str(gpu_repo), "--out", str(out), "--budget", "0", "--only", "alpha"]
    )
    assert rc == 0
    rows = json.loads(out.read_text())["items"]
    assert rows and all(r["status"] in ("skipped", "incomplete") for r in rows)
    over = [r for r in rows if r["reason"].startswith("budget exhausted")]
    assert over and all(r["status"] == "incomplete" for r in over)


def test_a_pytest_timeout_keeps_the_tests_that_finished(tmp_path):
    write(
        tmp_path / "m/tests/test_t.py",
        """\
        import time

        def test_a_fast():
            pass

        def test_b_hangs():
            time.sleep(120)
        """,
    )
    item = gpu_check.Item(
        id="suite:m",
        kind="suite",
        member="m",
        description="",
        args=["-m", "pytest", "tests", *gpu_check._PYTEST_ARGS],
        cwd=tmp_path / "m",
    )
    row = gpu_check.run_item(item, sys.executable, gpu_check._env([]), 8.0, tmp_path)
    assert row["status"] == "incomplete" and row["returncode"] is None
    assert row["reason"] == "timed out after 8 s (1 passed before that)"
    assert [(t["test"], t["status"]) for t in row["tests"]] == [
        ("tests/test_t.py::test_a_fast", "passed")
    ]


RECORDED = {
    "schema": 1,
    "machine": {"device": "NVIDIA H100 80GB HBM3", "torch": "2.9.0", "triton": "3.5.0"},
    "summary": {"passed": 1, "failed": 0, "incomplete": 1, "skipped": 0},
    "items": [
        {"id": "gpu-tests:kernels", "kind": "pytest", "status": "passed", "seconds": 41.2,
         "reason": "40 passed, 0 skipped"},
        {"id": "roofline:attention", "kind": "roofline", "status": "incomplete", "seconds": 150.0,
         "reason": "timed out after 150 s (3 rows measured before that)",
         "result": {"device": "NVIDIA H100 80GB HBM3", "peak_bw": 3.35e12, "done": False,
                    "rows": [
            {"case": "decode B=16 ctx=4096", "impl": "SDPA, contiguous re-rotated K/V",
             "ms": 0.2, "gbps": 1342.2, "frac_peak": 0.4, "vs": {}},
            {"case": "decode B=16 ctx=4096", "impl": "paged_decode (deferred RoPE)", "ms": 0.1,
             "gbps": 2684.4, "frac_peak": 0.8, "vs": {"SDPA, contiguous re-rotated K/V": 2.0},
             "unique_bytes": 268435456, "naive_bytes": 268435456, "note": None},
            {"case": "grouped", "impl": "torch._grouped_mm", "ms": None,
             "error": "torch 2.4 has no torch._grouped_mm"},
        ]}},
    ],
}  # fmt: skip


def test_table_renders_a_recorded_report(tmp_path, capsys):
    """The end-of-run markdown table from a recorded JSON (no GPU): statuses, GB/s, fraction
    of peak, ratio to each peer, unique vs naive bytes, and a peer that could not run."""
    path = tmp_path / "gpu_check.json"
    path.write_text(json.dumps(RECORDED))
    assert gpu_check.main(["--table", str(path)]) == 0
    out = capsys.readouterr().out
    assert "## gpu_check on NVIDIA H100 80GB HBM3" in out
    assert "| roofline:attention | incomplete | 150.0 | timed out after 150 s" in out
    lines = [ln for ln in out.splitlines() if "paged_decode (deferred RoPE)" in ln]
    assert len(lines) == 1
    cells = [c.strip() for c in lines[0].strip("|").split("|")]
    assert cells[:6] == ["decode B=16 ctx=4096", "paged_decode (deferred RoPE)", "0.100", "2684",
                         "", "0.80"]  # fmt: skip
    assert cells[6] == "SDPA, contiguous re-rotated K/V: 2.00x"
    assert "unique 256 MiB of 256 MiB" in cells[7]
    assert "torch 2.4 has no torch._grouped_mm" in out
    seps = [ln for ln in out.splitlines() if ln.startswith("|---")]
    assert len(seps) == 2  # the item table and the roofline table


def test_list_shows_the_roofline_items_and_their_peers():
    res = cli("--list")
    assert res.returncode == 0, res.stderr
    rows = {ln.split("\t")[0]: ln for ln in res.stdout.splitlines()}
    assert "roofline:attention" in rows and "roofline:grouped-mlp" in rows
    for peer in ("in-place re-rotation", "causal_lower_right", "distinct documents", "CUDA graph"):
        assert peer in rows["roofline:attention"], peer
    for peer in ("torch._grouped_mm", "dense bf16 GEMMs", "fwd+bwd", "bounded autotune"):
        assert peer in rows["roofline:grouped-mlp"], peer
    for name in ("_ROOFLINE_ATTENTION", "_ROOFLINE_MLP"):  # the scripts at least compile
        compile(getattr(gpu_check, name), name, "exec")
