"""The local "real systemd hosts" that stand in for inference and gateway hosts: Debian bookworm
root filesystems booted with systemd-nspawn, each in a cgroup of its own, reachable by SSH; and
what goes onto them from here (llama.cpp's pinned source, the local stack's llama-server, a
wheelhouse for hosts without a package index)."""
