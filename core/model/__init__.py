"""The one model path: adapter protocol and typed request/response. Adapters map wire shapes into these."""

from core.model.base import ModelAdapter, ModelRequest, ModelResponse, Usage

__all__ = ["ModelAdapter", "ModelRequest", "ModelResponse", "Usage"]
