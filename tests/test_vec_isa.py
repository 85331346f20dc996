"""Inductor's probe of the host's vector instructions: once per machine, recorded, and
never inside a cell's compile (runner.measure.vec_isa)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from torch._inductor import config as inductor_config

from runner.backends import registry
from runner.measure import vec_isa

pytestmark = pytest.mark.skipif(
    not vec_isa._x86(), reason="Inductor probes vector instructions on x86 only"
)

_CHILD = """
import json, os, subprocess
from runner.measure import vec_isa
from torch._inductor import config, cpu_vec_isa
skipped = vec_isa.ensure()
# What Inductor picks next, and how many programs it loads in processes of its own
# to pick it (each set's check and its features' checks).
loads, check_call = [], subprocess.check_call
subprocess.check_call = lambda *a, **k: (loads.append(a), check_call(*a, **k))[1]
picked = cpu_vec_isa.pick_vec_isa()
print(json.dumps({"skipped": skipped, "env": os.environ.get(vec_isa.VEC_ISA_OK_ENV),
                  "config": config.cpp.vec_isa_ok, "picked": str(picked),
                  "loads": len(loads)}))
"""


@pytest.fixture
def fresh(tmp_path, monkeypatch) -> Iterator[Path]:
    """A cache directory of its own, and neither the switch nor the config set."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(vec_isa.VEC_ISA_OK_ENV, raising=False)
    with inductor_config.patch({"cpp.vec_isa_ok": None}):
        yield tmp_path / "cache"


def _record(builds: list[str], **fields) -> Path:
    candidates = vec_isa.advertised()
    path = vec_isa.answer_path(candidates)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"advertised": candidates, "builds": builds, "checks": {}, **fields}
    path.write_text(json.dumps({k: v for k, v in record.items() if v is not None}))
    return path


def _child(env: dict[str, str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_a_recorded_answer_skips_the_probe_here_and_in_the_processes_started_after(fresh):
    _record(vec_isa.advertised())
    assert vec_isa.known()
    assert os.environ[vec_isa.VEC_ISA_OK_ENV] == "1" and inductor_config.cpp.vec_isa_ok is True
    # A process this one starts (the minifier's, a repro's) inherits the switch.
    child = _child(dict(os.environ))
    assert (child["skipped"], child["env"], child["config"]) == (True, "1", True)


def test_a_record_without_the_feature_checks_is_not_used(fresh):
    """A record of the first format (each set's answer, none of its features') would
    leave every process to check the features again: it counts as no record."""
    _record(vec_isa.advertised(), checks=None)
    assert not vec_isa.known()
    assert vec_isa.VEC_ISA_OK_ENV not in os.environ and inductor_config.cpp.vec_isa_ok is None


def test_an_answer_short_of_what_the_cpu_advertises_leaves_the_probe_to_inductor(fresh):
    advertised = vec_isa.advertised()
    assert advertised, "an x86 CPU advertises at least one of Inductor's sets"
    _record(advertised[1:])
    assert not vec_isa.known()
    assert vec_isa.VEC_ISA_OK_ENV not in os.environ and inductor_config.cpp.vec_isa_ok is None


def test_a_switch_the_user_set_stands(fresh, monkeypatch):
    _record(vec_isa.advertised())
    monkeypatch.setenv(vec_isa.VEC_ISA_OK_ENV, "0")
    assert not vec_isa.known() and not vec_isa.ensure()
    assert os.environ[vec_isa.VEC_ISA_OK_ENV] == "0"


def test_the_cells_that_build_cpp_are_those_probed_before_their_compile():
    inductor, aoti = registry.get("inductor"), registry.get("aot_inductor")
    assert inductor.builds_cpp("cpu", "default")
    assert not inductor.builds_cpp("cuda", "max-autotune+freezing")
    assert inductor.builds_cpp("cuda", "default+cpp_wrapper")
    assert aoti.builds_cpp("cuda", "default")
    assert not registry.get("eager").builds_cpp("cpu", "none")


@pytest.mark.slow
def test_the_first_cell_probes_and_records_what_every_later_process_reads(fresh):
    """Inductor's real probe (builds and loads each advertised set), in a process of its
    own; a second process finds the record and builds nothing."""
    env = {k: v for k, v in os.environ.items() if k != vec_isa.VEC_ISA_OK_ENV}
    first = _child(env)
    assert (first["skipped"], first["env"], first["config"]) == (True, "1", True)
    (record,) = fresh.glob("zoo-matrix/inductor-vec-isa-*.json")
    answer = json.loads(record.read_text())
    assert answer["builds"] == answer["advertised"] == vec_isa.advertised()
    assert answer["checks"] and all(isinstance(v, bool) for v in answer["checks"].values())
    written = record.stat().st_mtime_ns
    # The second process reads the record: Inductor picks the same set, and loads no
    # program to pick it (without the recorded feature checks: one per feature).
    second = _child(env)
    assert second == {**first, "loads": 0}
    assert record.stat().st_mtime_ns == written
    # A process started with the switch set (as the minifier's are) uses the record too.
    assert _child({**env, vec_isa.VEC_ISA_OK_ENV: "1"}) == second
