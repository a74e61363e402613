"""Inputs the coverage-guided campaign found that escaped the readers' typed errors (now fixed)."""

from __future__ import annotations

import pytest

from engine.dispatch.bundle import Bundle, BundleError
from engine.session.persist import SessionStore


@pytest.mark.parametrize("text", ["[1, 2]", "3", '"text"', "null"])
def test_a_session_file_that_is_not_an_object_reads_as_no_session(tmp_path, text):
    (tmp_path / "session.json").write_text(text)
    store = SessionStore(tmp_path)
    assert store.load() == type(store.session)()


@pytest.mark.parametrize("text", ["[]", "7", '"manifest"'])
def test_a_manifest_that_is_not_an_object_is_a_bundle_error(tmp_path, text):
    (tmp_path / "manifest.json").write_text(text)
    with pytest.raises(BundleError, match="not a valid manifest"):
        Bundle(tmp_path)
