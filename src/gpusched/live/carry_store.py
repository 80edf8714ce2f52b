"""The carried state (:mod:`.carry`) in a ConfigMap, so that it survives a change of leader.

The leader keeps the ConfigMap ``gpusched-state`` (``gpusched run --state-configmap``, in the
Lease's namespace) holding one key, ``state.json``::

    {"version": 1,
     "reserved":  {"JOB": SINCE, ...},                       reservation holders
     "deadlines": {"JOB": DUE, ...},                         guests on held nodes
     "evictedBy": {"JOB": {"by": ["JOB", ...], "at": T,      evicted jobs, their evictors
                           "submitted": T0}},                 and first submission (optional)
     "disrupted": {"JOB": {"evictions": N, "moves": M}}}     disruptions (optional section)

Jobs are ``NAMESPACE/PODGROUP`` for a gang, ``NAMESPACE/POD`` otherwise; times are Unix seconds
(the wall clock, as ``Snapshot.now`` in the live scheduler), so they mean the same in the next
leader's process. The annotation ``gpusched.dev/written-by`` names the replica that wrote it.

* **Read**: by a replica that became leader (or started without leader election), before its
  first cycle. Absent: no state yet (it is created at the first change). If the read fails (the
  apiserver cannot be reached, a 403), the cycles run without the stored state and nothing is
  written until a read succeeds (retried every ``retry_s``), so a good state is never
  overwritten by one that lacks it.
* **Written**: after a cycle's binds, evictions and status writes, only when the state changed
  since the last read or write, with the object's ``resourceVersion``. A 409 means another
  replica wrote since (two leaders for a moment, or a write whose answer was lost): the object
  is read again, its entries are merged into this leader's (:meth:`.Carried.merge`: evictors
  united, deadlines and holders this leader lacks taken), and the union is written once more;
  nothing another leader recorded is overwritten. A failed write is logged, never fails the
  cycle, and is retried after ``retry_s`` if the state still differs.
* **Bounded**: entries of jobs that no longer exist are dropped at each cycle with pending
  jobs (:meth:`.Carried.apply`). A ConfigMap holds at most 1 MiB; if the JSON would exceed
  ``limit_bytes`` (1,000,000), entries are left out of the stored copy until it fits --
  evicted jobs' evictors first, oldest eviction first; then deadlines, latest first; then
  holders, newest first; then disruption counts, fewest first -- and a warning says how many
  (the leader keeps all of them in memory; a new leader would start without those left out).
* **Malformed or foreign**: a ``state.json`` that is not this format (bad JSON, a wrong type,
  another ``version``) is reported in a warning naming the object and the field, the leader
  starts with no stored state and overwrites it at its next write. A ConfigMap of that name
  without ``state.json`` but with other keys is not gpusched's: a warning says so and nothing
  is written to it (choose another ``--state-configmap``) until the next term as leader.
  Warnings that repeat are logged at most every 10 minutes.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import time
from collections.abc import Iterator
from typing import Any

from gpusched.live.carry import Carried
from gpusched.live.client import ApiError, JsonObj, KubeClient
from gpusched.model import JobId

__all__ = [
    "DATA_KEY",
    "LIMIT_BYTES",
    "WRITER_ANNOTATION",
    "CarriedFormatError",
    "CarryStore",
    "decode",
    "encode",
]

log = logging.getLogger(__name__)

DATA_KEY = "state.json"
VERSION = 1
#: A ConfigMap's data may hold 1 MiB (1,048,576 bytes, keys and values); leave room.
LIMIT_BYTES = 1_000_000
WRITER_ANNOTATION = "gpusched.dev/written-by"
_WARN_EVERY_S = 600.0


class CarriedFormatError(ValueError):
    """``state.json`` is not the carried state; ``field`` says where (``""``: the whole)."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}" if field else problem)


def _dumps(value: object) -> str:
    # ASCII only (the default), so the length in characters is the length in bytes.
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _doc(carried: Carried) -> dict[str, Any]:
    """The JSON document; ``disrupted`` only when there are counts (the form written before
    they were kept otherwise)."""
    doc: dict[str, Any] = {
        "version": VERSION,
        "reserved": dict(carried.reserved),
        "deadlines": dict(carried.deadlines),
        "evictedBy": {job: _evicted(carried, job, by) for job, by in carried.evicted_by.items()},
    }
    if carried.disrupted:
        doc["disrupted"] = {
            job: {"evictions": e, "moves": m} for job, (e, m) in carried.disrupted.items()
        }
    return doc


def _evicted(carried: Carried, job: JobId, by: frozenset[JobId]) -> dict[str, Any]:
    entry: dict[str, Any] = {"by": sorted(by), "at": carried.evicted_at.get(job, 0.0)}
    if job in carried.submitted:
        entry["submitted"] = carried.submitted[job]
    return entry


def encode(carried: Carried, limit_bytes: int = LIMIT_BYTES) -> tuple[str, int]:
    """``carried`` as compact JSON of at most ``limit_bytes`` bytes, and how many entries were
    left out to fit (module docstring: evictors oldest first, then deadlines, then holders,
    then disruption counts)."""
    doc = _doc(carried)
    text = _dumps(doc)
    if len(text) <= limit_bytes:
        return text, 0
    evicted: dict[str, dict[str, Any]] = doc["evictedBy"]
    deadlines: dict[str, float] = doc["deadlines"]
    reserved: dict[str, float] = doc["reserved"]
    disrupted: dict[str, dict[str, int]] = doc.get("disrupted", {})
    order: Iterator[tuple[dict[str, Any], str]] = iter(
        [(evicted, j) for j in sorted(evicted, key=lambda j: (evicted[j]["at"], j))]
        + [(deadlines, j) for j in sorted(deadlines, key=lambda j: (-deadlines[j], j))]
        + [(reserved, j) for j in sorted(reserved, key=lambda j: (-reserved[j], j))]
        + [(disrupted, j) for j in sorted(disrupted, key=lambda j: (_total(disrupted[j]), j))]
    )
    dropped = 0
    while len(text) > limit_bytes:
        excess = len(text) - limit_bytes
        for section, job in order:  # drop about enough, then measure again
            excess -= len(_dumps(job)) + len(_dumps(section.pop(job))) + 2  # "job":value,
            dropped += 1
            if excess <= 0:
                break
        else:
            return _dumps(doc), dropped  # nothing left to drop
        text = _dumps(doc)
    return text, dropped


def decode(text: str) -> Carried:
    """The carried state in ``text`` (written by :func:`encode`); :class:`CarriedFormatError`
    naming the field when it is not."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise CarriedFormatError("", f"not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise CarriedFormatError("", f"expected a JSON object, got {_kind(doc)}")
    if doc.get("version") != VERSION:
        raise CarriedFormatError("version", f"expected {VERSION}, got {doc.get('version')!r}")
    out = Carried()
    for job, since in _section(doc, "reserved").items():
        out.reserved[JobId(job)] = _time(since, f"reserved[{_dumps(job)}]")
    for job, due in _section(doc, "deadlines").items():
        out.deadlines[JobId(job)] = _time(due, f"deadlines[{_dumps(job)}]")
    for job, entry in _section(doc, "evictedBy").items():
        where = f"evictedBy[{_dumps(job)}]"
        if not isinstance(entry, dict):
            raise CarriedFormatError(where, f"expected an object, got {_kind(entry)}")
        by = entry.get("by")
        if not isinstance(by, list) or not by:
            raise CarriedFormatError(f"{where}.by", f"expected a non-empty list, got {by!r}")
        for i, evictor in enumerate(by):
            if not isinstance(evictor, str) or not evictor:
                raise CarriedFormatError(f"{where}.by[{i}]", f"expected a job, got {evictor!r}")
        out.evicted_by[JobId(job)] = frozenset(JobId(e) for e in by)
        out.evicted_at[JobId(job)] = _time(entry.get("at"), f"{where}.at")
        if "submitted" in entry:  # absent in state written before it was kept
            out.submitted[JobId(job)] = _time(entry["submitted"], f"{where}.submitted")
    for job, entry in _section(doc, "disrupted").items():  # absent before it was kept
        where = f"disrupted[{_dumps(job)}]"
        if not isinstance(entry, dict):
            raise CarriedFormatError(where, f"expected an object, got {_kind(entry)}")
        counts = (_count(entry, "evictions", where), _count(entry, "moves", where))
        out.disrupted[JobId(job)] = counts
    return out


def _total(counts: dict[str, int]) -> int:
    return counts["evictions"] + counts["moves"]


def _count(entry: dict[str, Any], key: str, where: str) -> int:
    value = entry.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CarriedFormatError(f"{where}.{key}", f"expected a count >= 0, got {value!r}")
    return value


def _section(doc: dict[str, Any], name: str) -> dict[str, Any]:
    section = doc.get(name, {})
    if not isinstance(section, dict):
        raise CarriedFormatError(name, f"expected an object, got {_kind(section)}")
    return section


def _time(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise CarriedFormatError(field, f"expected Unix seconds, got {value!r}")
    return float(value)


def _kind(value: object) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return repr(value)


class CarryStore:
    """Reads and writes the carried state in one ConfigMap (module docstring).

    Used by the cycle's thread only. Call :meth:`reset` when a term as leader begins,
    :meth:`load` before each cycle until it returns True, :meth:`save` after each cycle.
    """

    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        name: str,
        identity: str,
        *,
        limit_bytes: int = LIMIT_BYTES,
        retry_s: float = 10.0,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.limit_bytes = limit_bytes
        self.retry_s = retry_s
        self._object: JsonObj | None = None  # the ConfigMap as last read or written
        self._saved: Carried | None = None  # what it holds (None: unknown, write it)
        self._loaded = False
        self._foreign = False
        self._retry_at = 0.0
        self._warned: dict[str, float] = {}

    @property
    def where(self) -> str:
        return f"ConfigMap {self.namespace}/{self.name}"

    @property
    def path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/configmaps/{self.name}"

    @property
    def loaded(self) -> bool:
        """Whether the stored state was read this term (or found absent or unusable)."""
        return self._loaded

    def reset(self) -> None:
        """A new term as leader: read the object again before writing it."""
        self._object = None
        self._saved = None
        self._loaded = False
        self._foreign = False
        self._retry_at = 0.0

    def load(self, into: Carried) -> bool:
        """Merge the stored state into ``into``; False when the apiserver could not be asked
        (tried again after ``retry_s``; nothing is written meanwhile)."""
        if self._loaded:
            return True
        if time.monotonic() < self._retry_at:
            return False
        try:
            found = self.client.get(self.path)
        except ApiError as exc:
            if exc.status_code != 404:
                self._failed("read", exc)
                return False
            log.info("%s not found: no carried state yet (created at the first change)", self.where)
            self._object, self._saved, self._loaded = None, Carried(), True
            return True
        self._object, self._loaded = found, True
        stored = self._stored(found)
        self._saved = stored
        if stored is not None:
            into.merge(stored)
            log.info(
                "read the carried state from %s (written by %s): %d reservation holders, "
                "%d deadlines, %d evicted jobs with their evictors",
                self.where,
                self._writer(found),
                len(stored.reserved),
                len(stored.deadlines),
                len(stored.evicted_by),
            )
        return True

    def save(self, carried: Carried) -> None:
        """Write ``carried`` if it changed since the last read or write. Never raises: a
        failure is logged and retried later."""
        if not self._loaded or self._foreign or carried == self._saved:
            return
        if time.monotonic() < self._retry_at:
            return
        try:
            self._saved = self._write(carried)
        except ApiError as exc:
            if exc.status_code != 409:
                self._failed("write", exc)
                return
            if not self._merge_theirs(carried):
                return
            try:
                self._saved = self._write(carried)
            except ApiError as again:
                self._failed("write", again)

    # -- helpers ---------------------------------------------------------------------------

    def _write(self, carried: Carried) -> Carried:
        """PUT (or POST) ``carried``; what the object now holds. Raises :class:`ApiError`."""
        written = carried.copy()
        text, dropped = encode(written, self.limit_bytes)
        if dropped:
            self._warn(
                "size",
                "%s: the carried state is over %d bytes; %d entries of %d left out of the "
                "stored copy (oldest evictions first); a new leader starts without them",
                self.where,
                self.limit_bytes,
                dropped,
                len(written.reserved) + len(written.deadlines) + len(written.evicted_by),
            )
        if self._object is not None:
            body = copy.deepcopy(self._object)
            body.setdefault("data", {})[DATA_KEY] = text
            body["metadata"].setdefault("annotations", {})[WRITER_ANNOTATION] = self.identity
            try:
                self._object = self.client.put(self.path, body)
                return written
            except ApiError as exc:
                if exc.status_code != 404:
                    raise
                self._object = None  # deleted since: create it again
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": {
                    "app.kubernetes.io/name": "gpusched",
                    "app.kubernetes.io/component": "carried-state",
                },
                "annotations": {WRITER_ANNOTATION: self.identity},
            },
            "data": {DATA_KEY: text},
        }
        self._object = self.client.post(self.path.rsplit("/", 1)[0], body)
        return written

    def _merge_theirs(self, carried: Carried) -> bool:
        """After a 409: read the object another replica wrote and merge its entries into
        ``carried``; False when it cannot be read or is not ours to write."""
        try:
            found: JsonObj | None = self.client.get(self.path)
        except ApiError as exc:
            if exc.status_code != 404:
                self._failed("read", exc)
                return False
            found = None
        self._object = found
        if found is None:
            return True
        stored = self._stored(found)
        if stored is not None:
            carried.merge(stored)
        self._warn(
            "conflict",
            "%s was written by %s since this replica last read or wrote it; merged its "
            "entries into this leader's instead of overwriting them",
            self.where,
            self._writer(found),
        )
        return not self._foreign

    def _stored(self, found: JsonObj) -> Carried | None:
        """The state ``found`` holds; ``None`` (warned) when it is unusable."""
        data = found.get("data") or {}
        text = data.get(DATA_KEY)
        if text is None:
            if data:
                self._foreign = True
                self._warn(
                    "foreign",
                    "%s has no data.%s but other keys (%s): it is not gpusched's carried "
                    "state; the state is kept in memory only (choose another name with "
                    "--state-configmap)",
                    self.where,
                    DATA_KEY,
                    ", ".join(sorted(data)),
                )
                return None
            return Carried()  # an empty ConfigMap: no state yet
        try:
            return decode(str(text))
        except CarriedFormatError as exc:
            field = f"data.{DATA_KEY}" + (f": {exc.field}" if exc.field else "")
            self._warn(
                "format",
                "%s: %s: %s; starting with no stored carried state (overwritten at the next write)",
                self.where,
                field,
                exc.problem,
            )
            return None

    def _writer(self, found: JsonObj) -> str:
        annotations = found.get("metadata", {}).get("annotations") or {}
        return str(annotations.get(WRITER_ANNOTATION) or "an unknown writer")

    def _failed(self, action: str, exc: ApiError) -> None:
        self._retry_at = time.monotonic() + self.retry_s
        self._warn(
            action,
            "%s: could not %s the carried state: %s; trying again in %g s",
            self.where,
            action,
            exc,
            self.retry_s,
        )

    def _warn(self, key: str, message: str, *args: object) -> None:
        """A warning, repeated at most every 10 minutes per ``key`` (debug in between)."""
        now = time.monotonic()
        last = self._warned.get(key)
        if last is None or now - last >= _WARN_EVERY_S:
            self._warned[key] = now
            log.warning(message, *args)
        else:
            log.debug(message, *args)
