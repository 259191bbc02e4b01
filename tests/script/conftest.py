"""Fixtures of the script tests."""

import pytest

from script_helpers import TIERS, need_tier


@pytest.fixture(params=TIERS)
def tier(request):
    need_tier(request.param)
    return request.param
