"""The Celery application. Configuration lives in Django settings under CELERY_*."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "coaching_site.settings")

app = Celery("coaching_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
