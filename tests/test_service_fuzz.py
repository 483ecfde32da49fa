"""The service's OpenAPI schema fuzzed with schemathesis (bounded examples per operation): every
generated request, of every method to every route, is answered below 500. A bad body is a 4xx
with field paths (tests/test_service.py checks the paths); only a bug inside a solver may be 500.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("kubernetes")
schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, settings  # noqa: E402

from optsched.service import RoundSettings, ServiceSettings, create_app  # noqa: E402

APP = create_app(ServiceSettings(rounds=RoundSettings(time_limit=0.2), loop=False, max_body_bytes=2**20))
SCHEMA = schemathesis.openapi.from_asgi("/openapi.json", APP)


@SCHEMA.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_request_gets_a_server_error(case: Any) -> None:
    response = case.call()
    assert response.status_code < 500, (case.method, case.path, response.status_code, response.text[:500])


def test_the_extender_stanza_in_the_docs_names_routes_the_service_has() -> None:
    """docs/integration.md's KubeSchedulerConfiguration: urlPrefix + each verb is a POST route."""
    import re
    from pathlib import Path

    import yaml

    text = (Path(__file__).parents[1] / "docs" / "integration.md").read_text()
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "KubeSchedulerConfiguration" in b)
    [extender] = yaml.safe_load(block)["extenders"]
    prefix = extender["urlPrefix"].split("8000", 1)[1]
    routes = {(m, r.path) for r in APP.routes for m in getattr(r, "methods", ())}
    verbs = [extender[k] for k in ("filterVerb", "prioritizeVerb", "preemptVerb", "bindVerb")]
    assert all(("POST", f"{prefix}/{verb}") in routes for verb in verbs), (prefix, verbs)
    assert extender["nodeCacheCapable"] is True
