"""Dynamic Resource Allocation (``resource.k8s.io/v1``) for whole GPUs of ``gpu.nvidia.com``.

What gpusched reads:

* **ResourceSlices** of driver ``gpu.nvidia.com`` with ``spec.nodeName``: their devices whose
  attribute ``type`` is ``gpu`` (or absent) are that node's GPUs, numbered by the attribute
  ``index`` (else by device name); the model is the attribute ``productName`` (else the
  node's ``nvidia.com/gpu.product``) and the memory the capacity ``memory``. A node with such
  devices has them as its GPUs instead of its ``nvidia.com/gpu``.
* **DeviceClasses**: a class is a *GPU class* when one of its CEL selectors compares
  ``device.driver`` with ``"gpu.nvidia.com"`` and none mentions ``mig``.
* **ResourceClaims** the pods name (``spec.resourceClaims[].resourceClaimName``, or the claim
  a template produced, from ``status.resourceClaimStatuses``). Each request ``exactly`` of a
  GPU class, ``allocationMode: ExactCount`` (the default) with ``count`` (default 1), asks for
  that many whole GPUs; a pod asks for the sum over its unallocated claims, placed by the
  core like ``nvidia.com/gpu``. Anything else gpusched cannot allocate (another class,
  ``selectors``, ``firstAvailable``, ``allocationMode: All``, claim ``constraints``, admin
  access, a claim already allocated to another pod) keeps the pod pending with a message
  naming the claim and field.

What gpusched writes, before the Binding (the way kube-scheduler does): the finalizer
``resource.kubernetes.io/delete-protection`` on the claim, then its ``status.allocation``
(``devices.results``: request, driver, pool, device for each GPU chosen, in the order of the
claim's requests; the claim's and class's ``config``; ``nodeSelector`` matching the node's
``metadata.name``; ``allocationTimestamp``) and ``status.reservedFor`` the pod. Both writes
carry the claim's resourceVersion, so a concurrent change fails them instead of being lost.
A pod whose claims are allocated to it but which is not bound yet (the bind failed, or the
scheduler restarted in between) is held on the allocation's node and bound there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpusched.live.translate import parse_quantity

__all__ = [
    "DELETE_PROTECTION",
    "DRIVER",
    "ClaimInfo",
    "ClassInfo",
    "DeviceInfo",
    "DraView",
    "PodClaims",
    "SliceInfo",
    "claim_from_k8s",
    "class_from_k8s",
    "slice_from_k8s",
]

DRIVER = "gpu.nvidia.com"
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"
RESOURCE_API = "/apis/resource.k8s.io/v1"
_DRIVER_SELECTOR = re.compile(r"device\.driver\s*==\s*['\"]gpu\.nvidia\.com['\"]")
_MIB = 2**20


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """One GPU a ResourceSlice publishes."""

    name: str
    pool: str
    index: int | None
    product: str
    memory_mib: int


@dataclass(frozen=True, slots=True)
class SliceInfo:
    """The GPUs of one ResourceSlice of ``gpu.nvidia.com`` on one node."""

    name: str
    node: str
    devices: tuple[DeviceInfo, ...]


@dataclass(frozen=True, slots=True)
class ClassInfo:
    """A DeviceClass: whether it selects whole ``gpu.nvidia.com`` GPUs, and its config."""

    name: str
    gpu: bool
    config: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class Request:
    """One request of a claim: ``count`` devices of ``device_class``, or why not supported."""

    name: str
    device_class: str
    count: int
    problem: str = ""


@dataclass(frozen=True, slots=True)
class ClaimInfo:
    """A ResourceClaim as gpusched needs it."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    requests: tuple[Request, ...]
    problem: str
    config: tuple[Any, ...]
    finalizers: tuple[str, ...]
    allocated: tuple[tuple[str, str, str], ...]  # (driver, pool, device) per result
    node: str  # from the allocation's node selector
    reserved_for: tuple[str, ...]  # pod uids

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _attr(device: Mapping[str, Any], name: str) -> Any:
    raw = (device.get("attributes") or {}).get(name) or {}
    for kind in ("string", "int", "version", "bool"):
        if kind in raw:
            return raw[kind]
    return None


def slice_from_k8s(obj: Mapping[str, Any]) -> SliceInfo:
    spec = obj.get("spec") or {}
    pool = str((spec.get("pool") or {}).get("name", ""))
    devices = []
    if spec.get("driver") == DRIVER and spec.get("nodeName"):
        for raw in spec.get("devices") or []:
            kind = _attr(raw, "type")
            if kind not in (None, "gpu"):
                continue
            index = _attr(raw, "index")
            memory = ((raw.get("capacity") or {}).get("memory") or {}).get("value")
            try:
                memory_mib = int(parse_quantity(memory) / _MIB) if memory else 0
            except ValueError:
                memory_mib = 0
            devices.append(
                DeviceInfo(
                    str(raw["name"]),
                    pool,
                    index if isinstance(index, int) else None,
                    str(_attr(raw, "productName") or ""),
                    memory_mib,
                )
            )
    return SliceInfo(str(obj["metadata"]["name"]), str(spec.get("nodeName") or ""), tuple(devices))


def class_from_k8s(obj: Mapping[str, Any]) -> ClassInfo:
    spec = obj.get("spec") or {}
    exprs = [str((s.get("cel") or {}).get("expression", "")) for s in spec.get("selectors") or []]
    gpu = any(_DRIVER_SELECTOR.search(e) for e in exprs) and not any("mig" in e for e in exprs)
    return ClassInfo(str(obj["metadata"]["name"]), gpu, tuple(spec.get("config") or ()))


def _request(raw: Mapping[str, Any]) -> Request:
    name = str(raw.get("name", ""))
    where = f"spec.devices.requests[{name}]"
    exact = raw.get("exactly")
    if exact is None:
        return Request(name, "", 0, f"{where}.firstAvailable: not supported by gpusched")
    cls = str(exact.get("deviceClassName", ""))
    mode = exact.get("allocationMode") or "ExactCount"
    for unsupported in ("selectors", "adminAccess", "capacity", "tolerations"):
        if exact.get(unsupported):
            return Request(name, cls, 0, f"{where}.exactly.{unsupported}: not supported")
    if mode != "ExactCount":
        return Request(
            name, cls, 0, f"{where}.exactly.allocationMode: {mode} is not supported; use a count"
        )
    count = exact.get("count") or 1
    if not isinstance(count, int) or count < 1:
        return Request(name, cls, 0, f"{where}.exactly.count: got {count!r}; expected >= 1")
    return Request(name, cls, count)


def claim_from_k8s(obj: Mapping[str, Any]) -> ClaimInfo:
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    devices = spec.get("devices") or {}
    requests = tuple(_request(r) for r in devices.get("requests") or [])
    problem = next((r.problem for r in requests if r.problem), "")
    if devices.get("constraints") and not problem:
        problem = "spec.devices.constraints: not supported by gpusched"
    allocation = status.get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    node = ""
    for term in (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []:
        for match in term.get("matchFields") or []:
            if match.get("key") == "metadata.name" and match.get("values"):
                node = str(match["values"][0])
    return ClaimInfo(
        namespace=str(meta.get("namespace", "")),
        name=str(meta["name"]),
        uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        requests=requests,
        problem=problem,
        config=tuple(devices.get("config") or ()),
        finalizers=tuple(meta.get("finalizers") or ()),
        allocated=tuple(
            (str(r.get("driver")), str(r.get("pool")), str(r.get("device"))) for r in results
        ),
        node=node,
        reserved_for=tuple(
            str(c.get("uid"))
            for c in status.get("reservedFor") or []
            if c.get("resource") == "pods"
        ),
    )


@dataclass(frozen=True, slots=True)
class PodClaims:
    """A pod's DRA GPUs in one cycle.

    ``count``: GPUs still to allocate; ``claims``: its claims to allocate, in order;
    ``allocated``: GPU indices of claims already allocated (with ``node``); ``problem``: why
    gpusched cannot serve the pod's claims."""

    count: int = 0
    claims: tuple[ClaimInfo, ...] = ()
    node: str = ""
    allocated: tuple[int, ...] = ()
    problem: str = ""


@dataclass(slots=True)
class DraView:
    """One cycle's DRA state: GPUs per node, claims, classes."""

    devices: dict[str, list[DeviceInfo]] = field(default_factory=dict)
    claims: Mapping[str, ClaimInfo] = field(default_factory=dict)
    classes: Mapping[str, ClassInfo] = field(default_factory=dict)
    _index: dict[tuple[str, str], tuple[str, int]] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        slices: Iterable[SliceInfo],
        claims: Mapping[str, ClaimInfo],
        classes: Mapping[str, ClassInfo],
    ) -> DraView:
        view = cls(claims=claims, classes=classes)
        for s in sorted(slices, key=lambda s: s.name):
            if s.devices:
                view.devices.setdefault(s.node, []).extend(s.devices)
        for node, devices in view.devices.items():
            devices.sort(key=lambda d: (d.index is None, d.index or 0, d.name))
            for i, d in enumerate(devices):
                view._index[(d.pool, d.name)] = (node, i)
        return view

    def gpu_index(self, pool: str, device: str) -> tuple[str, int] | None:
        """The node and GPU index of a device, if a slice publishes it."""
        return self._index.get((pool, device))

    def pod(self, namespace: str, uid: str, claims: tuple[tuple[str, str], ...]) -> PodClaims:
        """What the pod's claims ask for (see :class:`PodClaims`)."""
        count, todo, done, node = 0, [], [], ""
        for ref, claim_name in claims:
            claim = self.claims.get(f"{namespace}/{claim_name}")
            where = f"resource claim {claim_name} (pod's {ref!r})"
            if claim is None:
                return PodClaims(problem=f"{where}: no ResourceClaim {namespace}/{claim_name}")
            if claim.allocated:
                others = [u for u in claim.reserved_for if u != uid]
                if others:
                    return PodClaims(
                        problem=f"{where}: allocated and reserved for another pod; gpusched "
                        "does not share claims between pods"
                    )
                for _, pool, device in claim.allocated:
                    found = self.gpu_index(pool, device)
                    if found is not None:
                        node = found[0]
                        done.append(found[1])
                node = node or claim.node
                continue
            if claim.problem:
                return PodClaims(problem=f"{where}: {claim.problem}")
            for request in claim.requests:
                device_class = self.classes.get(request.device_class)
                if device_class is None or not device_class.gpu:
                    what = "does not exist" if device_class is None else "is not a GPU class"
                    return PodClaims(
                        problem=f"{where}: request {request.name!r}: DeviceClass "
                        f"{request.device_class!r} {what}; gpusched allocates whole GPUs of "
                        f"driver {DRIVER} only"
                    )
                count += request.count
            todo.append(claim)
        if todo and done:
            return PodClaims(
                problem="some of the pod's claims are allocated and some are not; gpusched "
                "allocates a pod's claims together"
            )
        return PodClaims(count, tuple(todo), node, tuple(sorted(done)))

    def allocation(
        self, claim: ClaimInfo, node: str, gpus: list[int], now: str
    ) -> tuple[dict[str, Any], list[int]]:
        """The ``status.allocation`` of ``claim`` taking its GPUs from the front of ``gpus``
        (indices on ``node``), and the indices left for the pod's next claims."""
        devices = self.devices.get(node, [])
        results, configs = [], []
        left = list(gpus)
        for request in claim.requests:
            for _ in range(request.count):
                device = devices[left.pop(0)]
                results.append(
                    {
                        "request": request.name,
                        "driver": DRIVER,
                        "pool": device.pool,
                        "device": device.name,
                    }
                )
            for raw in self.classes[request.device_class].config:
                configs.append({"source": "FromClass", "requests": [request.name], **raw})
        for raw in claim.config:
            configs.append({"source": "FromClaim", **raw})
        allocation = {
            "devices": {"results": results, "config": configs},
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            },
            "allocationTimestamp": now,
        }
        return allocation, left
