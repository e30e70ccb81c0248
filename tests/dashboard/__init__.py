"""The admin dashboard (dashboard/), in a real browser."""
