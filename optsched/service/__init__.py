"""optsched as a service: rounds over HTTP, kube-scheduler's extender verbs, Prometheus metrics.

Needs the `server` extra (`pip install 'optsched[server]'`: FastAPI, uvicorn, prometheus-client),
and the `k8s` extra for Kubernetes objects. `optsched serve` runs `create_app` with uvicorn;
docs/integration.md gives the routes, the extender configuration and the metrics.
"""

from __future__ import annotations

from optsched.service.app import ServiceSettings, create_app
from optsched.service.rounds import RoundSettings
from optsched.service.state import ClusterState

__all__ = ["ClusterState", "RoundSettings", "ServiceSettings", "create_app"]
