"""The test app's URLs: the project's, and a view that enqueues a task."""

from __future__ import annotations

from django.urls import path

from acmeproxy.urls import urlpatterns as project_urls
from tests.jobapp import views

urlpatterns = [*project_urls, path("test/report", views.report)]
