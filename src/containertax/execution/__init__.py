"""Running cells on the host: environments, gates, telemetry, records."""
