"""URL routes: the admin, where operators browse and act on jobs."""

from django.contrib import admin
from django.urls import path

urlpatterns = [
    path("admin/", admin.site.urls),
]
