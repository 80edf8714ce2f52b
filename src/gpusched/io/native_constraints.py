"""Node constraints in gpusched's native files: node taints, and pod tolerations, node
selectors and node affinity (Kubernetes semantics, :mod:`gpusched.model.constraints`).

The entries validate one value each and say what is wrong in Kubernetes' terms (a toleration
with operator ``Exists`` and a value, an ``In`` expression without values); the file loaders
(:mod:`gpusched.io.native_cluster`, :mod:`gpusched.io.native_workload`) turn those errors into
file:line:field messages.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpusched.model import Constraints, Effect, Expression, Operator

__all__ = [
    "ExpressionEntry",
    "PreferredEntry",
    "TaintEntry",
    "TolerationEntry",
    "dump_constraints",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TaintEntry(_Strict):
    """A node taint ``key=value:effect`` (semantics: :mod:`gpusched.model.constraints`)."""

    key: str = Field(min_length=1, description="Taint key.")
    value: str = Field(default="", description="Taint value (may be empty).")
    effect: Effect = Field(
        default=Effect.NO_SCHEDULE,
        description="NoSchedule (keeps off pods that do not tolerate it), PreferNoSchedule "
        "(only lowers the score), NoExecute (treated as NoSchedule).",
    )


class TolerationEntry(_Strict):
    """A pod toleration: matches taints with the same key (and value, for Equal)."""

    key: str = Field(default="", description="Taint key; empty with Exists: every key.")
    operator: Operator = Field(default=Operator.EQUAL, description="Equal or Exists.")
    value: str = Field(default="", description="Taint value to match (Equal only).")
    effect: Effect | None = Field(default=None, description="Effect to match; absent: any.")

    @model_validator(mode="after")
    def _valid(self) -> TolerationEntry:
        if self.operator not in (Operator.EQUAL, Operator.EXISTS):
            raise ValueError(
                f"operator {self.operator.value!r} is not valid in a toleration; "
                "expected Equal or Exists"
            )
        if self.operator is Operator.EXISTS and self.value:
            raise ValueError(
                f"a toleration with operator Exists matches any value; remove value "
                f"{self.value!r} or use operator Equal"
            )
        if not self.key and self.operator is not Operator.EXISTS:
            raise ValueError(
                "a toleration without key must use operator Exists (it then tolerates every taint)"
            )
        return self


class ExpressionEntry(_Strict):
    """A node-affinity expression ``key operator values`` against node labels."""

    key: str = Field(min_length=1, description="Node label key.")
    operator: Operator = Field(description="In, NotIn, Exists or DoesNotExist.")
    values: list[str] = Field(
        default_factory=list, description="Label values (In and NotIn only; at least one)."
    )

    @model_validator(mode="after")
    def _valid(self) -> ExpressionEntry:
        if self.operator is Operator.EQUAL:
            raise ValueError(
                "operator 'Equal' is not valid in node affinity; expected In, NotIn, Exists "
                "or DoesNotExist"
            )
        if self.operator in (Operator.IN, Operator.NOT_IN) and not self.values:
            raise ValueError(f"operator {self.operator.value} needs at least one value")
        if self.operator in (Operator.EXISTS, Operator.DOES_NOT_EXIST) and self.values:
            raise ValueError(f"operator {self.operator.value} takes no values; remove values")
        return self


class PreferredEntry(_Strict):
    """A preferred node-affinity term: ``weight`` for nodes matching every expression."""

    weight: int = Field(ge=1, le=100, strict=True, description="Score weight, 1..100.")
    match: list[ExpressionEntry] = Field(
        min_length=1, description="Expressions, all of which must match."
    )


def dump_constraints(c: Constraints) -> dict[str, Any]:
    """The file fields of ``c`` (only those that are set), the inverse of the entries above."""
    entry: dict[str, Any] = {}

    def expr(e: Expression) -> dict[str, Any]:
        out: dict[str, Any] = {"key": e.key, "operator": e.operator.value}
        if e.values:
            out["values"] = list(e.values)
        return out

    if c.node_selector:
        entry["node_selector"] = dict(c.node_selector)
    if c.tolerations:
        tols = []
        for t in c.tolerations:
            tol: dict[str, Any] = {}
            if t.key:
                tol["key"] = t.key
            tol["operator"] = t.operator.value
            if t.value:
                tol["value"] = t.value
            if t.effect is not None:
                tol["effect"] = t.effect.value
            tols.append(tol)
        entry["tolerations"] = tols
    if c.required:
        entry["affinity_required"] = [[expr(e) for e in term] for term in c.required]
    if c.preferred:
        entry["affinity_preferred"] = [
            {"weight": w, "match": [expr(e) for e in term]} for w, term in c.preferred
        ]
    return entry
