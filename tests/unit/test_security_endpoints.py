"""Findings 1 and 2 of the security probe (issue 20): an operator pointed the product at a
listener of their own and received a server secret (the connection test sent DATABASE_URL as
the API key) and a coachee's words (a replay sent the stored prompt). Here the listener is a real
HTTP server in a thread, answering like an OpenAI-compatible server, and the admin is driven
through Django's test client as each role would."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from agents.llm.client import EndpointSpec, list_models
from agents.llm.errors import LLMPermanentError
from agents.llm.simulator.server import SimulatorServer
from agents.models import AgentConfig, ModelEndpoint, ReplayJob
from agents.operations import prompts, replay
from tests.support.drafts import CANARY, DRAFT_BODY
from tests.support.people import make_operator, make_platform_admin
from tests.support.turns import stored_turn

pytestmark = pytest.mark.timeout(90)
SECRETS = {
    "DATABASE_URL": "postgres://postgres:s3cret-db-password@db:5432/coaching",
    "DJANGO_SECRET_KEY": "s3cret-django-key-0123456789",
    "EMAIL_HOST_PASSWORD": "s3cret-mail-password",
}
ALLOWED_KEY = ("COACHING_LLM_KEY_PROBE", "sk-allowed-key-for-the-probe")


class Listener:
    """Records every request (line, headers, body) and answers like a small model server."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def _record(self) -> bytes:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                listener.requests.append(f"{self.requestline}\n{self.headers}\n{body.decode(errors='replace')}")
                return body

            def _answer(self, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._record()
                self._answer({"object": "list", "data": [{"id": "m", "object": "model"}]})

            def do_POST(self) -> None:
                self._record()
                message = {"role": "assistant", "content": "{}"}
                self._answer(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "m",
                        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }
                )

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def received(self) -> str:
        return "\n".join(self.requests)


@pytest.fixture
def listener(monkeypatch: pytest.MonkeyPatch, settings: Any) -> Iterator[Listener]:
    for name, value in (*SECRETS.items(), ALLOWED_KEY):
        monkeypatch.setenv(name, value)
    settings.COACHING_LLM_ALLOW_REQUESTS = True
    server = Listener()
    server.thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()


def login(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def admin_url(name: str, *args: Any) -> str:
    return reverse(f"admin:agents_{name}", args=args)


def endpoint_form(base_url: str, api_key_env: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": "mine",
        "kind": "openai",
        "base_url": base_url,
        "model_id": "m",
        "api_key_env": api_key_env,
        "max_concurrency": 1,
        "connect_timeout_s": 2,
        "read_timeout_s": 10,
        **extra,
    }


def no_secret_in(text: str) -> None:
    for name, value in SECRETS.items():
        assert value not in text, f"{name} reached the listener"


@pytest.mark.parametrize("variable", sorted(SECRETS))
def test_an_operator_cannot_have_a_server_secret_sent_to_their_listener(
    seeded: None, listener: Listener, variable: str
) -> None:
    operator = login(make_operator())
    added = operator.post(admin_url("modelendpoint_add"), endpoint_form(listener.base_url, variable))
    assert added.status_code == 403
    assert not ModelEndpoint.objects.filter(name="mine").exists()
    # Even a row that bypassed validation (update(), raw SQL) does not send the variable: the
    # client refuses at call time, and the test refuses an endpoint no platform admin trusted.
    embedded = ModelEndpoint.objects.get(name="embedded")
    ModelEndpoint.objects.filter(pk=embedded.pk).update(base_url=listener.base_url, api_key_env=variable)
    response = operator.post(admin_url("modelendpoint_test_connection", embedded.pk))
    assert response.status_code == 200
    (result,) = response.context["results"]
    assert not result.ok
    assert "API-key variable refused" in result.list_error
    ModelEndpoint.objects.filter(pk=embedded.pk).update(trusted_for_coachee_data=False)
    operator.post(admin_url("modelendpoint_test_connection", embedded.pk))
    no_secret_in(listener.received())
    assert listener.requests == []


def test_a_platform_admin_cannot_name_a_secret_either_on_save_in_the_shell_or_at_call_time(
    seeded: None, listener: Listener, settings: Any
) -> None:
    platform = login(make_platform_admin())
    for variable in SECRETS:
        page = platform.post(admin_url("modelendpoint_add"), endpoint_form(listener.base_url, variable))
        assert page.status_code == 200
        assert "Not allowed:" in page.content.decode()
    with pytest.raises(ValidationError):
        ModelEndpoint.objects.create(name="shell", base_url=listener.base_url, model_id="m", api_key_env="DATABASE_URL")
    with pytest.raises(CommandError, match="one of the app's own settings"):
        call_command("endpoint_configure", "x", "--kind", "vllm", "--base-url", listener.base_url, "--model", "m",
                     "--api-key-env", "DJANGO_SECRET_KEY")  # fmt: skip
    # A pattern widened to everything still never reaches the app's own variables.
    settings.COACHING_LLM_KEY_ENV_PATTERN = "*"
    spec = EndpointSpec(name="x", kind="openai", base_url=listener.base_url, model_id="m", api_key_env="DATABASE_URL")
    with pytest.raises(LLMPermanentError, match="refused"):
        list_models(spec)
    no_secret_in(listener.received())
    assert listener.requests == []


def test_an_allowed_key_reaches_a_trusted_endpoint(seeded: None, listener: Listener) -> None:
    """The control: the listener does hear what a platform admin configured and trusted."""
    platform = login(make_platform_admin())
    form = endpoint_form(listener.base_url, ALLOWED_KEY[0], trusted_for_coachee_data="on")
    assert platform.post(admin_url("modelendpoint_add"), form).status_code == 302
    endpoint = ModelEndpoint.objects.get(name="mine")
    (result,) = platform.post(admin_url("modelendpoint_test_connection", endpoint.pk)).context["results"]
    assert result.ok, result.summary
    assert f"Bearer {ALLOWED_KEY[1]}" in listener.received()
    no_secret_in(listener.received())


def test_an_operator_cannot_send_a_coachees_words_to_an_untrusted_endpoint(
    on_sim: SimulatorServer,
    listener: Listener,
) -> None:
    run = stored_turn("replayed", text=f"My own words: {CANARY}")
    assert CANARY in run.turn.shared_prompt
    operator = login(make_operator())
    # The operator's own endpoint cannot be made; one a platform admin added but did not trust
    # cannot be chosen, and a replay refuses it when an agent points there anyway.
    assert operator.post(admin_url("modelendpoint_add"), endpoint_form(listener.base_url, "")).status_code == 403
    untrusted = ModelEndpoint.objects.create(name="untrusted", base_url=listener.base_url, model_id="m")
    config = AgentConfig.objects.get(agent="plasticity")
    form = {"endpoint": untrusted.pk, "temperature": 0.3, "max_tokens": 600, "context_budget": 6000, "enabled": "on"}
    assert operator.post(admin_url("agentconfig_change", config.pk), form).status_code == 200
    assert AgentConfig.objects.get(agent="plasticity").endpoint.name == "test"
    AgentConfig.objects.filter(agent="plasticity").update(endpoint=untrusted)
    draft = prompts.prompt_draft_create(agent="plasticity", body=DRAFT_BODY, user=None)
    page = operator.post(admin_url("promptversion_replay", draft.pk), {"runs": [run.pk]})
    assert "is not marked trusted for coachee data" in page.content.decode()
    assert CANARY not in listener.received()
    assert listener.requests == []
    # Trusted by a platform admin, the same replay goes out: the refusal above was the trust.
    ModelEndpoint.objects.filter(pk=untrusted.pk).update(trusted_for_coachee_data=True)
    operator.post(admin_url("promptversion_replay", draft.pk), {"runs": [run.pk]})
    (job,) = ReplayJob.objects.filter(version=draft)  # queued; the worker's task runs it
    replay.replay_job_run(job.pk)
    assert CANARY in listener.received()
