"""A Flask app embedding the identity service (configured from the environment) at /auth, as its module scope
builds it: `flask --app tests.downstream.mounted_flask run`, or any WSGI server importing `app`."""

from __future__ import annotations

from identity_hosting.wsgi import IdentityWSGI
from tests.downstream.mounted_apps import create_flask_app

app = create_flask_app(IdentityWSGI.from_env())
