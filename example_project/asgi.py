"""ASGI entry point for the example project: serve it with any ASGI server, e.g.

    uvicorn example_project.asgi:application --port 8000
    curl -X POST -d shop=acme http://127.0.0.1:8000/shop/orders/42/paid

``POST /shop/orders/<id>/paid`` is an ``async def`` view (``shop/views.py``) that enqueues with
``await send_receipt.aenqueue(...)``; run ``python manage.py jobs_worker`` beside the server to
work the jobs it writes.
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")

application = get_asgi_application()
