"""The support matrix (infra/catalog/support_matrix.yaml) and `unsupported_pins`."""

from __future__ import annotations

import pytest

from infra import compat
from infra.catalog import versions
from infra.compat import SupportEntry, load_matrix, parse_matrix, parse_minor, unsupported_pins


def test_every_matrix_version_is_the_pinned_one():
    """Bumping a pin in versions.py without re-reading its upstream range fails here."""
    for entry in load_matrix():
        assert getattr(versions, entry.constant) == entry.version, (
            f"{entry.pin}: support_matrix.yaml covers {entry.version}, versions.{entry.constant} is "
            f"{getattr(versions, entry.constant)!r}; re-check the upstream range and update both"
        )


def test_every_in_cluster_pin_has_a_matrix_entry():
    covered = {entry.constant for entry in load_matrix()}
    expected = {
        "KEDA_CHART_VERSION",
        "KUBE_PROMETHEUS_STACK_CHART_VERSION",
        "AMD_GPU_OPERATOR_CHART_VERSION",
        "CERT_MANAGER_CHART_VERSION",
        "ROCM_DEVICE_PLUGIN_IMAGE",
        "ROCM_NODE_LABELLER_IMAGE",
        "ROUTER_BASE_IMAGE",
        "VLLM_IMAGE_ROCM",
        "VLLM_IMAGE_CUDA",
    }
    assert expected <= covered


def test_every_entry_names_its_source():
    for entry in load_matrix():
        assert entry.basis in ("tested", "declared", "stated", "none")
        assert len(entry.source) > 20 and ("@" in entry.source or "image" in entry.source)


def test_the_committed_stacks_minor_is_supported_by_every_pin():
    """DOKS clusters run 1.33: KEDA 2.17 (tested on 1.30-1.32) was the gap."""
    assert unsupported_pins("1.33") == []


def test_keda_218_covers_131_to_133():
    keda = next(e for e in load_matrix() if e.pin == "keda")
    assert keda.version.startswith("2.18.") and keda.supported == "1.31–1.33"
    assert [p.pin for p in unsupported_pins("1.34")] == ["keda"]
    assert [p.pin for p in unsupported_pins("1.30")] == ["keda", "cert-manager"]


def test_result_unpacks_as_pin_range_source():
    ((pin, supported, source),) = unsupported_pins("1.34", pins=["keda"])
    assert pin == "keda" and supported == "1.31–1.33" and "keda-docs" in source


def test_doks_slugs_and_patches_are_read_as_their_minor():
    assert parse_minor("1.33.1-do.5") == (1, 33) == parse_minor("1.33") == parse_minor("v1.33.2")
    assert unsupported_pins("1.34.1-do.0") == unsupported_pins("1.34")
    with pytest.raises(ValueError, match="not a Kubernetes version"):
        unsupported_pins("latest")


def test_open_bounds_and_the_pins_filter():
    entries = (
        SupportEntry("a", "", "A", "1", (1, 25), None, "declared", "x@1"),
        SupportEntry("b", "", "B", "1", None, None, "none", "y@1"),
        SupportEntry("c", "", "C", "1", (1, 29), (1, 34), "tested", "z@1"),
    )
    assert [p.pin for p in unsupported_pins("1.24", entries)] == ["a", "c"]
    assert [p.pin for p in unsupported_pins("1.24", entries, pins=["c"])] == ["c"]
    assert unsupported_pins("1.99", entries) == [("c", "1.29–1.34", "z@1")]
    assert [e.supported for e in entries] == ["≥ 1.25", "any", "1.29–1.34"]


def test_a_broken_matrix_is_refused():
    good = {"pin": "k", "constant": "K", "version": "1", "kubernetes": {"min": "1.2", "max": None},
            "basis": "tested", "source": "s@1"}
    assert parse_matrix({"format": 1, "pins": [good]})[0].min_minor == (1, 2)
    for bad in (
        {"format": 2, "pins": [good]},
        {"format": 1, "pins": [{**good, "source": ""}]},
        {"format": 1, "pins": [{**good, "kubernetes": {"min": "one"}}]},
        {"format": 1, "pins": [{**good, "kubernetes": {"min": "1.30", "max": "1.29"}}]},
        {"format": 1, "pins": [good, good]},
    ):
        with pytest.raises(ValueError):
            parse_matrix(bad)


def test_matrix_ships_with_the_package():
    assert compat.MATRIX_PATH.name == "support_matrix.yaml" and compat.MATRIX_PATH.is_file()


def test_doctor_warns_when_a_pin_does_not_support_the_cluster_minor():
    from infra.preflight import check_pinned_versions

    assert check_pinned_versions("1.33.1-do.5").status == "pass"
    ahead = check_pinned_versions("1.34")
    assert ahead.status == "warn" and "keda supports 1.31–1.33" in ahead.detail
    assert "support_matrix.yaml" in ahead.fix
    assert check_pinned_versions("latest").status == "warn"
