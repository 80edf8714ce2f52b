"""gpusched vs kube-scheduler on one kwok cluster, on the real control plane (docs/live.md).

    .venv/bin/python scripts/bench_live.py --nodes 1000 --pods 10000 --gangs 1000 --repeat 3 \
        --phases plain,gangs,failover --out bench-live.json

One control plane (etcd, kube-apiserver with request limits and priority-and-fairness off,
kwok) and one set of fake nodes (8 GPUs each) serve every run; between runs all pods are
deleted. ``--repeat N`` runs every (scheduler, phase) N times, interleaved (gpusched then
kube-scheduler, then again), so both see the same machine over the same minutes; the machine's
load (``uptime``) is recorded before every run, and the end prints the median, minimum and
maximum of each figure and of the gpusched / kube-scheduler ratio. For each scheduler:

* **plain**: ``--pods`` single-GPU pods created by 32 client threads; measured: pods bound,
  pods bound per second (bound / (last bind seen - first create sent)), create-to-bound latency
  p50/p99 (client clock: POST sent -> watch shows ``spec.nodeName``). Pods beyond the GPU
  capacity stay pending.
* **gangs**: ``--gangs`` PodGroups of ``--gang-size`` pods of ``--gang-gpus`` GPUs each (by
  default twice the capacity, so not every gang can run); measured: gangs complete, gangs
  partially placed at the end and at most at once (replaying the binds in the order seen),
  GPUs held by partial gangs at the end, and bind throughput.

kube-scheduler runs with its client QPS and burst raised to 5000 (``--kube-qps``); it ignores
PodGroups, so its gang numbers show what pod-by-pod scheduling does to gangs.

* **backlog**: the same ``--pods`` single-GPU pods created *before* the scheduler starts, so
  the load generator is idle while the scheduler works; measured: seconds from the
  scheduler's start to the last bind and pods bound per second over that span (the
  scheduler's own rate on this control plane, start-up and cache sync included).
* **failover** (gpusched only): two replicas with leader election; ``--failover-pods``
  single-GPU pods are created; once a third of them is bound the leader is killed (SIGKILL, no
  Lease release). Measured: the takeover time (kill -> first bind by the standby, and kill ->
  Lease holder changed), then the final state: every pod bound, no pod seen on two nodes, no
  GPU index given twice on a node, no node's GPUs beyond its capacity.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from e2e.controlplane import ControlPlane, binaries  # noqa: E402
from e2e.kube import POD_GROUP_LABEL, check, node_manifest, pod_manifest  # noqa: E402

JsonObj = dict[str, Any]
NS = "bench"
LEASE_NS = "gpusched-system"


class Recorder:
    """Watches pods in the bench namespace; remembers when each was first seen bound."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.bound: dict[str, float] = {}
        self.order: list[str] = []
        self.nodes: dict[str, str] = {}
        self.gpus: dict[str, str] = {}
        self.moved: list[str] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        with self.plane.client(timeout_s=600) as http:
            listing = check(http.get(f"/api/v1/namespaces/{NS}/pods"))
            rv = listing["metadata"]["resourceVersion"]
            while not self.stop.is_set():
                params = {
                    "watch": "true",
                    "resourceVersion": rv,
                    "timeoutSeconds": "60",
                    "allowWatchBookmarks": "true",
                }
                try:
                    rv = self._watch(http, params, rv)
                except (httpx.HTTPError, KeyError):  # broken connection: watch again
                    time.sleep(1)

    def _watch(self, http: httpx.Client, params: dict[str, str], rv: str) -> str:
        """One watch request; the last resourceVersion seen."""
        with http.stream("GET", f"/api/v1/namespaces/{NS}/pods", params=params) as r:
            for line in r.iter_lines():
                if self.stop.is_set():
                    return rv
                if line:
                    rv = self._event(json.loads(line), rv)
        return rv

    def _event(self, event: JsonObj, rv: str) -> str:
        obj = event["object"]
        rv = obj["metadata"].get("resourceVersion", rv)
        name = obj["metadata"].get("name")
        node = obj.get("spec", {}).get("nodeName")
        if event["type"] not in ("ADDED", "MODIFIED") or not node:
            return str(rv)
        with self.lock:
            if name not in self.bound:
                self.bound[name] = time.time()
                self.order.append(name)
                self.nodes[name] = node
                annotations = obj["metadata"].get("annotations") or {}
                self.gpus[name] = annotations.get("gpusched.dev/gpus", "")
            elif self.nodes.get(name) != node:
                self.moved.append(name)
        return str(rv)

    def count(self) -> int:
        with self.lock:
            return len(self.bound)


def create_all(http: httpx.Client, path: str, objects: list[JsonObj]) -> dict[str, float]:
    sent: dict[str, float] = {}

    def one(obj: JsonObj) -> None:
        sent[obj["metadata"]["name"]] = time.time()
        response = http.post(path, json=obj)
        if response.status_code >= 300:
            raise RuntimeError(f"create {obj['metadata']['name']}: {response.text[:300]}")

    with ThreadPoolExecutor(32) as pool:
        list(pool.map(one, objects))
    return sent


def wait_bound(recorder: Recorder, target: int, stall_s: float) -> None:
    last, last_change = -1, time.monotonic()
    while recorder.count() < target:
        now = recorder.count()
        if now != last:
            last, last_change = now, time.monotonic()
        elif time.monotonic() - last_change > stall_s:
            return
        time.sleep(0.5)


def clear_namespace(http: httpx.Client) -> None:
    """Delete every pod and PodGroup of the bench namespace; a delete-collection of thousands
    of pods can outlast the apiserver's 60 s request timeout, so it is repeated until empty."""
    groups = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NS}/podgroups"
    pods = f"/api/v1/namespaces/{NS}/pods"
    while True:
        for path in (pods, groups):
            with contextlib.suppress(httpx.HTTPError):
                http.delete(path, params={"gracePeriodSeconds": "0"})
        if not check(http.get(pods, params={"limit": "1"}))["items"]:
            return
        time.sleep(1)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def start_scheduler(plane: ControlPlane, which: str, qps: int, log: Path, *extra: str) -> Any:
    if which == "kube-scheduler":
        return plane.start_kube_scheduler(f"bench-kube-scheduler-{time.time_ns()}", qps=qps)
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from gpusched.cli.main import main; main()",
            "run",
            "--kubeconfig",
            str(plane.kubeconfig),
            "--metrics-address",
            "",
            *(extra or ("--no-leader-elect",)),
        ],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def stop_scheduler(process: Any) -> None:
    if hasattr(process, "popen"):
        process.stop()
    else:
        process.terminate()
        process.wait(60)


def scheduler_name(which: str) -> str:
    return "default-scheduler" if which == "kube-scheduler" else "gpusched"


def run_plain(
    plane: ControlPlane, http: httpx.Client, which: str, args: argparse.Namespace
) -> JsonObj:
    recorder = Recorder(plane)
    recorder.start()
    time.sleep(0.5)
    sched = start_scheduler(plane, which, args.kube_qps, plane.workdir / f"bench-{which}.log")
    time.sleep(2)
    pods = [
        pod_manifest(f"p{i}", gpus=1, cpu="100m", memory="256Mi", scheduler=scheduler_name(which))
        for i in range(args.pods)
    ]
    t0 = time.time()
    sent = create_all(http, f"/api/v1/namespaces/{NS}/pods", pods)
    created_s = time.time() - t0
    capacity = args.nodes * args.gpus
    wait_bound(recorder, min(args.pods, capacity), args.stall)
    recorder.stop.set()
    stop_scheduler(sched)
    lat = [recorder.bound[n] - sent[n] for n in recorder.bound]
    span = max(recorder.bound.values()) - min(sent.values()) if recorder.bound else float("nan")
    result = {
        "scheduler": which,
        "phase": "plain",
        "pods": args.pods,
        "bound": len(recorder.bound),
        "create_s": round(created_s, 1),
        "bound_per_s": round(len(recorder.bound) / span, 1),
        "latency_p50_s": round(percentile(lat, 0.5), 2),
        "latency_p99_s": round(percentile(lat, 0.99), 2),
        "mean_latency_s": round(statistics.fmean(lat), 2) if lat else None,
    }
    print(json.dumps(result), flush=True)
    clear_namespace(http)
    return result


def run_backlog(
    plane: ControlPlane, http: httpx.Client, which: str, args: argparse.Namespace
) -> JsonObj:
    """All pods first, then the scheduler: its bind rate without the load generator."""
    recorder = Recorder(plane)
    recorder.start()
    time.sleep(0.5)
    pods = [
        pod_manifest(f"q{i}", gpus=1, cpu="100m", memory="256Mi", scheduler=scheduler_name(which))
        for i in range(args.pods)
    ]
    create_all(http, f"/api/v1/namespaces/{NS}/pods", pods)
    started = time.time()
    sched = start_scheduler(
        plane, which, args.kube_qps, plane.workdir / f"bench-{which}-backlog.log"
    )
    wait_bound(recorder, min(args.pods, args.nodes * args.gpus), args.stall)
    recorder.stop.set()
    stop_scheduler(sched)
    span = max(recorder.bound.values()) - started if recorder.bound else float("nan")
    result = {
        "scheduler": which,
        "phase": "backlog",
        "pods": args.pods,
        "bound": len(recorder.bound),
        "start_to_last_bind_s": round(span, 1),
        "bound_per_s": round(len(recorder.bound) / span, 1),
    }
    print(json.dumps(result), flush=True)
    clear_namespace(http)
    return result


def run_gangs(
    plane: ControlPlane, http: httpx.Client, which: str, args: argparse.Namespace
) -> JsonObj:
    recorder = Recorder(plane)
    recorder.start()
    time.sleep(0.5)
    groups = [
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": f"g{g}", "namespace": NS},
            "spec": {"minMember": args.gang_size},
        }
        for g in range(args.gangs)
    ]
    create_all(http, f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NS}/podgroups", groups)
    sched = start_scheduler(plane, which, args.kube_qps, plane.workdir / f"bench-{which}-gangs.log")
    time.sleep(2)
    pods = [
        pod_manifest(
            f"g{g}-{m}",
            gpus=args.gang_gpus,
            cpu="100m",
            memory="256Mi",
            scheduler=scheduler_name(which),
            labels={POD_GROUP_LABEL: f"g{g}"},
        )
        for g in range(args.gangs)
        for m in range(args.gang_size)
    ]
    sent = create_all(http, f"/api/v1/namespaces/{NS}/pods", pods)
    capacity_pods = args.nodes * (args.gpus // args.gang_gpus)
    wait_bound(recorder, min(len(pods), capacity_pods), args.stall)
    recorder.stop.set()
    stop_scheduler(sched)
    members: dict[str, int] = {}
    partial_now, partial_max = 0, 0
    for name in recorder.order:  # replay binds in the order seen
        gang = name.rsplit("-", 1)[0]
        before = members.get(gang, 0)
        members[gang] = before + 1
        if before == 0 and args.gang_size > 1:
            partial_now += 1
        if members[gang] == args.gang_size:
            partial_now -= 1
        partial_max = max(partial_max, partial_now)
    complete = sum(1 for m in members.values() if m == args.gang_size)
    partial = sum(1 for m in members.values() if 0 < m < args.gang_size)
    held = sum(m for m in members.values() if m < args.gang_size) * args.gang_gpus
    span = max(recorder.bound.values()) - min(sent.values()) if recorder.bound else float("nan")
    result = {
        "scheduler": which,
        "phase": "gangs",
        "gangs": args.gangs,
        "gang_size": args.gang_size,
        "gpus_per_pod": args.gang_gpus,
        "pods_bound": len(recorder.bound),
        "gangs_complete": complete,
        "gangs_partial_at_end": partial,
        "gangs_partial_max": partial_max,
        "gpus_held_by_partial_gangs": held,
        "bound_per_s": round(len(recorder.bound) / span, 1),
    }
    print(json.dumps(result), flush=True)
    clear_namespace(http)
    return result


def lease_holder(http: httpx.Client) -> str:
    response = http.get(f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NS}/leases/gpusched")
    if response.status_code != 200:
        return ""
    return str(response.json()["spec"].get("holderIdentity") or "")


def final_state_problems(recorder: Recorder, gpus_per_node: int) -> list[str]:
    """What is wrong with the bound pods: a pod seen on two nodes, a GPU index given twice on a
    node, or more GPUs used on a node than it has."""
    problems = [f"pod {name} seen on two nodes" for name in recorder.moved]
    used: dict[str, list[int]] = {}
    for name, node in recorder.nodes.items():
        text = recorder.gpus.get(name, "")
        used.setdefault(node, []).extend(int(g) for g in text.split(",") if g)
    for node, indices in sorted(used.items()):
        if len(indices) != len(set(indices)):
            problems.append(f"node {node}: a GPU index given twice ({sorted(indices)})")
        if len(indices) > gpus_per_node:
            problems.append(f"node {node}: {len(indices)} GPUs used of {gpus_per_node}")
    return problems


def run_failover(
    plane: ControlPlane, http: httpx.Client, which: str, args: argparse.Namespace
) -> list[JsonObj]:
    """One failover run per Lease timing in ``--lease``."""
    results = []
    for timing in args.lease.split(";"):
        lease, renew, retry = (float(x) for x in timing.split(","))
        flags = ("--lease-duration", f"{lease:g}", "--renew-deadline", f"{renew:g}")
        result = run_failover_once(
            plane, http, which, args, (*flags, "--retry-period", f"{retry:g}")
        )
        result["lease"] = timing
        results.append(result)
    return results


def run_failover_once(
    plane: ControlPlane,
    http: httpx.Client,
    which: str,
    args: argparse.Namespace,
    lease_flags: tuple[str, ...],
) -> JsonObj:
    """Two gpusched replicas; the leader is killed once a third of the pods is bound."""
    recorder = Recorder(plane)
    recorder.start()
    time.sleep(0.5)
    replicas = {}
    for identity in ("replica-a", "replica-b"):
        log = plane.workdir / f"bench-failover-{identity}.log"
        extra = ("--leader-elect", "--identity", identity, *lease_flags)
        replicas[identity] = start_scheduler(plane, which, args.kube_qps, log, *extra)
        if identity == "replica-a":
            while lease_holder(http) != "replica-a":
                time.sleep(0.2)
    pods = [
        pod_manifest(f"f{i}", gpus=1, cpu="100m", memory="256Mi") for i in range(args.failover_pods)
    ]
    creator = threading.Thread(
        target=create_all, args=(http, f"/api/v1/namespaces/{NS}/pods", pods), daemon=True
    )
    creator.start()
    while recorder.count() < args.failover_pods // 3:
        time.sleep(0.05)
    leader = lease_holder(http)
    bound_before = recorder.count()
    replicas[leader].send_signal(signal.SIGKILL)
    killed_at = time.time()
    replicas[leader].wait()
    holder_changed = float("nan")
    while (took := time.time() - killed_at) < 120:
        holder = lease_holder(http)
        if holder and holder != leader and math.isnan(holder_changed):
            holder_changed = took
        with recorder.lock:
            after = [t for t in recorder.bound.values() if t > killed_at + 0.5]
        if after and not math.isnan(holder_changed):
            break
        time.sleep(0.1)
    first_bind_after = min(after) - killed_at if after else float("nan")
    creator.join()
    wait_bound(recorder, args.failover_pods, args.stall)
    recorder.stop.set()
    for identity, process in replicas.items():
        if identity != leader:
            stop_scheduler(process)
    problems = final_state_problems(recorder, args.gpus)
    result = {
        "scheduler": which,
        "phase": "failover",
        "pods": args.failover_pods,
        "bound_before_kill": bound_before,
        "bound": len(recorder.bound),
        "lease_taken_over_s": round(holder_changed, 2),
        "first_bind_after_kill_s": round(first_bind_after, 2),
        "problems": problems[:20],
    }
    print(json.dumps(result), flush=True)
    clear_namespace(http)
    return result


def load() -> str:
    """The machine's load as ``uptime`` prints it."""
    done = subprocess.run(["uptime"], check=False, capture_output=True, text=True)
    return done.stdout.strip()


SUMMARY_KEYS = (
    "bound_per_s",
    "start_to_last_bind_s",
    "latency_p50_s",
    "latency_p99_s",
    "gangs_partial_at_end",
    "gangs_partial_max",
    "gpus_held_by_partial_gangs",
    "lease_taken_over_s",
    "first_bind_after_kill_s",
)


def summarise(results: list[JsonObj]) -> list[JsonObj]:
    """Median, minimum and maximum of every figure per (scheduler, phase), and of the
    gpusched / kube-scheduler ratio of bound pods per second, run by run."""
    rows: list[JsonObj] = []
    groups: dict[tuple[str, str], list[JsonObj]] = {}
    for r in results:
        phase = r["phase"] + (f" lease {r['lease']}" if "lease" in r else "")
        groups.setdefault((r["scheduler"], phase), []).append(r)
    for (which, phase), runs in groups.items():
        row: JsonObj = {"scheduler": which, "phase": phase, "runs": len(runs)}
        for key in SUMMARY_KEYS:
            values = [float(r[key]) for r in runs if key in r and r[key] == r[key]]
            if values:
                row[key] = {
                    "median": round(statistics.median(values), 2),
                    "min": round(min(values), 2),
                    "max": round(max(values), 2),
                }
        rows.append(row)
    for phase in ("plain", "backlog", "gangs"):
        ours = [
            r["bound_per_s"]
            for r in results
            if r["phase"] == phase and r["scheduler"] == "gpusched"
        ]
        theirs = [
            r["bound_per_s"]
            for r in results
            if r["phase"] == phase and r["scheduler"] == "kube-scheduler"
        ]
        ratios = [a / b for a, b in zip(ours, theirs, strict=False) if b]
        if ratios:
            rows.append(
                {
                    "ratio": f"gpusched / kube-scheduler bound per s, {phase}",
                    "median": round(statistics.median(ratios), 2),
                    "min": round(min(ratios), 2),
                    "max": round(max(ratios), 2),
                }
            )
    return rows


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--gangs", type=int, default=1000)
    parser.add_argument("--gang-size", type=int, default=4)
    parser.add_argument("--gang-gpus", type=int, default=4)
    parser.add_argument("--schedulers", default="gpusched,kube-scheduler")
    parser.add_argument("--phases", default="plain,gangs")
    parser.add_argument("--kube-qps", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=1, help="runs of each scheduler and phase")
    parser.add_argument("--failover-pods", type=int, default=3000)
    parser.add_argument(
        "--lease",
        default="15,10,2;10,7,1",
        help="Lease timings for failover runs: 'duration,renew deadline,retry' in seconds, "
        "several separated by ';' (default: kube-scheduler's, then a faster one)",
    )
    parser.add_argument("--out", type=Path, help="also write every result and the summary here")
    parser.add_argument(
        "--stall",
        type=float,
        default=30.0,
        help="stop waiting after this many seconds without a new bind",
    )
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/gpusched-bench"))
    return parser.parse_args()


def prepare_cluster(plane: ControlPlane, http: httpx.Client, args: argparse.Namespace) -> None:
    """The PodGroup CRD, the namespaces, and ``--nodes`` kwok nodes, waited for until Ready."""
    plane.kubectl("apply", "--server-side", "-f", str(REPO / "deploy" / "crds"))
    plane.kubectl(
        "wait", "--for=condition=Established", "crd/podgroups.scheduling.x-k8s.io", "--timeout=60s"
    )
    check(http.post("/api/v1/namespaces", json={"metadata": {"name": NS}}))
    check(
        http.post(
            f"/api/v1/namespaces/{NS}/serviceaccounts", json={"metadata": {"name": "default"}}
        )
    )
    check(http.post("/api/v1/namespaces", json={"metadata": {"name": LEASE_NS}}))
    t0 = time.time()
    create_all(
        http,
        "/api/v1/nodes",
        [node_manifest(f"n{i:04d}", gpus=args.gpus) for i in range(args.nodes)],
    )
    while True:
        nodes = check(http.get("/api/v1/nodes"))["items"]
        ready = sum(
            1
            for n in nodes
            for c in n.get("status", {}).get("conditions") or []
            if c["type"] == "Ready" and c["status"] == "True"
        )
        if ready >= args.nodes:
            break
        time.sleep(1)
    print(f"{args.nodes} nodes Ready in {time.time() - t0:.1f} s", flush=True)


def run_all(plane: ControlPlane, http: httpx.Client, args: argparse.Namespace) -> list[JsonObj]:
    """Every (repeat, phase, scheduler) run, interleaved, each with the load before and after."""
    results: list[JsonObj] = []
    for repeat in range(args.repeat):
        for phase in args.phases.split(","):
            for which in args.schedulers.split(","):
                if phase == "failover" and which != "gpusched":
                    continue
                before = load()
                print(f"run {repeat + 1}/{args.repeat} {which} {phase}; {before}", flush=True)
                if phase == "failover":
                    got = run_failover(plane, http, which, args)
                elif phase == "gangs":
                    got = [run_gangs(plane, http, which, args)]
                elif phase == "backlog":
                    got = [run_backlog(plane, http, which, args)]
                else:
                    got = [run_plain(plane, http, which, args)]
                for result in got:
                    result.update(repeat=repeat + 1, load_before=before, load_after=load())
                    results.append(result)
    return results


def main() -> None:
    args = parse_args()
    plane = ControlPlane(binaries(), args.workdir)
    plane.start(
        apiserver_args=(
            "--max-requests-inflight=0",
            "--max-mutating-requests-inflight=0",
            "--enable-priority-and-fairness=false",
        )
    )
    try:
        with plane.client(timeout_s=120) as http:
            prepare_cluster(plane, http, args)
            results = run_all(plane, http, args)
    finally:
        plane.stop()
    summary = summarise(results)
    print(json.dumps(summary, indent=1))
    if args.out:
        settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
        args.out.write_text(
            json.dumps({"args": settings, "results": results, "summary": summary}, indent=1)
        )


if __name__ == "__main__":
    main()
