"""Weight compression of local models (the method table lives here once the compress package is merged)."""
