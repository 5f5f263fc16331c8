from django.urls import path

from agents.chat.consumers import ChatConsumer

websocket_urlpatterns = [path("ws/sessions/<int:session_id>/", ChatConsumer.as_asgi())]
