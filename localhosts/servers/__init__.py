"""Real servers this machine starts for a test or a benchmark, each on a port of its own:
PostgreSQL, S3Proxy (the shared-state tests' bucket), LiteLLM proxies with and without
spear-fleet's hooks, and the process helpers they share."""
