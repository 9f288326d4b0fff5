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
