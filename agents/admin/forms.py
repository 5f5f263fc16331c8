"""The forms of the operators' admin: a model endpoint (its URL checked as the system checks do),
an agent's config and its fallbacks (trusted endpoints only) and a prompt draft (placeholders the
agent can be given)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.db.models import Q

from agents.checks import base_url_problem
from agents.llm.schema import answer_token_bound
from agents.models import AgentConfig, AgentFallback, CoachingMove, ModelEndpoint, PromptVersion
from agents.operations.prompts import prompt_body_errors
from agents.roles.schemas import OUTPUT_SCHEMAS


class ModelEndpointForm(forms.ModelForm):
    # Checked here as the system checks do (base_url_problem), with a clearer message.
    base_url = forms.CharField(
        label="Base URL",
        max_length=300,
        help_text="OpenAI-compatible base URL, ending in /v1 (e.g. http://vllm:8000/v1).",
        widget=forms.TextInput(attrs={"class": "vURLField"}),
    )

    class Meta:
        model = ModelEndpoint
        fields = [
            "name",
            "kind",
            "base_url",
            "model_id",
            "api_key_env",
            "max_concurrency",
            "connect_timeout_s",
            "read_timeout_s",
            "trusted_for_coachee_data",
        ]

    def clean_base_url(self) -> str:
        url = str(self.cleaned_data["base_url"]).strip()
        problem = base_url_problem(url)
        if problem is not None:
            raise forms.ValidationError(f"This endpoint would have {problem}.")
        return url

    def clean_max_concurrency(self) -> int:
        value = int(self.cleaned_data["max_concurrency"])
        if value < 1:
            raise forms.ValidationError("At least 1.")
        return value

    def clean_connect_timeout_s(self) -> float:
        return _positive(self.cleaned_data["connect_timeout_s"])

    def clean_read_timeout_s(self) -> float:
        return _positive(self.cleaned_data["read_timeout_s"])


def _positive(value: float) -> float:
    if value is None or value <= 0:
        raise forms.ValidationError("Must be more than 0 seconds.")
    return float(value)


class AgentConfigForm(forms.ModelForm):
    class Meta:
        model = AgentConfig
        fields = ["agent", "endpoint", "temperature", "max_tokens", "context_budget", "thinking", "enabled"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Agents send coachees' conversations to their endpoint: operators choose among the
        # endpoints a platform administrator trusted (the current one stays choosable).
        field = self.fields.get("endpoint")
        if isinstance(field, forms.ModelChoiceField):
            current = self.instance.endpoint_id if self.instance.pk else None
            field.queryset = ModelEndpoint.objects.filter(Q(trusted_for_coachee_data=True) | Q(pk=current))
            field.help_text = "Only endpoints a platform administrator marked trusted for coachee data."

    def clean_temperature(self) -> float:
        value = float(self.cleaned_data["temperature"])
        if not 0.0 <= value <= 2.0:
            raise forms.ValidationError("Between 0 and 2.")
        return value

    def clean_max_tokens(self) -> int:
        value = int(self.cleaned_data["max_tokens"])
        if not 1 <= value <= 32768:
            raise forms.ValidationError("Between 1 and 32768.")
        return value

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        # The agent is read-only once the config exists: it is then not in the form's data.
        agent, max_tokens = cleaned.get("agent") or self.instance.agent, cleaned.get("max_tokens")
        schema = OUTPUT_SCHEMAS.get(agent or "")
        if schema is not None and max_tokens:
            # Below this a long but valid answer is cut off by the token limit and fails.
            needed = answer_token_bound(schema, move_keys=list(CoachingMove.objects.values_list("key", flat=True)))
            if max_tokens < needed:
                self.add_error(
                    "max_tokens",
                    f"This agent's answer format allows up to about {needed} tokens; "
                    f"below that a long answer is cut off and fails. Use at least {needed}.",
                )
        return cleaned

    def clean_context_budget(self) -> int:
        value = int(self.cleaned_data["context_budget"])
        if not 256 <= value <= 1_000_000:
            raise forms.ValidationError("Between 256 and 1000000 tokens.")
        return value


class AgentFallbackForm(forms.ModelForm):
    class Meta:
        model = AgentFallback
        fields = ["position", "endpoint"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The same rule as the primary: a fallback receives the same conversations.
        field = self.fields.get("endpoint")
        if isinstance(field, forms.ModelChoiceField):
            current = self.instance.endpoint_id if self.instance.pk else None
            field.queryset = ModelEndpoint.objects.filter(Q(trusted_for_coachee_data=True) | Q(pk=current))

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        endpoint = cleaned.get("endpoint")
        config = self.instance.config if self.instance.config_id else None
        if endpoint is not None and config is not None and endpoint.pk == config.endpoint_id:
            raise forms.ValidationError("The primary endpoint cannot also be a fallback.")
        return cleaned


class DraftForm(forms.Form):
    body = forms.CharField(
        strip=False,
        widget=forms.Textarea(attrs={"rows": 28, "class": "prompt-editor", "spellcheck": "false"}),
        help_text="Placeholders are written ${name}; write $$ for a dollar sign.",
    )

    def __init__(self, *args: Any, agent: str, base: PromptVersion | None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.agent = agent
        self.base = base

    def clean_body(self) -> str:
        body = str(self.cleaned_data["body"]).replace("\r\n", "\n")
        errors = prompt_body_errors(self.agent, body)
        if errors:
            raise forms.ValidationError(errors)
        if self.base is not None and body == self.base.body:
            raise forms.ValidationError(f"Nothing changed: this is the text of v{self.base.version}.")
        return body
