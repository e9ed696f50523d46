"""The embedded default on this machine, and what the tests and benchmarks run against: nothing
in the product (the program, config, components, policies, gate, review) imports it.

Its rooms, each a package saying what it stands in for or builds:
- hosts/: the local systemd hosts (Debian booted with systemd-nspawn) and what they are made of;
- kube/: the local Kubernetes cluster: its build from Go modules, control plane and real node;
- images/: the OCI images the node runs, built here (nothing can be pulled);
- standins/: stand-ins for what nobody can reach from here (the frontier API, vLLM's upstream
  for gateway tests, a model that answers as scripted);
- servers/: real servers started for a test or a benchmark (PostgreSQL, S3Proxy, LiteLLM);
- bench/: the benchmarks behind scripts/bench-*.
Beside them: engine.py (the Pulumi engine on a throwaway project copy), local_stack.py (the
embedded default's up and report), progress.py and report.py (how long runs talk), prefetch.py
(what the tests install on first use, made ahead by scripts/test).
"""
