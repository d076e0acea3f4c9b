"""The benchmark harness (``load/harness``): one percentile, the /proc reader, the runner."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from load.harness import procfs
from load.harness.profiler import summarize_collapsed
from load.harness.runner import Processes, rotation, run_main
from load.harness.stats import percentile, spread, summary
from testing import ManagedProcess

ROOT = Path(__file__).resolve().parents[2]


# -- percentile: nearest rank -------------------------------------------------------------------
def test_percentile_is_the_nearest_rank() -> None:
    ten = [float(x) for x in range(1, 11)]
    # q*n/100 whole: exactly that rank (the 5th, not the 6th, nor 5.5 interpolated)
    assert percentile(ten, 50) == 5.0
    assert percentile(ten, 90) == 9.0
    assert percentile(ten, 10) == 1.0
    assert percentile(ten, 100) == 10.0
    # not whole: the next rank up
    assert percentile(ten, 51) == 6.0
    assert percentile(ten, 99) == 10.0
    assert percentile(ten, 0) == 1.0
    thousand = list(range(1, 1001))
    assert percentile(thousand, 99.9) == 999  # 99.9 * 1000 / 100 is not quite 999.0 in floats
    assert percentile(thousand, 99) == 990
    assert percentile(range(1, 101), 95) == 95


def test_percentile_takes_unsorted_values_and_none_for_nothing() -> None:
    assert percentile([5.0, 1.0, 4.0, 2.0, 3.0], 50) == 3.0
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None


def test_summary_and_spread() -> None:
    s = summary([1.0, 2.0, 3.0, 4.0])
    assert s == {"n": 4, "min": 1.0, "p50": 2.0, "p95": 4.0, "p99": 4.0, "max": 4.0, "mean": 2.5}
    assert summary([]) == {"n": 0}
    assert spread([3.0, None, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0, "n": 3}
    assert spread([None]) is None


# -- procfs ---------------------------------------------------------------------------------------
def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_procfs_reads_this_process() -> None:
    pid = os.getpid()
    before, machine0 = procfs.cpu_seconds(pid), procfs.machine_busy_seconds()
    _burn(0.3)
    after, machine1 = procfs.cpu_seconds(pid), procfs.machine_busy_seconds()
    assert 0.2 <= after - before <= 2.0
    assert abs(after - procfs.own_cpu()) < 0.1  # the same figure, from /proc and from times()
    assert machine0 is not None and machine1 is not None and machine1 - machine0 >= 0.2
    rss = procfs.rss_bytes(pid)
    assert 10 * 2**20 < rss < 4 * 2**30
    assert procfs.threads(pid) >= 1
    assert "python" in procfs.cmdline(pid) or "pytest" in procfs.cmdline(pid)
    assert procfs.probe(None)() is None
    with pytest.raises(OSError):
        procfs.cpu_seconds(2**22 + 12345)  # no such pid
    assert procfs.probe(2**22 + 12345)() is None


def test_procfs_counts_descendants() -> None:
    code = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass\n"
    code += "time.sleep(30)"
    with ManagedProcess("child", [sys.executable, "-c", code]) as child:
        assert child.pid in procfs.children(os.getpid())
        time.sleep(1.0)
        own = procfs.cpu_seconds(os.getpid())
        assert procfs.cpu_seconds(os.getpid(), descendants=True) - own >= 0.3
        assert procfs.parent(child.pid) == os.getpid()


def test_phase_cpu_and_interference() -> None:
    phase = procfs.PhaseCpu(procfs.probe(os.getpid()))
    load = procfs.Interference([os.getpid()])
    _burn(0.2)
    assert phase.client_done() >= 0.15
    used, per_msg, after = phase.settle(1000, timeout=0.5, window=0.1)
    assert used is not None and used >= 0.15 and per_msg == pytest.approx(used / 1000 * 1e6)
    assert after is not None and after >= 0
    share = load.share()
    assert share is not None and 0.0 <= share <= 1.0
    assert procfs.Interference([None]).share() is None
    assert procfs.PhaseCpu(None).settle(10) == (None, None, None)


def test_interference_counts_reaped_children_as_own_when_asked() -> None:
    kids, alone = procfs.Interference([], children=True), procfs.Interference([])
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"
    subprocess.run([sys.executable, "-c", burn], check=True)  # a client run as a child, reaped
    assert kids._own() - kids.own0 >= 0.25  # type: ignore[operator]
    assert alone._own() - alone.own0 < 0.25  # type: ignore[operator]


def test_cpu_above_a_servers_rest() -> None:
    rest = procfs.rest_cores(procfs.probe(os.getpid()), 0.2)
    assert rest is not None and 0.0 <= rest < 0.5  # this test sleeps meanwhile
    assert procfs.rest_cores(None) is None
    ticking = iter([10.0, 11.0, 11.0, 11.0])  # a server at 1 s of CPU, then quiet
    phase = procfs.PhaseCpu(lambda: next(ticking), rest=0.5)
    used, per_msg, _after = phase.settle(1000, timeout=1.0, window=0.05)
    assert used == 1.0 and per_msg == pytest.approx(1000.0)
    above = phase.above_rest(1000)
    assert above is not None and above == pytest.approx((1.0 - 0.5 * phase.seconds) / 1000 * 1e6)
    assert procfs.PhaseCpu(None).above_rest(10) is None


# -- runner ---------------------------------------------------------------------------------------
def test_rotation_alternates_the_systems() -> None:
    assert ["".join(rotation("AB", rep)) for rep in (1, 2, 3, 4)] == ["AB", "BA", "AB", "BA"]
    assert ["".join(rotation("ABC", rep)) for rep in (1, 2, 3, 4)] == ["ABC", "BCA", "CAB", "ABC"]
    assert rotation([], 3) == []


class Fake:
    def __init__(self, name: str, stopped: list[str]) -> None:
        self.name, self.stopped = name, stopped

    def start(self, timeout: float) -> Fake:
        return self

    def stop(self) -> None:
        self.stopped.append(self.name)


def test_processes_are_stopped_in_reverse_order_also_when_interrupted() -> None:
    stopped: list[str] = []
    with pytest.raises(KeyboardInterrupt), Processes() as running:
        running.start(Fake("broker", stopped))
        running.add(Fake("gateway", stopped))
        raise KeyboardInterrupt
    assert stopped == ["gateway", "broker"]


def test_run_main_stops_everything_on_sigterm(tmp_path: Path, capsys: Any) -> None:
    stopped: list[str] = []
    procs: list[ManagedProcess] = []
    previous = signal.getsignal(signal.SIGTERM)

    def run() -> dict[str, Any]:
        with Processes() as running:
            running.add(Fake("fake", stopped))
            procs.append(running.start(ManagedProcess("sleeper", ["sleep", "60"]), 10))
            os.kill(os.getpid(), signal.SIGTERM)  # as CI's timeout would
            time.sleep(5)
        return {"errors": []}

    assert run_main(run, lambda doc, console: None, None) == 130
    assert stopped == ["fake"] and not procs[0].alive()
    assert "interrupted" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) == previous  # restored


def test_run_main_renders_writes_json_and_sets_the_exit_code(tmp_path: Path) -> None:
    out = tmp_path / "r" / "doc.json"
    seen: list[dict[str, Any]] = []
    assert run_main(lambda: {"errors": []}, lambda doc, console: seen.append(doc), str(out)) == 0
    assert out.exists() and "elapsed_s" in seen[0]
    assert run_main(lambda: {"errors": ["x"]}, lambda doc, console: None) == 1


def test_summarize_collapsed() -> None:
    text = "process 1;main (a.py:1);work (b.py:2) 3\nprocess 1;main (a.py:1);idle (c.py:3) 1\n"
    s = summarize_collapsed(text, focus=("b.py",))
    assert s["samples"] == 4
    assert s["self"][0] == ("work (b.py:2)", 75.0)
    assert ("main (a.py:1)", 100.0) in s["inclusive"]
    assert s["focus"] == [("work (b.py:2)", 75.0)]


# -- before/after: our broker from another checkout --------------------------------------------------
def test_baseline_peer_spec(tmp_path: Path) -> None:
    from load.peers import OursLauncher
    from load.scenarios import parse_args

    args = parse_args("broker", ["--peers", "tansu,ours@/tmp/old"])
    assert args.peer_names == ["tansu"] and args.baselines == ["/tmp/old"]
    args = parse_args("broker", ["--peers", "none", "--baseline-src", str(ROOT)])
    assert args.peer_names == [] and args.baselines == [str(ROOT)]
    with pytest.raises(SystemExit):
        parse_args("broker", ["--peers", "ours@/a", "--baseline-src", "/b"])
    assert "not a checkout" in (OursLauncher(tmp_path).unavailable() or "")
    (tmp_path / "framework" / "cli").mkdir(parents=True)
    (tmp_path / "framework" / "__init__.py").write_text("")
    (tmp_path / "framework" / "cli" / "main.py").write_text("")
    baseline = OursLauncher(tmp_path)
    assert baseline.name == "ours-baseline" and baseline.unavailable() is None
    # its PYTHONPATH and working directory win over the package installed in the venv (this checkout)
    assert baseline.imported_from() == str(tmp_path.resolve())
    assert OursLauncher().imported_from() == str(ROOT)
