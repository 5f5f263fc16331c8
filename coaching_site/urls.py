from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from agents.chat.views import ThrottledLoginView
from agents.observability.views import metrics_view

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", ThrottledLoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # Prometheus's scrape path: a bearer token or a signed-in operator (agents/observability/views.py).
    path("metrics", metrics_view, name="metrics"),
    path("", include("agents.urls")),
]
