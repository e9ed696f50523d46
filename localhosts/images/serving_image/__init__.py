"""The local stack's serving image, a stand-in for vllm/vllm-openai (see build.py), and the vllm
stand-in program it runs (vllm_standin.py, also installed on the RunPod test pods)."""

from localhosts.images.serving_image.build import REPOSITORY, TAG, Image, ensure_image

__all__ = ["REPOSITORY", "TAG", "Image", "ensure_image"]
