"""koord-manager's admission webhooks: the extension point (``admission``), the HTTPS server, the
certificates and the controller that keeps them and the webhook configurations right."""
