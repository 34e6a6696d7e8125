"""The web console: static files served by the app, over its public API (``docs/console.md``)."""
