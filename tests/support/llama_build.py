"""The local stack's llama-server on this machine, for tests: built by localhosts/hosts/llama_build.py
(product code, which the serving image uses too)."""

from localhosts.hosts.llama_build import local_stack_llama_server

__all__ = ["local_stack_llama_server"]
