"""ctxproxy: an OpenAI-compatible reverse proxy that repairs, tracks and prunes agent context."""

__version__ = "0.1.0"
