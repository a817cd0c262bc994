"""Shared test set-up: tests run on the real corpora in ../shared/data (read-only)."""

from __future__ import annotations

import os

import pytest

# Offline everywhere: a test that tried to reach a model hub must fail, not download.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@pytest.fixture(scope="session")
def data_root():
    from polylogue.paths import data_root as find

    return find()
