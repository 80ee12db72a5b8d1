"""Identity's cost on a warm request: the same GET through the real handler with no
identity (auth mode none) and with a verified JWT's claims (auth mode jwt: the caller read
from the request context, the route's scope checked, the owner confined to its user).
Interleaved rounds, medians and their ratio; storage excluded (the in-memory store).

Also the local gateway's verification of a token (ES256, PyJWT), per request: what
`memkit serve --auth jwt` adds; on AWS the HTTP API's JWT authorizer does it.

    python -m bench.auth
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from bench import environment
from bench.figures import median, report

ROUNDS, CALLS, WARM_UP = 6, 1_000, 300
PAD_PATH = "/v1/working-memory/demo/scratchpad"


def _get(auth_mode: str) -> Callable[[], dict[str, Any]]:
    from memkit.config import ApiSettings
    from memkit.handlers.api import make_lambda_handler
    from memkit.handlers.wiring import api_services
    from memkit.models.domain import Owner, PadRef
    from memkit.tokens import content_tokens
    from tests.events import http_event, jwt_authorizer
    from tests.fakes.memory_store import InMemoryStore

    store = InMemoryStore()
    notes = "# User\n- name: Ada\n- prefers short answers\n" * 10
    owner = Owner(tenant="acme", user_id="ada")
    ref = PadRef(owner=owner, session_id="demo")
    store.pads.write_pad(store.pads.read_pad(ref), notes, content_tokens(notes))
    settings = ApiSettings(
        table_name="memkit-bench",
        auth_mode=auth_mode,  # type: ignore[arg-type]
        default_tenant="acme",
        tenant_claim="custom:tenant",
    )
    services = api_services(store, settings)
    handler = make_lambda_handler(lambda: services)
    claims = jwt_authorizer("acme", "ada", "memory:read", "memory:write")
    if auth_mode == "jwt":
        event = http_event("GET", PAD_PATH, authorizer=claims)
    else:
        event = http_event("GET", PAD_PATH, query={"user_id": "ada"})
    context: Any = environment.LambdaContext()

    def call() -> dict[str, Any]:
        return handler(event, context)

    response = call()
    if response["statusCode"] != 200:
        raise SystemExit(f"auth: the GET failed ({auth_mode}): {response}")
    return call


def _timed(call: Callable[[], Any], count: int) -> list[float]:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def main() -> None:
    environment.apply()
    calls = {mode: _get(mode) for mode in ("none", "jwt")}
    for call in calls.values():
        _timed(call, WARM_UP)
    samples: dict[str, list[float]] = {"none": [], "jwt": []}
    for _ in range(ROUNDS):  # interleaved: a busy moment weighs on both alike
        for mode, call in calls.items():
            samples[mode].extend(_timed(call, CALLS))
    plain, verified = median(samples["none"]), median(samples["jwt"])
    report("auth.get_without_identity_ms", plain, "ms median", "auth mode none")
    report("auth.get_with_identity_ms", verified, "ms median", "auth mode jwt: claims checked")
    report("auth.identity_overhead_ratio", verified / plain, "x", "jwt / none, warm, in process")

    import tempfile
    from pathlib import Path

    from memkit_dev.local.auth import JwtAuthorizer, JwtSettings, mint

    with tempfile.TemporaryDirectory() as keys:
        token = mint(Path(keys), "ada", "acme", ["memory:read"])
        authorizer = JwtAuthorizer(JwtSettings(data_dir=Path(keys)))
        header = f"Bearer {token}"
        verify = _timed(lambda: authorizer.context(header), 2_000)
    report("auth.local_jwt_verify_ms", median(verify), "ms median", "ES256, the local gateway")


if __name__ == "__main__":
    main()
