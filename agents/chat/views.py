"""The coachee's pages. The chat itself runs over the WebSocket (consumers.py)."""

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages as flash
from django.contrib.auth import login, logout
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.views import LoginView, PasswordChangeView
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.views.decorators.http import require_POST

from agents import privacy, rendering, selectors
from agents.chat import throttle
from agents.memory import blackboard, edits
from agents.models import Role
from agents.turns import event_log, feedback, sessions


def _user_id(request: HttpRequest) -> int:
    user_id = request.user.pk
    if user_id is None:  # login_required guarantees a user; this keeps the type honest
        raise PermissionDenied
    return int(user_id)


def _throttled(request: HttpRequest, template: str, form: Any, window_s: int) -> HttpResponse:
    minutes = max(1, throttle.retry_after_s(window_s) // 60)
    message = f"Too many attempts from your address. Try again in about {minutes} minutes."
    response = render(request, template, {"form": form, "throttled": message}, status=429)
    response["Retry-After"] = str(throttle.retry_after_s(window_s))
    return response


def _locale(request: HttpRequest) -> str:
    """The account's language, else the browser's (the crisis card and reply follow it)."""
    return sessions.preferred_locale(
        user_id=_user_id(request), accept_language=request.headers.get("Accept-Language", "")
    )


def signup(request: HttpRequest) -> HttpResponse:
    form: UserCreationForm[Any] = UserCreationForm(request.POST or None)
    if request.method == "POST" and not throttle.signup_allowed(request):
        return _throttled(request, "registration/signup.html", UserCreationForm(), settings.COACHING_SIGNUP_WINDOW_S)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect("chat-home")
    return render(request, "registration/signup.html", {"form": form})


class ThrottledLoginView(LoginView):
    """Django's login, refused for an address that failed too many logins across usernames."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if throttle.login_blocked(request):
            form = self.get_form_class()(request)
            return _throttled(request, str(self.template_name), form, settings.COACHING_LOGIN_ADDRESS_WINDOW_S)
        return super().post(request, *args, **kwargs)


class CoacheePasswordChangeView(PasswordChangeView):
    success_url = reverse_lazy("chat-home")

    def form_valid(self, form: Any) -> HttpResponse:
        response = super().form_valid(form)
        # Sockets opened with the old password close; this tab reconnects on its new session.
        event_log.user_sockets_close(user_id=_user_id(self.request))
        flash.success(self.request, "Your password was changed.")
        return response


@login_required
def chat_home(request: HttpRequest) -> HttpResponse:
    session = selectors.sessions_of(user_id=_user_id(request)).filter(status="open").first()
    if session is None:
        session = sessions.session_start(user_id=_user_id(request), locale=_locale(request))
    return redirect("chat-session", session_id=session.pk)


def _titled(rows: Any) -> list[tuple[Any, str]]:
    return [(s, sessions.session_title(s)) for s in rows]


@login_required
def session_list(request: HttpRequest) -> HttpResponse:
    """Every session by its title, and search across the coachee's own conversations."""
    user_id = _user_id(request)
    query = request.GET.get("q", "").strip()[:200]
    return render(
        request,
        "agents/sessions.html",
        {
            "sessions": _titled(selectors.session_overview(user_id=user_id)),
            "query": query,
            "hits": sessions.session_search(user_id=user_id, query=query) if query else None,
            "min_query": sessions.MIN_QUERY_CHARS,
        },
    )


class SessionTitleForm(forms.Form):
    title = forms.CharField(max_length=sessions.TITLE_CHARS, required=False, strip=True)


@login_required
@require_POST
def session_title(request: HttpRequest, session_id: int) -> HttpResponse:
    form = SessionTitleForm(request.POST)
    if form.is_valid():
        try:
            sessions.session_title_set(
                session_id=session_id, user_id=_user_id(request), title=form.cleaned_data["title"]
            )
        except PermissionDenied as exc:
            raise Http404("No such session") from exc
    else:
        flash.error(request, f"A title has at most {sessions.TITLE_CHARS} characters.")
    return redirect("chat-session", session_id=session_id)


@login_required
@require_POST
def session_new(request: HttpRequest) -> HttpResponse:
    session = sessions.session_start(user_id=_user_id(request), locale=_locale(request))
    return redirect("chat-session", session_id=session.pk)


@login_required
@require_POST
def session_end(request: HttpRequest, session_id: int) -> HttpResponse:
    try:
        sessions.session_end(session_id=session_id, user_id=_user_id(request))
    except PermissionDenied as exc:
        raise Http404("No such session") from exc
    return redirect("chat-session", session_id=session_id)


@login_required
def chat_session(request: HttpRequest, session_id: int) -> HttpResponse:
    try:
        session = sessions.session_for_user(session_id=session_id, user_id=_user_id(request))
    except PermissionDenied as exc:
        raise Http404("No such session") from exc
    # last_seq first: an event committed between the two reads is then replayed on connect
    # (the page drops what it already shows), instead of being missed.
    last_seq = selectors.last_seq(session_id=session.pk)
    transcript = selectors.transcript(session_id=session.pk)
    thumbs = selectors.feedback_of(session_id=session.pk)
    messages = [
        {
            "id": m.pk,
            "seq": m.seq,
            "role": m.role,
            "text": m.text,
            "status": m.status,
            "html": rendering.markdown_to_safe_html(m.text) if m.role == Role.SYNTH else "",
            "completes": getattr(getattr(m, "turn_as_synth", None), "coach_message_id", None),
            "created_at": m.created_at,
            "feedback": thumbs.get(m.pk),
        }
        for m in transcript
    ]
    return render(
        request,
        "agents/chat.html",
        {
            "session": session,
            "messages": messages,
            "last_seq": last_seq,
            "usual_turn_s": selectors.usual_turn_seconds(),
            "max_chars": settings.COACHING_MAX_MESSAGE_CHARS,
            "turn_deadline_s": int(settings.COACHING_TURN_DEADLINE_S),
            # The page queues what is sent while this turn runs, from its first moment.
            "running_turn_id": selectors.running_turn_id(session_id=session.pk),
            "sessions": _titled(selectors.session_overview(user_id=_user_id(request))[:20]),
            "title": sessions.session_title(session),
            "title_max": sessions.TITLE_CHARS,
        },
    )


class AnswerFeedbackForm(forms.Form):
    rating = forms.ChoiceField(choices=[("up", "Helpful"), ("down", "Not helpful"), ("none", "No rating")])
    comment = forms.CharField(max_length=feedback.COMMENT_CHARS, required=False, strip=True)


RATINGS = {"up": 1, "down": -1, "none": None}


@login_required
@require_POST
def answer_feedback(request: HttpRequest, message_id: int) -> JsonResponse:
    """Thumbs up or down on one full answer (the chat page posts it; JSON back)."""
    form = AnswerFeedbackForm(request.POST)
    if not form.is_valid():
        return JsonResponse({"error": "A rating is up, down or none."}, status=400)
    rating = RATINGS[form.cleaned_data["rating"]]
    try:
        feedback.answer_feedback_set(
            user_id=_user_id(request), message_id=message_id, rating=rating, comment=form.cleaned_data["comment"]
        )
    except PermissionDenied as exc:
        raise Http404("No such answer") from exc
    return JsonResponse({"rating": form.cleaned_data["rating"]})


class MemoryEditForm(forms.Form):
    item_id = forms.CharField(max_length=32)
    action = forms.ChoiceField(
        choices=[("correct", "Correct"), ("hide", "Hide"), ("show", "Show again"), ("delete", "Delete")]
    )
    text = forms.CharField(max_length=blackboard.MAX_TEXT, required=False, strip=True)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("action") == "correct" and not data.get("text"):
            raise forms.ValidationError("Write the corrected text.")
        return data


@login_required
def memory(request: HttpRequest) -> HttpResponse:
    """What the coach remembers about me: correct it, or hide it from every agent."""
    user_id = _user_id(request)
    form = MemoryEditForm(request.POST or None)
    if request.method == "POST":
        if form.is_valid():
            action = form.cleaned_data["action"]
            try:
                if action == "delete":
                    edits.blackboard_item_delete(coachee_id=user_id, item_id=form.cleaned_data["item_id"])
                else:
                    edits.blackboard_item_edit(
                        coachee_id=user_id,
                        item_id=form.cleaned_data["item_id"],
                        text=form.cleaned_data["text"] if action == "correct" else None,
                        hidden={"hide": True, "show": False}.get(action),
                    )
            except (KeyError, ValueError) as exc:
                flash.error(request, "That item cannot be changed." if isinstance(exc, KeyError) else str(exc))
            else:
                done = "Deleted, also from the coach's history." if action == "delete" else "Saved."
                flash.success(request, f"{done} The agents will see the change from your next message on.")
                return redirect("memory")
        else:
            flash.error(request, " ".join(str(e) for errors in form.errors.values() for e in errors))
    return render(request, "agents/memory.html", {"sections": edits.memory_sections(coachee_id=user_id)})


class AccountDeleteForm(forms.Form):
    password = forms.CharField(widget=forms.PasswordInput, label="Your password, to confirm")


class AccountLanguageForm(forms.Form):
    locale = forms.ChoiceField(
        label="Language of the coaching chat",
        choices=[("", "The browser's language"), *sessions.LANGUAGES.items()],
        required=False,
    )


@login_required
def account(request: HttpRequest) -> HttpResponse:
    """Choose the language; export everything, or delete the account and everything with it."""
    if request.method == "POST" and "locale" in request.POST:
        language = AccountLanguageForm(request.POST)
        if language.is_valid():
            sessions.account_locale_set(user_id=_user_id(request), locale=language.cleaned_data["locale"])
            flash.success(request, "Saved. New sessions use this language.")
            return redirect("account")
    else:
        current = sessions.preferred_locale(user_id=_user_id(request)) if request.user.is_authenticated else ""
        language = AccountLanguageForm(initial={"locale": current if current in sessions.LANGUAGES else ""})
    form = AccountDeleteForm(request.POST if "password" in request.POST else None)
    if request.method == "POST" and form.is_valid():
        if request.user.check_password(form.cleaned_data["password"]):
            user_id = _user_id(request)
            logout(request)
            privacy.account_delete(user_id=user_id)
            flash.success(request, "Your account and all its data were deleted.")
            return redirect("login")
        form.add_error("password", "That is not your password.")
    return render(request, "agents/account.html", {"form": form, "language": language})


@login_required
def account_export(request: HttpRequest) -> HttpResponse:
    response = JsonResponse(privacy.account_export(user_id=_user_id(request)), json_dumps_params={"indent": 2})
    response["Content-Disposition"] = 'attachment; filename="coaching-data.json"'
    return response


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})
