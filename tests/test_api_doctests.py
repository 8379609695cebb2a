"""The docstring examples of :mod:`onlineeval.api` run as doctests (they are the API's documentation)."""

from __future__ import annotations

import doctest

import onlineeval.api


def test_api_docstring_examples_run() -> None:
    result = doctest.testmod(onlineeval.api, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 10, "the API's docstrings lost their examples"
    assert result.failed == 0
