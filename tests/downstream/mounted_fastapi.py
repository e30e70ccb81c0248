"""What Hypercorn serves in the mount tests: `hypercorn tests.downstream.mounted_fastapi:app`, the todo app with the
identity service (configured from the environment) mounted at /auth."""

from __future__ import annotations

from asgi_app import IdentityASGI
from tests.downstream.mounted_apps import create_fastapi_app

app = create_fastapi_app(IdentityASGI.from_env())
