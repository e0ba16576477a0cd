"""machine_info: what every benchmark JSON records about the machine it ran on."""

import json

from icml26_kernels.provenance import cpu_model, machine_info


def test_machine_info_is_json_and_names_the_machine():
    info = machine_info()
    json.dumps(info)  # JSON-ready
    assert info["cpu"] and isinstance(info["cpu"], str)
    assert info["cpu"] == cpu_model()
    assert info["logical_cpus"] >= 1
    assert "numpy" in info["versions"]  # icml26-kernels' one runtime dependency


def test_machine_info_reads_the_kernel_env(monkeypatch):
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    info = machine_info()
    assert info["env"]["ATEN_CPU_CAPABILITY"] == "default"
    assert info["env"]["OMP_NUM_THREADS"] == "1"
