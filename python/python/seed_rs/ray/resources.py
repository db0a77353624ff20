"""Resource requests as the CLI takes them (``--learner-resources '{"GPU": 1}'``)
turned into Ray actor options, and checked against the cluster before
anything is placed: a request no node can satisfy is an error naming the
resource at once, not an actor pending forever.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional, Union

ResourceSpec = Union[None, str, Mapping[str, float]]


def parse(spec: ResourceSpec, what: str) -> Dict[str, float]:
    """``spec`` (a JSON object, a mapping or ``None``) as ``{name: amount}``."""
    if spec is None:
        return {}
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError as e:
            raise ValueError(f"{what}: not JSON ({e}): {spec!r}") from None
    if not isinstance(spec, Mapping):
        raise ValueError(f"{what}: expected a JSON object of resource amounts, got {spec!r}")
    out: Dict[str, float] = {}
    for name, amount in spec.items():
        if not isinstance(amount, (int, float)) or isinstance(amount, bool) or amount < 0:
            raise ValueError(f"{what}: resource {name!r} must be a non-negative number, got {amount!r}")
        out[str(name)] = float(amount)
    return out


def actor_options(resources: Mapping[str, float], default_cpus: float = 1.0) -> Dict[str, Any]:
    """Ray actor options for ``resources``: CPU and GPU as Ray's ``num_cpus``
    and ``num_gpus``, every other name as a custom resource."""
    custom = {k: v for k, v in resources.items() if k not in ("CPU", "GPU")}
    opts: Dict[str, Any] = {"num_cpus": resources.get("CPU", default_cpus)}
    if "GPU" in resources:
        opts["num_gpus"] = resources["GPU"]
    if custom:
        opts["resources"] = custom
    return opts


def check_feasible(resources: Mapping[str, float], what: str, default_cpus: float = 1.0) -> None:
    """Raises ``ValueError`` naming the resource when no alive node of the
    connected Ray cluster has all of ``resources`` (CPU defaulting to
    ``default_cpus``)."""
    import ray

    need = dict(resources)
    need.setdefault("CPU", default_cpus)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    best: Optional[str] = None
    for node in nodes:
        have = node.get("Resources", {})
        missing = [k for k, v in need.items() if v > 0 and have.get(k, 0.0) < v]
        if not missing:
            return
        best = best or missing[0]
    totals = {k: sum(n.get("Resources", {}).get(k, 0.0) for n in nodes) for k in need}
    raise ValueError(
        f"{what}: no node of the Ray cluster has {json.dumps(need)} "
        f"(first missing: {best!r}; the cluster's totals: {json.dumps(totals)})"
    )
