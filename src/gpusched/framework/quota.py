"""Queue quota accounting for one cycle: usage, limits, guarantees, borrowing, fair share.

Every running and newly placed job is charged to its queue and each ancestor with its request
vector (:func:`job_request`): ``gpu`` in GPU-equivalent milli (fractions included; a MIG
instance as ``floor(1000 * compute_slices / 7)``, :func:`gpusched.model.mig.mig_milli`),
``gpu/<M>`` for the model it landed on, ``cpu`` and ``memory``. Capacity counts MIG-enabled
GPUs as 1000 each, like plain ones.

For a job ``j`` of queue ``q`` requesting ``r`` (over every resource ``x`` named):

* **limit:** for each queue ``a`` on ``q``'s path with a limit on ``x``:
  ``U_a[x] + r[x] <= limit_a[x]``; otherwise the job waits, whatever the cluster has free.
* **within guarantee:** for each ``a`` on the path: ``U_a[x] + r[x] <= G_a[x]`` for ``x`` in
  ``{gpu} | names(G_a)``. Such a job may reclaim borrowed resources by preemption.
* **borrowing** (not within guarantee): the job uses what is left of its own guarantee, and
  borrows the rest, ``b = max_{a in path(q)} max(0, r[gpu] - max(0, G_a - U_a))``. Allowed
  while ``b <= B_q`` with the pool

      B_q = C - SUM_p max(G_p, U_p) + SUM_{p not on path(q)} min(lend_p, max(0, G_p - U_p))

  over leaf queues ``p``, where ``C`` is the cluster's capacity: free capacity not promised to
  anyone, plus the part of *other* queues' idle guarantees that their owners lend (all of it
  when no lending limit is set). A queue's own lending limit never stops it from using its
  own guarantee. A job that cannot be preempted borrows only capacity promised to no one
  (the pool without the lending term): it could never be reclaimed, so it must never sit on
  another queue's guarantee.
* **fair share:** ``share_q = max_x (U_q[x] + H_q[x]) / C[x] / weight_q`` -- weighted dominant
  resource share of current usage ``U`` plus decayed past usage ``H`` (supplied by the driver).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from gpusched.framework.state import ClusterState
from gpusched.model import (
    CPU,
    GPU,
    MEMORY,
    Job,
    QueueName,
    QueueTree,
    Resources,
    Task,
    gpu_model_resource,
)

__all__ = ["QuotaBook", "add_request", "job_request"]

#: One guarantee to check a request against: queue, guarantee, the names it always
#: constrains, whether it is given per GPU model.
_GuaranteeCheck = tuple[QueueName, Resources, frozenset[str], bool]


def job_request(
    job: Job, models: Sequence[str] = (), tasks: Sequence[Task] | None = None
) -> Resources:
    """What ``tasks`` of ``job`` are charged (default: the gang, its ``min_available`` tasks;
    a running job is charged for every task it holds, elastic members included). ``models``:
    where each task landed, when known."""
    charged: dict[str, int] = {}
    add_request(charged, job, models, tasks)
    return Resources(charged)


def add_request(
    total: dict[str, int],
    job: Job,
    models: Sequence[str] = (),
    tasks: Sequence[Task] | None = None,
) -> None:
    """Add :func:`job_request` to ``total`` in place, name by name in the request's own order
    (per-model names, then ``gpu``, ``cpu``, ``memory``): adding many jobs' requests this way
    gives the sum, with its names in the order adding their vectors one by one gives."""
    gpu = cpu = mem = 0
    landed = len(models)
    for i, task in enumerate(job.tasks[: job.min_available] if tasks is None else tasks):
        s = task.shape
        g = s.total_gpu_milli  # MIG instances in GPU-equivalents (model.mig.mig_milli)
        gpu += g
        cpu += s.cpu_milli
        mem += s.memory_mib
        if not g:
            continue
        if i < landed and models[i]:
            key = gpu_model_resource(models[i])
        elif len(s.gpu_models) == 1:
            key = gpu_model_resource(next(iter(s.gpu_models)))
        else:
            continue
        total[key] = total.get(key, 0) + g
    total[GPU] = total.get(GPU, 0) + gpu
    total[CPU] = total.get(CPU, 0) + cpu
    total[MEMORY] = total.get(MEMORY, 0) + mem


class QuotaBook:
    """Usage of every queue during one cycle, updated as jobs are placed or evicted."""

    __slots__ = (
        "_admitted",
        "_guarantees",
        "_leaves",
        "_never_pool",
        "_paths",
        "capacity",
        "charged",
        "history",
        "relevant",
        "tree",
        "usage",
        "version",
    )

    def __init__(
        self,
        tree: QueueTree,
        state: ClusterState,
        charges: Iterable[tuple[QueueName, Resources]],
        history: Mapping[QueueName, Mapping[str, float]] | None = None,
    ) -> None:
        self.tree = tree
        self.history = history or {}
        cap: dict[str, int] = {
            GPU: state.total_gpu_milli,
            CPU: int(state.cpu_cap.sum()),
            MEMORY: int(state.mem_cap.sum()),
        }
        for i, model in enumerate(state.models):
            cap[gpu_model_resource(model)] = int(state.gpu_cap[state.model_id == i].sum())
        self.capacity = Resources(cap)
        self.usage: dict[QueueName, Resources] = {q.name: Resources() for q in tree}
        #: Resources any queue names in a guarantee, limit or lending limit (and ``gpu``):
        #: the only components of a request the answers below depend on.
        self.relevant: frozenset[str] = frozenset(
            {GPU}
            | {
                x
                for q in tree
                for bound in (q.guaranteed, q.limit, q.lending_limit)
                if bound is not None
                for x in bound
            }
        )
        #: Bumped on every charge and refund: answers about usage keyed on it stay valid.
        self.version = 0
        #: Per resource, the sum of every positive amount ever charged (refunds are not
        #: subtracted): no queue's usage of ``x`` has grown by more than the growth of
        #: ``charged[x]`` over any stretch of the book's life (:meth:`still_admits`).
        self.charged: dict[str, int] = {}
        # Ceilings on ``charged`` under which a kept admission stands (:meth:`admit_until`).
        self._admitted: dict[object, dict[str, int]] = {}
        # Facts of the (fixed) tree and capacity, worked out once per queue or resource.
        self._paths: dict[QueueName, tuple[QueueName, ...]] = {}
        self._guarantees: dict[QueueName, tuple[_GuaranteeCheck, ...]] = {}
        self._leaves: dict[str, tuple[tuple[QueueName, int, int], ...]] = {}
        self._never_pool: dict[QueueName, int] = {}
        totals: dict[QueueName, dict[str, int]] = {}
        for queue, req in charges:  # summed per queue first: one vector add per queue
            acc = totals.setdefault(queue, {})
            for x, v in req.items():
                acc[x] = acc.get(x, 0) + v
        for queue, acc in totals.items():
            self.charge(queue, Resources(acc))

    # -- changes ---------------------------------------------------------------------------

    def charge(self, queue: QueueName, req: Resources) -> None:
        if queue not in self.tree:
            return
        self.version += 1
        for q in self._path(queue):
            self.usage[q] = self.usage[q] + req
        charged = self.charged
        for x, v in req.items():
            if v > 0:
                charged[x] = charged.get(x, 0) + v

    def refund(self, queue: QueueName, req: Resources) -> None:
        if queue not in self.tree:
            return
        self.version += 1
        for q in self._path(queue):
            self.usage[q] = self.usage[q] - req

    # -- facts of the tree (fixed for the book's life) -------------------------------------

    def _path(self, queue: QueueName) -> tuple[QueueName, ...]:
        """``tree.path(queue)``, kept."""
        path = self._paths.get(queue)
        if path is None:
            path = self._paths[queue] = self.tree.path(queue)
        return path

    def _leaf_terms(self, resource: str) -> tuple[tuple[QueueName, int, int], ...]:
        """Per leaf queue ``p``: ``(p, G_p, lend_p)`` for ``resource``, where ``lend_p`` is
        the lending limit, or ``G_p`` when none is set for it."""
        terms = self._leaves.get(resource)
        if terms is None:
            out = []
            for p in self.tree.leaves():
                spec = self.tree[p]
                g = spec.guaranteed[resource]
                lending = spec.lending_limit
                lend = g if lending is None or resource not in lending else lending[resource]
                out.append((p, g, lend))
            terms = self._leaves[resource] = tuple(out)
        return terms

    def _idle_pool(self, queue: QueueName) -> int:
        """What ``queue`` could ever borrow, with every queue idle::

            C[gpu] - SUM_p G_p + SUM_{p not on path(q)} min(lend_p, G_p)

        (the pool ``B_q`` of the module docstring with ``U = 0``; fixed for the book's life).
        """
        pool = self._never_pool.get(queue)
        if pool is None:
            path = self._path(queue)
            pool = self.capacity[GPU]
            for p, g, lend in self._leaf_terms(GPU):
                pool -= g
                if p not in path:
                    pool += min(lend, g)
            self._never_pool[queue] = pool
        return pool

    def _guarantee_checks(self, queue: QueueName) -> tuple[_GuaranteeCheck, ...]:
        """Per queue ``a`` on ``queue``'s path: ``(a, G_a, names, per_model)``, where
        ``names = {gpu} | names(G_a)`` and ``per_model`` says ``G_a`` is given per model."""
        checks = self._guarantees.get(queue)
        if checks is None:
            out = []
            for q in self._path(queue):
                g = self.tree[q].guaranteed
                out.append((q, g, frozenset({GPU, *g}), _per_model(g)))
            checks = self._guarantees[queue] = tuple(out)
        return checks

    # -- questions -------------------------------------------------------------------------

    def key(self, req: Resources) -> tuple[tuple[str, int], ...]:
        """``req`` reduced to the components that matter here (:attr:`relevant`): two
        requests with the same key get the same answer from every question below."""
        return tuple(
            sorted((x, v) for x, v in req.items() if v and (x in self.relevant or x[:4] == _MODEL))
        )

    def limiting_queue(self, queue: QueueName, req: Resources) -> QueueName | None:
        """The first queue on ``queue``'s path whose limit ``req`` would break, or ``None``."""
        for q in self._path(queue):
            limit = self.tree[q].limit
            if limit is not None and any(self.usage[q][x] + req[x] > c for x, c in limit.items()):
                return q
        return None

    def over_limit(self, queue: QueueName, req: Resources) -> str | None:
        """Why ``req`` would break a limit on ``queue``'s path, or ``None``."""
        for q in self._path(queue):
            limit = self.tree[q].limit
            if limit is None:
                continue
            for x, cap in limit.items():
                if self.usage[q][x] + req[x] > cap:
                    return (
                        f"queue {q!r} is at {_fmt(x, self.usage[q][x])} of its "
                        f"{_fmt(x, cap)} limit and the job needs {_fmt(x, req[x])} more"
                    )
        return None

    def never_fits(self, queue: QueueName, req: Resources) -> str | None:
        """Why ``req`` could not be admitted to ``queue`` even with every queue idle, or
        ``None``: it exceeds a limit on the path, or the part beyond the guarantees exceeds
        what could ever be borrowed, ``max_a (r - G_a) > C - SUM_p G_p + SUM_{p not on path}
        min(lend_p, G_p)``."""
        return self.never_within_limits(queue, req) or self.never_borrowable(queue, req)

    def never_within_limits(self, queue: QueueName, req: Resources) -> str | None:
        """The limit part of :meth:`never_fits`."""
        path = self._path(queue)
        for q in path:
            limit = self.tree[q].limit
            for x, cap in (limit or Resources()).items():
                if req[x] > cap:
                    return (
                        f"the job needs {_fmt(x, req[x])} but queue {q!r} is limited to "
                        f"{_fmt(x, cap)}: it can never run there; raise the limit or make the "
                        "job smaller"
                    )
        return None

    def never_borrowable(self, queue: QueueName, req: Resources) -> str | None:
        """The borrowing part of :meth:`never_fits`."""
        path = self._path(queue)
        beyond = max(max(0, req[GPU] - self.tree[q].guaranteed[GPU]) for q in path)
        pool = self._idle_pool(queue)
        if beyond > pool:
            return (
                f"the job needs {_fmt(GPU, beyond)} beyond queue {queue!r}'s guarantee but at "
                f"most {_fmt(GPU, max(pool, 0))} can ever be borrowed (others' guarantees and "
                "lending limits): it can never run there"
            )
        return None

    def within_guarantee(self, queue: QueueName, req: Resources) -> bool:
        """Whether ``req`` fits every guarantee on ``queue``'s path: each resource the
        guarantee names, GPUs always, and -- for a guarantee given per GPU model -- each model
        ``req`` asks for (a model it does not name is guaranteed 0)."""
        for q, g, names, per_model in self._guarantee_checks(queue):
            used = self.usage[q]
            for x in names:
                r = req[x]
                if r and used[x] + r > g[x]:
                    return False
            if per_model:
                for x in req:
                    if x not in names and x.startswith(_MODEL):
                        r = req[x]
                        if r and used[x] + r > g[x]:
                            return False
        return True

    def within_guarantee_when_idle(self, queue: QueueName, req: Resources) -> bool:
        """:meth:`within_guarantee` with the queues on ``queue``'s path idle: whether ``req``
        could ever be admitted without borrowing."""
        for _, g, names, per_model in self._guarantee_checks(queue):
            if any(req[x] > g[x] for x in names):
                return False
            if per_model and any(
                req[x] > g[x] for x in req if x not in names and x.startswith(_MODEL)
            ):
                return False
        return True

    def admit_until(self, key: object, queue: QueueName, req: Resources, *, lent: bool) -> None:
        """Remember, under ``key``, that ``req`` of ``queue`` is admitted at the current usage
        (no limit broken, and within the guarantees or allowed to borrow, as
        :meth:`~gpusched.framework.session_quota.QuotaAdmission._quota_problem` asks with
        ``borrow=True``), with ceilings on :attr:`charged` up to which that stays true.

        Every answer is monotone in usage: more usage anywhere only breaks limits, leaves
        less guarantee room and a smaller pool ``B_q``. With ``D[x]`` the growth of
        ``charged[x]`` since now, every queue's usage of ``x`` is at most ``U[x] + D[x]``
        (refunds only lower it), so the request stays admitted while, per resource:

        * ``D[x] <= L_a[x] - U_a[x] - r[x]`` for each limit on the path;
        * when within the guarantees now: ``D[x] <= G_a[x] - U_a[x] - r[x]`` for each
          guarantee check that applies (``r[x] > 0``);
        * otherwise (borrowing): ``D[gpu] <= (B_q - b) // 3``, since ``b`` grows by at most
          ``D[gpu]`` and ``B_q`` shrinks by at most ``2 D[gpu]`` (the leaves' usage grows by
          at most ``D[gpu]`` in all; each unit costs the pool at most one unit through
          ``max(G_p, U_p)`` and one through the lent idle guarantee).

        The ceiling is ``charged[x]`` now plus that slack. Nothing is remembered when
        ``req`` is refused now."""
        slack: dict[str, int] = {}

        def bound(x: str, room: int) -> None:
            slack[x] = min(slack.get(x, room), room)

        usage = self.usage
        for q in self._path(queue):
            limit = self.tree[q].limit
            for x, cap in (limit or {}).items():
                bound(x, cap - usage[q][x] - req[x])
        if self.within_guarantee(queue, req):
            for q, g, names, per_model in self._guarantee_checks(queue):
                used = usage[q]
                for x in names:
                    r = req[x]
                    if r:
                        bound(x, g[x] - used[x] - r)
                if per_model:
                    for x in req:
                        if x not in names and x.startswith(_MODEL):
                            r = req[x]
                            if r:
                                bound(x, g[x] - used[x] - r)
        else:
            room = self.borrowable(queue, lent=lent) - self.beyond_guarantee(queue, req)
            bound(GPU, room // 3 if room >= 0 else -1)
        if any(v < 0 for v in slack.values()):
            return
        charged = self.charged
        self._admitted[key] = {x: charged.get(x, 0) + v for x, v in slack.items()}

    def still_admits(self, key: object) -> bool:
        """Whether the admission kept under ``key`` (:meth:`admit_until`) still stands: no
        resource charged beyond its ceiling since. ``False`` when none is kept (ask again)."""
        ceiling = self._admitted.get(key)
        if ceiling is None:
            return False
        charged = self.charged
        return all(charged.get(x, 0) <= c for x, c in ceiling.items())

    def borrowable(
        self, queue: QueueName | None = None, resource: str = GPU, *, lent: bool = True
    ) -> int:
        """The pool ``B_q[resource]`` that ``queue`` may borrow from (module docstring); with
        no queue, what anyone could borrow from all lent idle guarantees. ``lent=False``: only
        capacity promised to no one (what a job that cannot be preempted may borrow)."""
        own = self._path(queue) if queue is not None and queue in self.tree else ()
        pool = self.capacity[resource]
        usage = self.usage
        for q, g, lend in self._leaf_terms(resource):
            u = usage[q][resource]
            pool -= max(g, u)
            if lent and q not in own:  # the queue's own idle guarantee is used, not borrowed
                pool += min(lend, max(0, g - u))
        return pool

    def beyond_guarantee(self, queue: QueueName, req: Resources, resource: str = GPU) -> int:
        """``b = max_{a in path(q)} max(0, r - max(0, G_a - U_a))``: the part of ``req`` that
        no guarantee on ``queue``'s path covers (what the job borrows)."""
        worst = 0
        for q in self._path(queue):
            room = max(0, self.tree[q].guaranteed[resource] - self.usage[q][resource])
            worst = max(worst, req[resource] - room)
        return worst

    def beyond_guarantee_when_idle(
        self, queue: QueueName, req: Resources, resource: str = GPU
    ) -> int:
        """``max_{a in path(q)} max(0, r - G_a)``: what ``req`` would borrow with the queues on
        its path idle."""
        return max(
            max(0, req[resource] - self.tree[q].guaranteed[resource]) for q in self._path(queue)
        )

    def may_borrow(self, queue: QueueName, req: Resources, *, lent: bool = True) -> bool:
        """Whether the part of ``req`` beyond ``queue``'s guarantees fits the pool
        ``B_q``: ``b <= B_q`` (module docstring; ``lent=False``: unpromised capacity only)."""
        return self.beyond_guarantee(queue, req) <= self.borrowable(queue, lent=lent)

    def borrowed(self, queue: QueueName, resource: str = GPU) -> int:
        """How much of ``resource`` (GPU milli by default; ``gpu/<MODEL>`` for one model)
        ``queue`` uses beyond its guarantee of it::

            borrowed(q, r) = max(0, U_q[r] - G_q[r])
            borrowed(q, gpu/M) = min(borrowed(q, gpu), U_q[gpu/M])   if G_q names no model

        (a guarantee in GPUs of any model is borrowed only beyond it in total, and then at most
        what the queue uses of ``M``)."""
        usage, g = self.usage[queue], self.tree[queue].guaranteed
        if resource.startswith(_MODEL) and not _per_model(g):
            return min(max(0, usage[GPU] - g[GPU]), usage[resource])
        return max(0, usage[resource] - g[resource])

    def share(self, queue: QueueName) -> float:
        """Weighted dominant share of ``queue`` (current plus decayed usage)."""
        spec = self.tree.get(queue)
        if spec is None:
            return 0.0
        hist = self.history.get(queue, {})
        best = 0.0
        for x in (GPU, CPU, MEMORY):
            cap = self.capacity[x]
            if cap:
                best = max(best, (self.usage[queue][x] + hist.get(x, 0.0)) / cap)
        return best / spec.weight

    def describe(self, queue: QueueName) -> str:
        """``queue 'a' uses 24.0/32.0 guaranteed GPUs`` for messages."""
        spec = self.tree.get(queue)
        if spec is None:
            return f"queue {queue!r} is not configured"
        u, g = self.usage[queue][GPU], spec.guaranteed[GPU]
        lim = f", limit {spec.limit[GPU] / 1000:g}" if spec.limit and GPU in spec.limit else ""
        return f"queue {queue!r} uses {u / 1000:g}/{g / 1000:g} guaranteed GPUs{lim}"


_MODEL = f"{GPU}/"


def _per_model(guaranteed: Resources) -> bool:
    """Whether a guarantee is given per GPU model (names some ``gpu/<MODEL>``)."""
    return any(x.startswith(_MODEL) for x in guaranteed)


def _fmt(resource: str, amount: int) -> str:
    if resource.startswith(GPU):
        return f"{amount / 1000:g} {resource.replace(GPU, 'GPU')}"
    if resource == CPU:
        return f"{amount / 1000:g} CPU"
    return f"{amount / 1024:.1f} GiB"
