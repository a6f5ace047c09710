"""The one error a user's mistake raises, kept apart so that any module may raise it without importing the spec."""

from __future__ import annotations


class SpecError(ValueError):
    """A topology description that cannot run; the message is one line meant for the user."""


class RunFailed(RuntimeError):
    """A run that started could not finish (an actor died and did not come back); one line saying which and when."""
