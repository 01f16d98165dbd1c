"""`observability:` — Prometheus, Grafana, Alertmanager, SLO rules and dashboards."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from infra.config.base import StrictModel
from infra.domain import LONGEST_SLO_WINDOW_DAYS
from infra.durations import duration_days


def _covers_slo_windows(value: str) -> str:
    if duration_days(value) < LONGEST_SLO_WINDOW_DAYS:
        raise ValueError(
            f"{value!r} is below the minimum of {LONGEST_SLO_WINDOW_DAYS}d: the slowest SLO burn-rate alert "
            f"reads {LONGEST_SLO_WINDOW_DAYS} days of history; use e.g. 15d"
        )
    return value


Retention = Annotated[str, AfterValidator(_covers_slo_windows)]


class AlertReceiverConfig(StrictModel):
    """Where Alertmanager sends alerts."""

    kind: Literal["none", "slack", "webhook"] = Field("none", description="none, or slack/webhook with the alert_webhook_url secret.")
    channel: str | None = Field(None, description="Slack channel (kind: slack).")


class ObservabilityConfig(StrictModel):
    """Prometheus, Grafana, Alertmanager, SLO rules and dashboards."""

    enabled: bool | None = Field(None, description="Default: true in staging and prod, false in dev.")
    retention: Retention = Field(
        "15d", description=f"Prometheus retention, e.g. 15d; at least {LONGEST_SLO_WINDOW_DAYS}d (the longest SLO burn-rate window)."
    )
    storage_gib: int = Field(100, ge=10, le=16384, description="Prometheus volume size (do-block-storage).")
    alert_receiver: AlertReceiverConfig = Field(default_factory=AlertReceiverConfig, description="Alert destination.")
    runbook_url: str = Field(
        "docs/runbook.md",
        description="Base of the runbook links in alerts; set it to the runbook's web address, e.g. https://github.com/<org>/<repo>/blob/main/docs/runbook.md.",
    )


def observability_on(environment: str, observability: ObservabilityConfig) -> bool:
    """`enabled` as written, else the environment's default: on in staging and prod, off in dev."""
    return environment != "dev" if observability.enabled is None else bool(observability.enabled)

