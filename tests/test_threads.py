"""The default thread count: one per physical performance core the process may run on.

The topology cases run the library's rule on small sysfs trees written here (SMT pairs, an Intel
hybrid part, affinity masks smaller than the machine, older kernels, no topology at all), never on
the machine the tests run on; the environment and affinity cases run a fresh interpreter, since the
default is settled once per process."""
import os
import subprocess
import tempfile
import sys

import pytest

import pylowbit as lb


def cpulist(cpus) -> str:
    return ",".join(str(c) for c in sorted(cpus))


def write_tree(root, cores, online=None, hybrid=None, sibling_file="core_cpus_list"):
    """A /sys tree: `cores` is a list of SMT sibling groups; `hybrid` = (P-core CPUs, E-core CPUs)
    writes the two PMU lists an Intel hybrid part has; sibling_file=None writes no topology."""
    cpus = sorted(c for core in cores for c in core)
    base = root / "devices" / "system" / "cpu"
    base.mkdir(parents=True)
    (base / "online").write_text(cpulist(online if online is not None else cpus) + "\n")
    for core in cores:
        for c in core:
            topo = base / f"cpu{c}" / "topology"
            topo.mkdir(parents=True)
            if sibling_file:
                (topo / sibling_file).write_text(cpulist(core) + "\n")
    if hybrid:
        for pmu, members in zip(("cpu_core", "cpu_atom"), hybrid):
            (root / "devices" / pmu).mkdir(parents=True)
            (root / "devices" / pmu / "cpus").write_text(cpulist(members) + "\n")
    return root


# 4 cores with 2 threads each, numbered the way Linux numbers them on Intel: siblings c and c + 4.
SMT4 = [[c, c + 4] for c in range(4)]
# An Intel hybrid laptop part: 6 P-cores with SMT (CPUs 0-11, siblings 2k, 2k + 1), 8 E-cores (12-19).
P_CORES = [[2 * k, 2 * k + 1] for k in range(6)]
E_CORES = [[c] for c in range(12, 20)]
HYBRID = dict(cores=P_CORES + E_CORES, hybrid=(range(0, 12), range(12, 20)))


def test_smt_pairs_count_once(tmp_path):
    n, why = lb.threads_for_topology(write_tree(tmp_path, SMT4))
    assert n == len(SMT4)
    assert "SMT siblings once" in why and f"of {2 * len(SMT4)} allowed" in why


def test_older_kernels_thread_siblings_list(tmp_path):
    root = write_tree(tmp_path, SMT4, sibling_file="thread_siblings_list")
    assert lb.threads_for_topology(root)[0] == len(SMT4)


def test_no_smt_each_cpu_is_a_core(tmp_path):
    cores = [[c] for c in range(6)]
    assert lb.threads_for_topology(write_tree(tmp_path, cores))[0] == 6


@pytest.mark.parametrize("allowed, expect", [
    ("0", 1),        # one CPU
    ("0,4", 1),      # both threads of one core
    ("0-1,4", 2),    # two cores, one of them with both threads
    ("1-3", 3),      # one thread of three cores
    ("0-7", 4),      # the whole machine
])
def test_affinity_smaller_than_the_machine(tmp_path, allowed, expect):
    n, why = lb.threads_for_topology(write_tree(tmp_path, SMT4), allowed)
    assert n == expect


def test_affinity_counts_only_online_cpus(tmp_path):
    root = write_tree(tmp_path, SMT4, online=range(0, 2))  # CPUs 2-7 offline
    assert lb.threads_for_topology(root, "0-7")[0] == 2


def test_hybrid_leaves_efficiency_cores_out(tmp_path):
    n, why = lb.threads_for_topology(write_tree(tmp_path, **HYBRID))
    assert n == len(P_CORES)
    assert "performance cores" in why and f"{len(E_CORES)} efficiency-core CPUs left out" in why


@pytest.mark.parametrize("allowed, expect", [
    ("0-3,12-19", 2),  # two P-cores (both threads) and all E-cores: the E-cores are left out
    ("1,12", 1),       # one P-core thread and one E-core
    ("12-15", 4),      # only E-cores: they are what the process was given
])
def test_hybrid_within_affinity(tmp_path, allowed, expect):
    n, why = lb.threads_for_topology(write_tree(tmp_path, **HYBRID), allowed)
    assert n == expect
    if allowed == "12-15":
        assert "only efficiency cores allowed" in why


def test_cpus_without_topology_count_alone(tmp_path):
    root = write_tree(tmp_path, SMT4, sibling_file=None)
    n, why = lb.threads_for_topology(root)
    assert n == 8 and "8 CPUs without topology" in why


def test_no_sysfs_falls_back_to_logical_cpus(tmp_path):
    n, why = lb.threads_for_topology(tmp_path / "absent", "0-5")
    assert n == 6 and "no CPU topology" in why
    n, why = lb.threads_for_topology(None)  # no tree at all: what non-Linux systems start from
    assert n == os.cpu_count() and "online logical CPU" in why


@pytest.mark.parametrize("bad", ["", "a", "3-1", "0-", "1,,2", "-1", "0 1"])
def test_malformed_cpu_list_is_an_error(tmp_path, bad):
    with pytest.raises(ValueError, match="CPU list"):
        lb.threads_for_topology(write_tree(tmp_path, SMT4), bad)


# ---- the process's own default ----------------------------------------------------------------

def fresh(code, env=None):
    """Run code in a new interpreter that has imported pylowbit as lb but not yet used a thread."""
    e = {k: v for k, v in os.environ.items() if k != "PYLOWBIT_THREADS"}
    e.update(env or {})
    # run outside the source tree, so that `import pylowbit` finds the installed package (what
    # -P does from Python 3.11 on; the wheels are tested on 3.9 and 3.10 too)
    r = subprocess.run([sys.executable, "-c", "import pylowbit as lb\n" + code], cwd=tempfile.gettempdir(),
                       capture_output=True, text=True, env=e, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Linux rule")
def test_default_is_the_rule_on_this_machines_tree():
    out = fresh("import os\nn, why = lb.threads_for_topology('/sys', ','.join(map(str, "
                "os.sched_getaffinity(0))))\nprint(lb.get_threads(), n, lb.threads_origin() == why)")
    threads, n, same = out.split()
    assert threads == n and same == "True"
    assert 1 <= int(threads) <= len(os.sched_getaffinity(0))


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux only: sched_setaffinity")
def test_default_is_limited_by_the_affinity_mask():
    cpu = min(os.sched_getaffinity(0))
    out = fresh(f"import os\nos.sched_setaffinity(0, {{{cpu}}})\n"
                "print(lb.get_threads(), lb.threads_origin(), sep=';')")
    n, why = out.split(";")
    assert n == "1" and "of 1 allowed logical CPU" in why


@pytest.mark.skipif(sys.platform != "win32", reason="the Windows rule")
def test_default_on_windows_is_its_processor_information():
    out = fresh("print(lb.get_threads(), lb.threads_origin(), sep=';')")
    n, why = out.split(";")
    assert "Windows processor information" in why, why
    assert 1 <= int(n) <= os.cpu_count()


def test_environment_overrides():
    assert fresh("print(lb.get_threads(), lb.threads_origin())", {"PYLOWBIT_THREADS": "3"}) == \
        "3 PYLOWBIT_THREADS=3"


@pytest.mark.parametrize("bad", ["0", "-2", "abc", "4x", "100000"])
def test_bad_environment_is_ignored_and_said(bad):
    default = fresh("print(lb.get_threads())")
    out = fresh("print(lb.get_threads()); print(lb.threads_origin())", {"PYLOWBIT_THREADS": bad})
    n, why = out.splitlines()
    assert n == default
    assert f"PYLOWBIT_THREADS={bad} ignored" in why


def test_set_threads_is_the_origin():
    out = fresh("lb.set_threads(5); print(lb.get_threads(), lb.threads_origin())")
    assert out == "5 set_threads(5)"


def test_info_shows_count_and_origin():
    out = fresh("from pylowbit.cli import main; main(['info'])", {"PYLOWBIT_THREADS": "2"})
    fields = dict(ln.split(None, 1) for ln in out.splitlines() if " " in ln)
    assert fields["threads"] == "2"
    assert fields["threads_origin"] == "PYLOWBIT_THREADS=2"


def test_bench_default_thread_list_uses_the_default():
    out = fresh("import argparse\nfrom pylowbit.commands import bench\n"
                "p = argparse.ArgumentParser().add_subparsers()\n"
                "print(bench.add_parser(p).get_default('threads'))", {"PYLOWBIT_THREADS": "3"})
    assert out == "1,3"
    assert fresh("import argparse\nfrom pylowbit.commands import bench\n"
                 "p = argparse.ArgumentParser().add_subparsers()\n"
                 "print(bench.add_parser(p).get_default('threads'))", {"PYLOWBIT_THREADS": "1"}) == "1"
