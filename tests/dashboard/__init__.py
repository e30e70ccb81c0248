"""The admin dashboard (identity_hosting/dashboard/), in a real browser."""
