"""Where the largest 1% of jobs spend their wait (docs/benchmarks.md §4, item 6).

    .venv/bin/python scripts/largest_wait_causes.py --jobs 5000 --seed 7

Simulates the built-in cluster and teams with a generated workload (as ``bench gangs``) under
one policy and, after every cycle, reads the status of each of the largest 1% of jobs (by
GPUs, ``jobs // 100`` of them) still pending. Each status holds until the next cycle; the
time is summed per cause::

    share(cause) = SUM_{job, cycle} [status(job, cycle) is cause] * (t_next - t_cycle)
                   / SUM_{job, cycle} (t_next - t_cycle)

Causes are the statuses' :class:`~gpusched.framework.status.Cause` (``queue-limit``: its queue,
or one above it, is at its limit; ``borrowing``: beyond its guarantee, more than can be
borrowed now; ``quota-held``: the quota is held for another job; ``nodes``: the gang does not
fit; ``domain``, ``order``, ``other``), each split by whether the job holds the reservation
that cycle. ``simulate --json`` reports the same hours without the split
(``pending_h_top1pct_largest_by_cause``). It prints the table and the five longest waits with
their causes in hours.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from gpusched.cli.inputs import load_inputs
from gpusched.framework import Cause, Plan, Status
from gpusched.model import JobId
from gpusched.sim.engine import Simulation
from gpusched.sim.gang_bench import gang_specs
from gpusched.sim.runs import prepare


def cause(status: Status, plan: Plan, job: JobId) -> str:
    """The cause of ``job``'s wait this cycle (module docstring)."""
    what = (status.cause or Cause.OTHER).value
    return f"{what}, holding the reservation" if job in plan.reservations else what


def _longest_first(times: dict[str, float]) -> list[tuple[str, float]]:
    return sorted(times.items(), key=lambda item: -item[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--policy", default="gpusched")
    args = parser.parse_args()
    inputs = load_inputs(None, None, None, args.seed, args.jobs)
    largest = {
        j.id for j in sorted(inputs.jobs, key=lambda j: -j.gpu_milli)[: max(1, args.jobs // 100)]
    }
    spec = gang_specs([args.policy])[0]
    sim = prepare(inputs.nodes, inputs.jobs, spec, args.seed, inputs.config.queues)
    spent: defaultdict[JobId, defaultdict[str, float]] = defaultdict(lambda: defaultdict(float))
    last: tuple[float, dict[JobId, str]] = (0.0, {})

    def observe(s: Simulation) -> None:
        nonlocal last
        then, causes = last
        for job, what in causes.items():
            spent[job][what] += s.now - then
        plan = s.last_plan
        now: dict[JobId, str] = {}
        if plan is not None:
            for job in largest:
                status = plan.pending.get(job)
                if status is not None:
                    now[job] = cause(status, plan, job)
        last = (s.now, now)

    sim.observers.append(observe)
    sim.run(None)
    total: defaultdict[str, float] = defaultdict(float)
    for per_job in spent.values():
        for what, seconds in per_job.items():
            total[what] += seconds
    hours = sum(total.values()) / 3600
    print(f"{args.policy}, {args.jobs} jobs, seed {args.seed}: the {len(largest)} largest jobs")
    print(f"pended {hours:,.0f} h in all")
    for what, seconds in _longest_first(total):
        print(f"  {what:38s} {seconds / 3600:8,.0f} h  {100 * seconds / 3600 / hours:5.1f}%")
    waits = sorted(largest, key=lambda j: -(sim.records[j].wait or 0.0))[:5]
    for job in waits:
        rec = sim.records[job]
        parts = ", ".join(f"{w} {t / 3600:.0f} h" for w, t in _longest_first(spent[job]))
        print(f"  {job} ({rec.job.queue}) waited {(rec.wait or 0) / 3600:.1f} h: {parts}")


if __name__ == "__main__":
    main()
