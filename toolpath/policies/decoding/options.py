"""What the decoding kinds' Options share: the same strictness, a bounded text option, and an error raised from a
cross-field rule that still names its field (`decoding.parts: ...`), as a field's own error does."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, ConfigDict, Field, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

# Options are read from a spec or a JSON --decoding as they are written: a number is a number (never "0.5" or
# true), an integer an integer, and nan/inf are no setting of any of them.
STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("expected a non-empty string")
    return value


Text = Annotated[str, Field(min_length=1, max_length=4096), AfterValidator(_not_blank)]


def field_error(model: str, field: str, message: str, value: Any) -> ValidationError:
    """An error of a model validator located at `field`: a ValidationError raised inside a validator keeps its
    location, where a ValueError would be reported against the whole setting."""
    return ValidationError.from_exception_data(model, [InitErrorDetails(
        type=PydanticCustomError("decoding_option", "{message}", {"message": message}), loc=(field,), input=value)])
