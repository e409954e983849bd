"""Integrations with web frameworks that need more than URL patterns (``tickq.contrib.django``)."""
