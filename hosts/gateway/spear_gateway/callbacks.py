"""What config.yaml names: `callbacks: ["spear_gateway.callbacks.proxy_handler_instance"]`.

LiteLLM 1.91.1 loads a callback module from its file next to config.yaml
(proxy/types_utils/utils.py get_instance_fn: spec_from_file_location, never entered in
sys.modules), so that copy can hold no state or classes of its own: it re-exports the one
instance from the package as imported normally (from the venv's path), the same object
whichever way LiteLLM loads this file (1.108.7 imports it by name when no file is there).
"""

from spear_gateway.litellm_hooks import proxy_handler_instance

__all__ = ["proxy_handler_instance"]
