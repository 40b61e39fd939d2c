"""The orders API's routes (see `views` for what each answers).

Ids are matched as any path segment, not `<int:>`, so a malformed id gets the
API's JSON 404 rather than the site's HTML one, and any other path below
`/orders/` (more segments, an encoded `..%2f..`) reaches `nowhere`, the same
JSON 404. Each route also answers with a
trailing slash, and the collection without one, so a client's habit reaches
the view instead of the site's HTML 404 (or, for a POST under DEBUG, Django's
APPEND_SLASH error page).
"""

from django.urls import path, re_path

from acmeproxy.orders import views

app_name = "orders"

urlpatterns = [
    path("", views.create, name="create"),
    path("<str:order_id>", views.detail, name="detail"),
    path("<str:order_id>/", views.detail),
    path("<str:order_id>/finalize", views.finalize, name="finalize"),
    path("<str:order_id>/finalize/", views.finalize),
    re_path(r"^(?P<rest>.*)$", views.nowhere),
]
