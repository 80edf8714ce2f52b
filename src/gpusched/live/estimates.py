"""What users tell the live scheduler about a job's run time: who runs it, what kind of job it
is, and how long they expect it to take (docs/live.md, "Run-time estimates").

The core asks each job's run time of ``Session.runtime_estimate``: the job's own
``runtime_estimate``, else the mean of completed jobs of the same ``(user, kind)``
(``Snapshot.runtime_stats``), else one hour. Backfill reservations, deadlines and estimated
starts are all laid out from it, so a live pod must be able to say these three things:

``gpusched.dev/runtime-estimate: "5400"`` (annotation, on a pod or its PodGroup)
    the expected run time: seconds (``"5400"``, ``"0.5"``) or a duration in Go's notation
    (``"90m"``, ``"2h"``, ``"1h30m"``, ``"45s"``, ``"1.5h"``, ``"500ms"``); more than zero.
``gpusched.dev/user: alice`` (label, on the pod)
    whose job it is, for the learned means; default: the pod's namespace.
``gpusched.dev/kind: training`` (label, on the pod)
    ``training``, ``inference``, ``notebook`` or ``batch`` (the default, as for any
    :class:`~gpusched.model.Job`).

A malformed value never raises here: the parse functions return a problem, which keeps the pod
pending with a message naming the field, the value and the fix (as a bad
``gpusched.dev/gpu-milli`` does). An estimate is advisory, but a typo silently replaced by the
default hour would move reservations the user cannot see; a pending pod with the reason is
seen at once, and annotations and labels can be fixed in place (``kubectl annotate
--overwrite``) without re-creating the pod.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from gpusched.model import JobKind

__all__ = [
    "KIND_LABEL",
    "RUNTIME_ESTIMATE_ANNOTATION",
    "USER_LABEL",
    "JobFields",
    "format_seconds",
    "job_fields",
    "parse_duration",
    "parse_estimate",
    "parse_kind",
]

RUNTIME_ESTIMATE_ANNOTATION = "gpusched.dev/runtime-estimate"
USER_LABEL = "gpusched.dev/user"
KIND_LABEL = "gpusched.dev/kind"

_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_NUMBER = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
_PART = re.compile(rf"({_NUMBER})(ms|h|m|s)")
_DURATION = re.compile(rf"(?:{_NUMBER}(?:ms|h|m|s))+")
_SECONDS = re.compile(_NUMBER)
_KINDS = ", ".join(k.value for k in JobKind)


def parse_duration(text: str) -> float:
    """Seconds of ``text``: a plain number of seconds, or Go-style ``1h30m`` (units h, m, s,
    ms; each part may have a fraction). Raises ``ValueError`` on anything else."""
    value = text.strip()
    if _SECONDS.fullmatch(value):
        return float(value)
    if not _DURATION.fullmatch(value):
        raise ValueError(f"cannot read {text!r} as seconds or a duration")
    return sum(float(n) * _UNITS[unit] for n, unit in _PART.findall(value))


def parse_estimate(text: str | None, where: str) -> tuple[float | None, str]:
    """The run-time estimate of annotation value ``text`` (``None`` when absent), or a problem
    saying what is wrong on ``where`` (``"the pod"``, ``"PodGroup ns/g"``) and how to fix it."""
    if text is None:
        return None, ""
    try:
        seconds = parse_duration(text)
    except ValueError:
        seconds = math.nan
    if math.isfinite(seconds) and seconds > 0:
        return seconds, ""
    return None, (
        f"annotation {RUNTIME_ESTIMATE_ANNOTATION} on {where}: got {text!r}; expected the run "
        'time in seconds ("5400") or as a duration ("90m", "2h", "1h30m", "45s"), more than '
        "0; fix it (kubectl annotate --overwrite) or remove it"
    )


def parse_kind(text: str | None) -> tuple[JobKind, str]:
    """The job kind of label value ``text`` (absent: ``batch``, :class:`Job`'s default), or
    ``batch`` and a problem for an unknown kind."""
    if text is None:
        return JobKind.BATCH, ""
    try:
        return JobKind(text), ""
    except ValueError:
        return JobKind.BATCH, (
            f"label {KIND_LABEL}: got {text!r}; expected one of {_KINDS} (or no label: batch); "
            "fix it (kubectl label --overwrite) or remove it"
        )


@dataclass(frozen=True, slots=True)
class JobFields:
    """A pod's user, kind and run-time estimate, and what was wrong with them."""

    user: str
    kind: JobKind
    estimate: float | None
    problems: tuple[str, ...] = ()


def job_fields(
    labels: Mapping[str, str], annotations: Mapping[str, str], namespace: str
) -> JobFields:
    """The pod's :class:`JobFields`: the user is label ``gpusched.dev/user``, else the
    namespace (a namespace is usually a team or a person, and is never missing)."""
    estimate, bad_estimate = parse_estimate(annotations.get(RUNTIME_ESTIMATE_ANNOTATION), "the pod")
    kind, bad_kind = parse_kind(labels.get(KIND_LABEL))
    problems = tuple(p for p in (bad_estimate, bad_kind) if p)
    return JobFields(labels.get(USER_LABEL) or namespace, kind, estimate, problems)


def format_seconds(seconds: float) -> str:
    """``seconds`` as an annotation value :func:`parse_duration` reads back: at most three
    decimals, at least 0.001 (``10.0`` -> ``"10"``, ``1/6`` -> ``"0.167"``)."""
    return f"{max(seconds, 0.001):.3f}".rstrip("0").rstrip(".")
