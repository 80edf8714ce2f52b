"""A real Kubernetes control plane on loopback for end-to-end tests: etcd, kube-apiserver, kwok.

The binaries come from ``hack/controlplane/build.sh`` (built once per machine from the Go module
proxy, cached under ``~/.cache/gpusched/controlplane/KEY/bin``). :class:`ControlPlane` starts

- etcd on two free loopback ports, its data on tmpfs when there is one, without fsync;
- kube-apiserver with real TLS (fresh CAs from :mod:`pki`), client-certificate authentication,
  ``--authorization-mode=Node,RBAC`` and a service-account signing key, bound to 127.0.0.1;
- the kwok controller, which keeps fake nodes annotated ``kwok.x-k8s.io/node: fake`` Ready and
  moves pods bound to them to Running (stages in ``hack/controlplane/kwok/stages.yaml``);
- on request, kube-scheduler (for comparisons), authenticated as ``system:kube-scheduler``.

There is no kube-controller-manager: no garbage collection, no namespace deletion, no
ServiceAccount controller (the namespace fixture creates ``default`` itself). Every process logs
to a file in the control plane's work folder; :meth:`ControlPlane.stop` ends them (TERM, then
KILL) and removes the etcd data.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from e2e.pki import KeyPair, Pki

JsonObj = dict[str, Any]

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "hack" / "controlplane" / "build.sh"
KWOK_STAGES = REPO / "hack" / "controlplane" / "kwok" / "stages.yaml"
COMPONENTS = ("kube-apiserver", "kube-scheduler", "kubectl", "etcd", "kwok")
KWOK_ANNOTATION = ("kwok.x-k8s.io/node", "fake")


class ControlPlaneError(RuntimeError):
    """A control-plane process failed to build, start or answer."""


def binaries(*, build: bool = True) -> Path:
    """The folder holding the control-plane binaries, building them first when missing.

    With ``build=False`` a missing binary raises :class:`ControlPlaneError` saying how to build.
    """
    printed = subprocess.run(
        [str(BUILD_SCRIPT), "--print-dir"], check=True, capture_output=True, text=True
    )
    bin_dir = Path(printed.stdout.strip())
    if all((bin_dir / c).is_file() for c in COMPONENTS):
        return bin_dir
    if not build:
        raise ControlPlaneError(
            f"control-plane binaries not found in {bin_dir}; build them once with "
            "`make controlplane` (about 20 min on 2 cores)"
        )
    done = subprocess.run(
        [str(BUILD_SCRIPT), *COMPONENTS], check=False, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise ControlPlaneError(f"hack/controlplane/build.sh failed:\n{done.stderr[-4000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Ask Linux to TERM the child when the test process dies, so nothing outlives a crash."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@dataclass
class Process:
    """One control-plane process with its log file."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    @classmethod
    def spawn(cls, name: str, argv: list[str], log: Path) -> Process:
        with log.open("ab") as out:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - only prctl, no locks taken
            )
        return cls(name, popen, log)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def check(self) -> None:
        if not self.alive():
            raise ControlPlaneError(
                f"{self.name} exited with code {self.popen.returncode}; last log lines:\n"
                + self.tail()
            )

    def stop(self, grace_s: float = 10.0) -> None:
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()

    def kill(self) -> None:
        """End the process at once (SIGKILL), the way a crashed node would."""
        if self.alive():
            self.popen.kill()
            self.popen.wait()

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def wait_until(
    what: str, ready: Callable[[], bool], timeout_s: float, *, poll_s: float = 0.1
) -> None:
    """Poll ``ready`` until it answers True; raise naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if ready():
                return
        except (httpx.HTTPError, OSError):
            pass
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(poll_s)


@dataclass
class ControlPlane:
    """etcd + kube-apiserver (+ kwok, + kube-scheduler on request) on loopback."""

    bin_dir: Path
    workdir: Path
    processes: list[Process] = field(default_factory=list)
    port: int = 0
    pki: Pki | None = None
    kubeconfig: Path = Path()
    _apiserver_argv: list[str] = field(default_factory=list)
    extra_logs: list[Path] = field(default_factory=list)
    etcd_url: str = ""
    _etcd_data: Path | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self, *, kwok: bool = True, apiserver_args: tuple[str, ...] = ()) -> ControlPlane:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.pki = Pki.create(self.workdir / "pki")
        try:
            etcd_url = self._start_etcd()
            self.etcd_url = etcd_url
            self._start_apiserver(etcd_url, apiserver_args)
            self.kubeconfig = self.write_kubeconfig("admin", self.pki.admin)
            if kwok:
                self._start_kwok()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop(grace_s=3)  # an apiserver draining watches can take 10 s; no one waits
        if self._etcd_data is not None:
            shutil.rmtree(self._etcd_data, ignore_errors=True)

    def __enter__(self) -> ControlPlane:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def logs(self) -> str:
        """The last lines of every process's log (and of ``extra_logs``), for a failure report."""
        parts = [f"--- {p.name} ({p.log}) ---\n{p.tail()}" for p in self.processes]
        for log in self.extra_logs:
            lines = log.read_text(errors="replace").splitlines()[-60:] if log.exists() else []
            parts.append(f"--- {log.name} ({log}) ---\n" + "\n".join(lines))
        return "\n".join(parts)

    # -- clients ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_cert(self) -> Path:
        """The serving CA's certificate, to verify the apiserver with."""
        return self._pki().serving_ca.pair.cert

    def _pki(self) -> Pki:
        if self.pki is None:
            raise ControlPlaneError("control plane not started")
        return self.pki

    def client(self, user: KeyPair | None = None, timeout_s: float = 30.0) -> httpx.Client:
        """An HTTP client speaking to the apiserver as ``user`` (default: admin)."""
        pki = self._pki()
        pair = user or pki.admin
        return httpx.Client(
            base_url=self.url,
            verify=_ssl_context(pki.serving_ca.pair.cert, pair),
            timeout=timeout_s,
        )

    def user(self, name: str, *groups: str) -> KeyPair:
        """A client certificate for user ``name`` in ``groups``."""
        return self._pki().client_ca.issue(
            self.workdir / "pki",
            f"user-{name.replace(':', '-')}",
            common_name=name,
            organizations=groups,
        )

    def write_kubeconfig(self, name: str, pair: KeyPair | None = None, token: str = "") -> Path:
        """A kubeconfig file for a client certificate or a bearer token."""
        pki = self._pki()
        user: dict[str, str] = {"token": token} if token else {}
        if pair is not None:
            user = {"client-certificate": str(pair.cert), "client-key": str(pair.key)}
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "test",
                    "cluster": {
                        "server": self.url,
                        "certificate-authority": str(pki.serving_ca.pair.cert),
                    },
                }
            ],
            "users": [{"name": name, "user": user}],
            "contexts": [{"name": name, "context": {"cluster": "test", "user": name}}],
            "current-context": name,
        }
        path = self.workdir / f"{name.replace(':', '-')}.kubeconfig"
        path.write_text(json.dumps(config, indent=2))
        path.chmod(0o600)
        return path

    def kubectl(self, *args: str, kubeconfig: Path | None = None, input_text: str = "") -> str:
        """Run the built kubectl against this control plane; raise with its stderr on failure."""
        done = subprocess.run(
            [
                str(self.bin_dir / "kubectl"),
                "--kubeconfig",
                str(kubeconfig or self.kubeconfig),
                *args,
            ],
            check=False,
            input=input_text,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise ControlPlaneError(f"kubectl {' '.join(args)} failed: {done.stderr.strip()}")
        return done.stdout

    # -- processes -------------------------------------------------------------------------

    def _spawn(self, name: str, argv: list[str]) -> Process:
        process = Process.spawn(name, argv, self.workdir / f"{name}.log")
        self.processes.append(process)
        return process

    def _start_etcd(self) -> str:
        shm = Path("/dev/shm")
        base = shm if shm.is_dir() and os.access(shm, os.W_OK) else self.workdir
        self._etcd_data = Path(tempfile.mkdtemp(prefix="gpusched-etcd-", dir=base))
        client, peer = free_port(), free_port()
        client_url, peer_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
        etcd = self._spawn(
            "etcd",
            [
                str(self.bin_dir / "etcd"),
                f"--data-dir={self._etcd_data}",
                f"--listen-client-urls={client_url}",
                f"--advertise-client-urls={client_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=default={peer_url}",
                "--unsafe-no-fsync=true",
                "--quota-backend-bytes=4294967296",
                "--log-level=warn",
            ],
        )

        def healthy() -> bool:
            etcd.check()
            answer: JsonObj = httpx.get(f"{client_url}/health", timeout=2).json()
            return answer.get("health") == "true"

        wait_until("etcd /health", healthy, 60)
        return client_url

    def _start_apiserver(self, etcd_url: str, extra: tuple[str, ...]) -> None:
        pki = self._pki()
        self.port = free_port()
        self._apiserver_argv = [
            str(self.bin_dir / "kube-apiserver"),
            f"--etcd-servers={etcd_url}",
            f"--etcd-prefix=/gpusched-{self.port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--tls-cert-file={pki.apiserver.cert}",
            f"--tls-private-key-file={pki.apiserver.key}",
            f"--client-ca-file={pki.client_ca.pair.cert}",
            "--authorization-mode=Node,RBAC",
            "--anonymous-auth=false",
            f"--service-account-key-file={pki.service_account.cert}",
            f"--service-account-signing-key-file={pki.service_account.key}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            "--profiling=false",
            "--endpoint-reconciler-type=none",
            # No node lifecycle controller removes the not-ready taint this plugin adds.
            "--disable-admission-plugins=TaintNodesByCondition",
            f"--cert-dir={self.workdir / 'apiserver-certs'}",
            "--v=1",
            *extra,
        ]
        self._wait_apiserver(self._spawn("kube-apiserver", self._apiserver_argv))

    def restart_apiserver(self, down_s: float = 0.0) -> None:
        """Kill kube-apiserver (as a crash would; a TERM drains watches for about 10 s) and
        start it again on the same port, store and certs, after ``down_s`` seconds: every
        watch breaks and every client must reconnect."""
        old = next(p for p in self.processes if p.name == "kube-apiserver")
        old.kill()
        self.processes.remove(old)
        time.sleep(down_s)
        self._wait_apiserver(self._spawn("kube-apiserver", self._apiserver_argv))

    def etcd_revision(self) -> int:
        """etcd's current revision (its gRPC gateway, ``/v3/kv/range``)."""
        key = base64.b64encode(b"/").decode()
        answer: JsonObj = httpx.post(
            f"{self.etcd_url}/v3/kv/range", json={"key": key, "limit": 1}, timeout=10
        ).json()
        return int(answer["header"]["revision"])

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision (as the apiserver does every
        5 min), so a watch from an older resourceVersion gets ``410 Gone``; returns the
        revision. Without the apiserver's watch cache (``--watch-cache=false``) watches go to
        etcd, so this is how a client's watch expires."""
        revision = self.etcd_revision()
        response = httpx.post(
            f"{self.etcd_url}/v3/kv/compaction",
            json={"revision": str(revision), "physical": True},
            timeout=30,
        )
        if response.status_code != 200:
            raise ControlPlaneError(f"etcd compaction failed: {response.text[:500]}")
        return revision

    def _wait_apiserver(self, apiserver: Process) -> None:
        with self.client(timeout_s=5) as http:

            def ready() -> bool:
                apiserver.check()
                return http.get("/readyz").status_code == 200

            wait_until("kube-apiserver /readyz", ready, 180, poll_s=0.25)

    def _start_kwok(self) -> None:
        key, value = KWOK_ANNOTATION
        kwok = self._spawn(
            "kwok",
            [
                str(self.bin_dir / "kwok"),
                f"--kubeconfig={self.kubeconfig}",
                f"--config={KWOK_STAGES}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={key}={value}",
                "--cidr=10.244.0.0/16",
                "--node-ip=10.1.0.1",
                "--node-lease-duration-seconds=40",
            ],
        )
        time.sleep(0.5)
        kwok.check()

    def start_kube_scheduler(self, name: str = "kube-scheduler", *, qps: int = 50) -> Process:
        """Start kube-scheduler (profile ``default-scheduler``) as ``system:kube-scheduler``,
        without leader election; ``qps`` (and burst) limit its API client (default 50, as
        kube-scheduler's own default; raise it for throughput comparisons)."""
        pair = self.user("system:kube-scheduler")
        kubeconfig = self.write_kubeconfig("system:kube-scheduler", pair)
        config = self.workdir / f"{name}.config.json"
        config.write_text(
            json.dumps(
                {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "KubeSchedulerConfiguration",
                    "clientConnection": {"kubeconfig": str(kubeconfig), "qps": qps, "burst": qps},
                    "leaderElection": {"leaderElect": False},
                }
            )
        )
        process = self._spawn(
            name,
            [
                str(self.bin_dir / "kube-scheduler"),
                f"--config={config}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                f"--cert-dir={self.workdir / (name + '-certs')}",
                "--v=1",
            ],
        )
        time.sleep(0.5)
        process.check()
        return process


def _ssl_context(ca: Path, pair: KeyPair) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca))
    context.load_cert_chain(str(pair.cert), str(pair.key))
    return context
