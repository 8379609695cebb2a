"""Reading a YAML config defensively: bounded size, depth and alias expansion; no silent
last-key-wins; errors with file and line and at most a short excerpt of the input.

PyYAML's ``safe_load`` accepts an alias bomb (a few hundred bytes that expand to
gigabytes), recurses without bound on deep nesting (``RecursionError``), and keeps the
last of duplicate keys without a word. :func:`load_yaml` refuses all three with a
:class:`~onlineeval.errors.ConfigError` naming the file and line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from onlineeval.errors import ConfigError

__all__ = ["load_yaml", "load_yaml_text", "excerpt", "MAX_BYTES", "MAX_DEPTH", "MAX_ALIASES"]

#: a config larger than this is not a config
MAX_BYTES = 1 << 20
#: deepest nesting of mappings and lists
MAX_DEPTH = 64
#: alias uses (``*name``) in one document
MAX_ALIASES = 100
#: values in the document once every alias is expanded (an alias bomb expands to billions)
MAX_NODES = 200_000


def excerpt(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters (messages never echo large inputs)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _count_nodes(node: yaml.Node, budget: int) -> int:
    """Nodes under ``node`` with every alias expanded (a shared node counts each time it is
    used); stops counting past ``budget``; iterative, no recursion."""
    count = 0
    stack = [node]
    while stack and count <= budget:
        current = stack.pop()
        count += 1
        if isinstance(current, yaml.SequenceNode):
            stack.extend(current.value)
        elif isinstance(current, yaml.MappingNode):
            for k, v in current.value:
                stack.extend((k, v))
    return count


_NULL_TAG = "tag:yaml.org,2002:null"
_STR_TAG = "tag:yaml.org,2002:str"


class _Loader(yaml.SafeLoader):
    """SafeLoader with limits on depth and aliases, refusing duplicate keys."""

    def __init__(self, stream: str, source: str) -> None:
        super().__init__(stream)
        self._source = source
        self._depth = 0
        self._aliases = 0

    def _where(self, mark: Any) -> str:
        return f"{self._source}:{mark.line + 1}" if mark is not None else self._source

    def compose_node(self, parent: Any, index: Any) -> Any:  # noqa: D102 - PyYAML hook
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise ConfigError((), f"more than {MAX_ALIASES} YAML aliases; refused (alias expansion is bounded)",
                                  self._where(event.start_mark))
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                event = self.peek_event()
                raise ConfigError((), f"nested more than {MAX_DEPTH} levels deep; refused",
                                  self._where(event.start_mark))
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag == _NULL_TAG and key_node.style is None \
                    and key_node.value in ("null", "Null", "NULL"):
                # the key written null (analysis.null, as the README names it) is the string, not YAML's null:
                # read as None it failed with "analysis.None: keys should be strings"
                key_node.tag = _STR_TAG
            key = self.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                raise ConfigError((), "a mapping key must be a plain value", self._where(key_node.start_mark)) from None
            if key in seen:
                raise ConfigError(
                    (), f"duplicate key {excerpt(key)} (first on line {seen[key]}); each key may appear once",
                    self._where(key_node.start_mark),
                )
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def load_yaml(path: str | Path) -> Any:
    """Parse the YAML file ``path`` with the limits above.

    Raises
    ------
    ConfigError
        Not UTF-8 (with the line of the first bad byte), too large, too deep, too many or
        too large aliases, duplicate keys, or not valid YAML (with the line).
    """
    path = Path(path)
    source = str(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ConfigError((), f"cannot read the config: {exc.strerror or exc}", source) from None
    if size > MAX_BYTES:
        raise ConfigError((), f"the config is {size:,} bytes; a config is at most {MAX_BYTES:,} bytes", source)
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError((), f"not UTF-8 text (byte 0x{raw[exc.start]:02x})", f"{source}:{line}") from None
    return load_yaml_text(text, source)


def load_yaml_text(text: str, source: str) -> Any:
    """Parse the YAML document ``text`` with the limits above; errors name ``source`` (a file
    with the line, or e.g. the command-line option the text came from)."""
    if len(text.encode("utf-8")) > MAX_BYTES:
        raise ConfigError((), f"the YAML text is more than {MAX_BYTES:,} bytes; refused", source)
    text = text.removeprefix("\ufeff")
    loader = None
    try:
        loader = _Loader(text, source)  # the reader refuses control characters here
        node = loader.get_single_node()
        if node is None:
            return None
        if _count_nodes(node, MAX_NODES) > MAX_NODES:
            raise ConfigError((), f"the config expands to more than {MAX_NODES:,} values once its YAML aliases "
                              "are expanded; refused (alias bomb?)", source)
        return loader.construct_document(node)
    except ConfigError:
        raise
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        if mark is None and isinstance(exc, yaml.reader.ReaderError):
            line = text[: exc.position].count("\n") + 1
            where = f"{source}:{line}"
            problem = f"control character {exc.character!r} is not allowed"
        else:
            where = f"{source}:{mark.line + 1}" if mark is not None else source
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError((), f"not valid YAML: {excerpt(problem, 160)[1:-1]}", where) from None
    except RecursionError:
        raise ConfigError((), "nested too deeply; refused", source) from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits (Python's limit on reading one)
        from onlineeval.io.logged_json import json_value_error

        raise ConfigError((), f"not valid YAML: {json_value_error(exc)}", source) from None
    finally:
        if loader is not None:
            loader.dispose()
