"""The coachee's pages. The chat itself runs over the WebSocket (consumers.py)."""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from agents import rendering, selectors, services
from agents.models import Role


def _user_id(request: HttpRequest) -> int:
    user_id = request.user.pk
    if user_id is None:  # login_required guarantees a user; this keeps the type honest
        raise PermissionDenied
    return int(user_id)


@login_required
def chat_home(request: HttpRequest) -> HttpResponse:
    session = selectors.sessions_of(user_id=_user_id(request)).filter(status="open").first()
    if session is None:
        session = services.session_start(user_id=_user_id(request))
    return redirect("chat-session", session_id=session.pk)


@login_required
@require_POST
def session_new(request: HttpRequest) -> HttpResponse:
    session = services.session_start(user_id=_user_id(request))
    return redirect("chat-session", session_id=session.pk)


@login_required
def chat_session(request: HttpRequest, session_id: int) -> HttpResponse:
    try:
        session = services.session_for_user(session_id=session_id, user_id=_user_id(request))
    except PermissionDenied as exc:
        raise Http404("No such session") from exc
    messages = [
        {
            "id": m.pk,
            "seq": m.seq,
            "role": m.role,
            "text": m.text,
            "status": m.status,
            "html": rendering.markdown_to_safe_html(m.text) if m.role == Role.SYNTH else "",
        }
        for m in selectors.transcript(session_id=session.pk)
    ]
    return render(
        request,
        "agents/chat.html",
        {
            "session": session,
            "messages": messages,
            "last_seq": selectors.last_seq(session_id=session.pk),
            "sessions": selectors.sessions_of(user_id=_user_id(request))[:20],
        },
    )


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})
