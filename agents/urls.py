from django.urls import path

from agents.chat import views

urlpatterns = [
    path("", views.chat_home, name="chat-home"),
    path("accounts/signup/", views.signup, name="signup"),
    path("accounts/password_change/", views.CoacheePasswordChangeView.as_view(), name="password_change"),
    path("sessions/", views.session_list, name="session-list"),
    path("sessions/new/", views.session_new, name="session-new"),
    path("sessions/<int:session_id>/", views.chat_session, name="chat-session"),
    path("sessions/<int:session_id>/end/", views.session_end, name="session-end"),
    path("sessions/<int:session_id>/title/", views.session_title, name="session-title"),
    path("answers/<int:message_id>/feedback/", views.answer_feedback, name="answer-feedback"),
    path("memory/", views.memory, name="memory"),
    path("account/", views.account, name="account"),
    path("account/export/", views.account_export, name="account-export"),
    path("healthz", views.healthz, name="healthz"),
]
