"""The images the local node runs, built on this machine as one-layer OCI archives (nothing can
be pulled here): the serving image that stands in for vllm/vllm-openai, the gateway's, the agent
seat's (with the real harnesses), the node guard's and the bundled Prometheus's."""
