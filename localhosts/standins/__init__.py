"""Stand-ins for what nobody can reach from here, each named for what it replaces: the frontier
provider's API (the hatch), an OpenAI-compatible engine for the gateway's tests and benchmarks,
and tiny real GGUF models whose answers are scripted (no GPU, no real model)."""
