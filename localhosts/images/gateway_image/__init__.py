"""The gateway's image for the local cluster: LiteLLM's proxy with its offline Prisma engine, and
what its migrations Job runs (see build.py)."""

from localhosts.images.gateway_image.build import REPOSITORY, VERSION, Image, ensure_image

__all__ = ["REPOSITORY", "VERSION", "Image", "ensure_image"]
