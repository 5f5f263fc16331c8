from django.urls import path

from agents import views

urlpatterns = [
    path("", views.chat_home, name="chat-home"),
    path("sessions/new/", views.session_new, name="session-new"),
    path("sessions/<int:session_id>/", views.chat_session, name="chat-session"),
    path("healthz", views.healthz, name="healthz"),
]
