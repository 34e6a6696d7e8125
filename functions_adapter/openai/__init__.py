"""openai: see docs/architecture.md."""
