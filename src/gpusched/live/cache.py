"""List+watch caches of Kubernetes objects, each kept up to date by one thread.

The protocol client-go's reflector follows:

1. **list** the collection (in pages of 500), remember the list's ``resourceVersion``;
2. **watch** from that version with bookmarks (``allowWatchBookmarks``), applying
   ADDED/MODIFIED/DELETED to the cache and moving the version forward on every event and
   bookmark; a watch that the server ends (``timeoutSeconds``) is re-opened from the version;
3. on ``410 Gone`` (the version was compacted away), or an ERROR event saying so, **re-list**
   from scratch and replace the cache; on a broken connection, back off and watch again.

A collection the server does not serve (404: a CRD that is not installed) counts as synced and
empty, and is retried every ``absent_retry_s``. Objects are converted once, on arrival, into the
slim values the scheduler reads (:mod:`.translate`, :mod:`.translate_pod`,
:mod:`.translate_podgroup`); an object that fails to convert is logged and left out.
``on_change`` is called after every change so the scheduling loop wakes up.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

from gpusched.live.client import ApiError, JsonObj, KubeClient

__all__ = ["Informer"]

T = TypeVar("T")
log = logging.getLogger(__name__)

_PAGE = "500"


def object_key(obj: JsonObj) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


class Informer(Generic[T]):
    """A cache of one collection (``path``, e.g. ``/api/v1/nodes``), converted by ``convert``."""

    def __init__(
        self,
        client: KubeClient,
        path: str,
        convert: Callable[[JsonObj], T],
        *,
        params: Mapping[str, str] | None = None,
        on_change: Callable[[], None] = lambda: None,
        watch_timeout_s: int = 300,
        absent_retry_s: float = 10.0,
    ) -> None:
        self.client = client
        self.path = path
        self.convert = convert
        self.params = dict(params or {})
        self.on_change = on_change
        self.watch_timeout_s = watch_timeout_s
        self.absent_retry_s = absent_retry_s
        self.synced = threading.Event()
        self.served = False
        self.relists = 0
        self._items: dict[str, T] = {}
        self._lock = threading.Lock()
        self._version = ""

    # -- reading ---------------------------------------------------------------------------

    def items(self) -> dict[str, T]:
        """A copy of the cache, by ``namespace/name`` (``name`` for cluster-scoped objects)."""
        with self._lock:
            return dict(self._items)

    def get(self, key: str) -> T | None:
        with self._lock:
            return self._items.get(key)

    # -- the loop --------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """List and watch until ``stop`` is set."""
        backoff = 0.5
        need_list = True
        while not stop.is_set():
            try:
                if need_list:
                    self._list()
                    need_list = False
                self._watch(stop)
                backoff = 0.5
            except ApiError as exc:
                if exc.status_code == 410:
                    log.info("%s: watch version expired; re-listing", self.path)
                    need_list = True
                    continue
                if exc.status_code == 404:
                    self._absent()
                    stop.wait(self.absent_retry_s)
                    need_list = True
                    continue
                log.warning("%s: %s; retrying in %.1f s", self.path, exc, backoff)
                stop.wait(backoff * (1 + random.random()))
                backoff = min(backoff * 2, 30.0)
                need_list = need_list or exc.status_code not in (0, 500, 503, 504, 429)

    def _absent(self) -> None:
        with self._lock:
            changed = bool(self._items)
            self._items = {}
        self.served = False
        self.synced.set()
        if changed:
            self.on_change()

    def _list(self) -> None:
        items: dict[str, T] = {}
        params = {**self.params, "limit": _PAGE}
        while True:
            page = self.client.get(self.path, params)
            for obj in page.get("items") or []:
                self._convert_into(items, obj)
            meta = page.get("metadata") or {}
            if not meta.get("continue"):
                break
            params = {**self.params, "limit": _PAGE, "continue": meta["continue"]}
        with self._lock:
            self._items = items
            self._version = str(meta.get("resourceVersion", ""))
        self.relists += 1
        self.served = True
        self.synced.set()
        self.on_change()

    def _convert_into(self, items: dict[str, T], obj: JsonObj) -> None:
        key = object_key(obj)
        try:
            items[key] = self.convert(obj)
        except (KeyError, ValueError, TypeError) as exc:
            log.warning("%s %s: cannot read it (%s); ignored", self.path, key, exc)
            items.pop(key, None)

    def _watch(self, stop: threading.Event) -> None:
        params = {
            **self.params,
            "resourceVersion": self._version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(self.watch_timeout_s),
        }
        for event in self.client.watch(self.path, params, timeout_s=self.watch_timeout_s):
            if stop.is_set():
                return
            kind = event.get("type")
            obj: JsonObj = event.get("object") or {}
            if kind == "ERROR":
                code = int(obj.get("code") or 0)
                raise ApiError("WATCH", self.path, code, obj)
            version = (obj.get("metadata") or {}).get("resourceVersion")
            if kind != "BOOKMARK":
                with self._lock:
                    if kind == "DELETED":
                        self._items.pop(object_key(obj), None)
                    else:
                        self._convert_into(self._items, obj)
                    if version:
                        self._version = str(version)
                self.on_change()
            elif version:
                with self._lock:
                    self._version = str(version)
