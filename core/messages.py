"""Conversation content in Strata's own types, shaped like the Anthropic Messages API so that a request is
valid by construction. Wire types of the SDK stop at the model adapter."""


from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

Role = Literal["user", "assistant"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class TextBlock(_Frozen):
    type: Literal["text"] = "text"
    text: str


class ToolUseBlock(_Frozen):
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any]


class ToolResultBlock(_Frozen):
    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str
    is_error: bool = False


ContentBlock = Annotated[TextBlock | ToolUseBlock | ToolResultBlock, Field(discriminator="type")]


class Message(_Frozen):
    role: Role
    content: tuple[ContentBlock, ...]

    def to_api(self) -> dict[str, Any]:
        return {"role": self.role, "content": [b.model_dump(mode="json") for b in self.content]}


MessageAdapter: TypeAdapter[Message] = TypeAdapter(Message)


_set = object.__setattr__
BLOCK_CLASSES = frozenset({TextBlock, ToolUseBlock, ToolResultBlock})
"""The block classes a validated block is exactly one of (validation keeps such a block as it is)."""
_MESSAGE_GIVEN = frozenset({"role", "content"})
_RESULT_GIVEN = frozenset({"tool_use_id", "content", "is_error"})


def message_of(role: Role, content: tuple[ContentBlock, ...]) -> Message:
    """`Message(role=role, content=content)`, built as validating these values builds it (the same `__dict__`, the
    same blocks, fields set, no extra, no private values) without the validation where `role` is one of its words
    and `content` a tuple of blocks of exactly the block classes (validation keeps such a block as it is); anything
    else is validated, as always. The fold makes two a model turn. tests/core/test_fast_models.py holds the two
    equal."""
    if (role == "assistant" or role == "user") and type(role) is str and type(content) is tuple \
            and all(type(b) in BLOCK_CLASSES for b in content):
        built = Message.__new__(Message)
        _set(built, "__dict__", {"role": role, "content": content})
        _set(built, "__pydantic_fields_set__", set(_MESSAGE_GIVEN))
        _set(built, "__pydantic_extra__", None)
        _set(built, "__pydantic_private__", None)
        return built
    return Message(role=role, content=content)


def tool_result_of(tool_use_id: str, content: str, is_error: bool) -> ToolResultBlock:
    """`ToolResultBlock(tool_use_id=..., content=..., is_error=...)`, built as validating them builds it, without
    the validation where each is exactly of its field's type; anything else is validated, as always."""
    if type(tool_use_id) is str and type(content) is str and type(is_error) is bool:
        built = ToolResultBlock.__new__(ToolResultBlock)
        _set(built, "__dict__", {"type": "tool_result", "tool_use_id": tool_use_id, "content": content,
                                 "is_error": is_error})
        _set(built, "__pydantic_fields_set__", set(_RESULT_GIVEN))
        _set(built, "__pydantic_extra__", None)
        _set(built, "__pydantic_private__", None)
        return built
    return ToolResultBlock(tool_use_id=tool_use_id, content=content, is_error=is_error)
