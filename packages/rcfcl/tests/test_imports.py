import icml26_rcfcl

EXPECTED_ALL = ["__version__"]


def test_public_api_is_pinned():
    assert sorted(icml26_rcfcl.__all__) == sorted(EXPECTED_ALL)
    for name in EXPECTED_ALL:
        assert hasattr(icml26_rcfcl, name), name
