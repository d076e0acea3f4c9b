"""The dashboard's panels, one module each: what a panel draws from the
:class:`dashboard.data.DashboardData` caches, and ``register(app, data)``, which adds its Dash
callbacks (their Input and Output ids are those of :mod:`dashboard.layout`)."""
