"""Instructions of one 5,000-node scheduling cycle, counted by callgrind (docs/benchmarks.md §5).

    .venv/bin/python scripts/cycle_instructions.py --policy gpusched
    .venv/bin/python scripts/cycle_instructions.py --policy gpusched-topo --topology

Wall time on a shared 2-vCPU VM moves with the machine (the same cycle took 0.94 s on one VM
and 1.9-3.6 s on another); an instruction count does not. This runs the ``bench cycle`` setup
under ``valgrind --tool=callgrind --instr-atstart=no`` (setup runs uninstrumented), schedules
one cold cycle to warm the per-layout caches, then switches instrumentation on with
``callgrind_control -i on`` around the second cold ``schedule()`` on the same snapshot and
prints its instruction total (``PYTHONHASHSEED=0``, so dict and set orders repeat). About ten
minutes on a 2-vCPU VM. Needs valgrind (Debian package ``valgrind``); it is not a dependency
of gpusched.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def _child(policy: str, topology: bool, go: Path, done: Path) -> None:
    """The process valgrind runs: the setup, a warm cycle, then the counted one."""
    from gpusched.framework import PluginContext
    from gpusched.scheduler import policy_spec, schedule
    from gpusched.scheduler.build import build_profile
    from gpusched.sim.cycle_bench import build_cycle_setup

    setup = build_cycle_setup(5000, 10000, topology=topology)
    shapes = [t.shape for j in setup.snapshot.pending for t in j.tasks]
    profile = build_profile(policy_spec(policy), PluginContext(workload_hint=shapes, seed=1))
    schedule(setup.snapshot, profile)
    print("READY", flush=True)
    while not go.exists():
        time.sleep(0.2)
    plan = schedule(setup.snapshot, profile)
    done.write_text(f"{len(plan.binds)} {len(plan.evictions)}", encoding="utf-8")
    while done.exists():  # the parent switches instrumentation off, then removes it
        time.sleep(0.2)


def _wait_for(predicate: Callable[[], bool], proc: subprocess.Popen[str], what: str) -> None:
    """Poll ``predicate`` until it holds; exit if valgrind ends first."""
    while not predicate():
        if proc.poll() is not None:
            sys.exit(f"valgrind exited ({proc.returncode}) before {what}")
        time.sleep(1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default="gpusched")
    parser.add_argument("--topology", action="store_true", help="HGX nodes, as bench cycle's")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.policy, args.topology, args.dir / "go", args.dir / "done")
        return
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} not found: install valgrind (Debian: apt-get install valgrind)")
    work = Path(tempfile.mkdtemp(prefix="gpusched-callgrind-"))
    out, log = work / "callgrind.out", work / "child.log"
    cmd = [
        "valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
        sys.executable, __file__, "--child", "--dir", str(work), "--policy", args.policy,
        *(["--topology"] if args.topology else []),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    with log.open("w", encoding="utf-8") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.DEVNULL, env=env, text=True)
        print(f"setting up under valgrind (pid {proc.pid}; several minutes) ...", flush=True)
        _wait_for(lambda: "READY" in log.read_text(encoding="utf-8"), proc, "the setup ended")
        subprocess.run(
            ["callgrind_control", "-i", "on", str(proc.pid)], check=True, stdout=subprocess.DEVNULL
        )
        (work / "go").touch()
        print("counting one cold cycle ...", flush=True)
        _wait_for((work / "done").exists, proc, "the cycle ended")
        subprocess.run(
            ["callgrind_control", "-i", "off", str(proc.pid)], check=True, stdout=subprocess.DEVNULL
        )
        binds, evictions = (work / "done").read_text(encoding="utf-8").split()
        (work / "done").unlink()
        proc.wait()
    totals = [
        int(m.group(1))
        for f in work.glob("callgrind.out*")
        for m in re.finditer(r"^totals: (\d+)", f.read_text(encoding="utf-8"), re.MULTILINE)
    ]
    print(
        f"{args.policy}{' (topology)' if args.topology else ''}, cold cycle: "
        f"{sum(totals) / 1e9:.2f} G instructions ({binds} binds, {evictions} evictions)"
    )
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
