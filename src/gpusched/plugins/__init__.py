"""Built-in plugins: the policies (filters, scores, GPU pickers, queue order)."""

from gpusched.plugins.registry import PLUGINS, create_plugin

__all__ = ["PLUGINS", "create_plugin"]
