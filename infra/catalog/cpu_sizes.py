"""Monthly list prices of the CPU Droplet sizes commonly used for the DOKS system pool.

Source: digitalocean.com/pricing/droplets (Basic and General Purpose, regular CPUs). A size not
listed here is still accepted; its cost is reported as unknown rather than guessed. The date these
were taken was not recorded (CPU_PRICES_AS_OF is None), and `infra catalog sync` covers GPU sizes
only; plan cost lines say so.
"""

CPU_PRICES_AS_OF: str | None = None
CPU_PRICES_SOURCE = "digitalocean.com/pricing/droplets (date not recorded)"

CPU_USD_PER_MONTH: dict[str, float] = {
    "s-2vcpu-4gb": 24.0,
    "s-4vcpu-8gb": 48.0,
    "s-8vcpu-16gb": 96.0,
    "g-2vcpu-8gb": 63.0,
    "g-4vcpu-16gb": 126.0,
    "g-8vcpu-32gb": 252.0,
}

# DOKS high-availability control plane, per cluster-month (docs.digitalocean.com kubernetes pricing).
HA_CONTROL_PLANE_USD_PER_MONTH = 40.0
