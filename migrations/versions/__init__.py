"""Alembic revision scripts, oldest first by their ``down_revision`` chain."""
