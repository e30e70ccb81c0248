"""Endpoint flows, one module per resource. Each flow takes a `RequestContext` and returns a `Response`."""
