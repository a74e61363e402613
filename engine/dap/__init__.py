"""A Debug Adapter Protocol server (``iree-lens dap``): VS Code, or any DAP client, debugs a ``.vmfb``."""
