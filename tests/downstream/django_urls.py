"""The URLs of the Django project in `mounted_apps.create_django_app`: its own home page."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import path


def home(request: HttpRequest) -> HttpResponse:
    """The project's own page, beside the service mounted at /auth."""
    return HttpResponse("the blog", content_type="text/plain")


urlpatterns = [path("", home)]
