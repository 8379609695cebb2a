"""Pydantic's validation errors as the tool's one-line config errors (:mod:`simulations.config`):
the key path, what the key must be in the tool's words (allowed values or keys, never a
pydantic class name), and the value given."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from onlineeval.errors import ConfigError
from simulations.config.run import Config
from simulations.config.sections import SyntheticCollection, TrecCollection
from simulations.yaml_safe import excerpt


def _allowed_keys(model: type[BaseModel], loc: Sequence[str | int]) -> list[str] | None:
    """The field names allowed at ``loc`` (the parent of an unknown key), if resolvable."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        fields = getattr(current, "model_fields", None)
        if fields is None:
            # a discriminated union tag (e.g. 'synthetic') appears in pydantic's loc
            return None
        if part not in fields:
            for candidate in (SyntheticCollection, TrecCollection):
                if part == candidate.model_fields["type"].default or (
                    part == "trec" and candidate is TrecCollection
                ):
                    current = candidate
                    break
            else:
                return None
            continue
        annotation = fields[part].annotation
        current = _model_in(annotation)
        if current is None:
            return None
    fields = getattr(current, "model_fields", None)
    return sorted(fields) if fields else None


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _strip_tags(loc: Sequence[str | int]) -> tuple[str | int, ...]:
    """Drop pydantic's union-member tags (``synthetic``, ``trec``) from an error location."""
    return tuple(p for p in loc if p not in ("synthetic", "trec") or p == loc[0])


def _first_error(exc: ValidationError, source: str | None) -> ConfigError:
    """The first of pydantic's errors as the tool's one-line message: the key path, then what the key must
    be, in lower case and the tool's words (its allowed values or keys, never a pydantic class name), then
    the value given (``traffic.days: must be at least 1, got 0``)."""
    import re

    from onlineeval.errors import must_be

    errors = exc.errors()
    err = errors[0]
    loc = tuple(err["loc"])
    path = _strip_tags(loc)
    kind = err["type"]
    ctx = err.get("ctx") or {}
    got = f", got {excerpt(err.get('input'))}"
    plain = must_be(kind, ctx, got)
    if kind == "extra_forbidden":
        allowed = _allowed_keys(Config, loc[:-1])
        hint = f"; allowed keys: {', '.join(allowed)}" if allowed else ""
        message = f"unknown key{hint}"
    elif kind == "missing":
        message = "required key is missing"
    elif plain is not None:  # a bound or a type
        message = plain
        value = err.get("input")
        if kind in ("int_type", "int_from_float") and isinstance(value, float) and value.is_integer() \
                and abs(value) < 1e18:  # 1e4 or 10000.0 for an integer key: say how to write it
            message += f" (write {int(value)}: an integer key takes a whole number without a point or exponent)"
    elif kind in ("literal_error", "enum") and "expected" in ctx:
        expected = str(ctx["expected"])
        one_of = "one of " if " or " in expected else ""
        message = f"must be {one_of}{expected}{got}"
    elif kind in ("dict_type", "model_type", "model_attributes_type"):
        # model_attributes_type: a union of mappings told apart by their 'type' (the collection), no one key list
        allowed = _allowed_keys(Config, loc) if kind != "model_attributes_type" else None
        keys = f" (keys: {', '.join(allowed)})" if allowed else ""
        message = f"must be a mapping of keys{keys}{got}"
    elif kind == "union_tag_invalid":
        tag = str(ctx.get("discriminator", "type")).strip("'\"")
        path = (*path, tag)
        message = f"must be one of {ctx.get('expected_tags', '')}, got {excerpt(ctx.get('tag'))}"
    elif kind == "union_tag_not_found":
        tag = str(ctx.get("discriminator", "type")).strip("'\"")
        path = (*path, tag)
        message = "required key is missing"
    elif kind == "value_error":
        message = str(err["msg"]).removeprefix("Value error, ")[:300]
    else:  # pydantic's sentence in the tool's words: "input should be" -> "must be", no class names
        text = re.sub(r"^Input should be\b", "must be", str(err["msg"]).strip().rstrip("."))
        text = re.sub(r" (?:or )?(?:an )?instance of \w+", "", text)
        text = re.sub(r" for <class '[\w.]+'>", "", text)
        message = f"{text[:1].lower()}{text[1:]}{got}"
    more = len(errors) - 1
    if more:
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    return ConfigError(path, message, source)
