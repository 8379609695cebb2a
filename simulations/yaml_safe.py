"""Reading a YAML config defensively: bounded size, depth and alias expansion; no silent
last-key-wins; errors with file and line and at most a short excerpt of the input.

PyYAML's ``safe_load`` accepts an alias bomb (a few hundred bytes that expand to
gigabytes), recurses without bound on deep nesting (``RecursionError``), and keeps the
last of duplicate keys without a word. :func:`load_yaml` refuses all three with a
:class:`~onlineeval.errors.ConfigError` naming the file and line. It also reads YAML 1.1's
numbers where their value would surprise: ``010`` (octal 8 in YAML 1.1, 10 in YAML 1.2) and
``1:30`` (base 60: 90) are refused, ``1e-3`` (text in YAML 1.1) is a number.
"""

from __future__ import annotations

import re
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
_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"

#: YAML 1.1 numbers whose value a reader of YAML 1.2 (or of the config) takes otherwise: a leading 0 (010 is octal 8
#: in YAML 1.1, decimal 10 in YAML 1.2) and base 60 (1:30 is 90)
_AMBIGUOUS_NUMBER = re.compile(r"[-+]?0[0-9_]*[0-9][0-9_]*|[-+]?[0-9][0-9_]*(?::[0-9_]+)+(?:\.[0-9_]*)?")


def _ambiguous(text: str) -> str:
    """Why a plain scalar PyYAML (YAML 1.1) reads as a number is refused: its value differs between YAML 1.1 and
    YAML 1.2 (010 is 8 in YAML 1.1 and 10 in YAML 1.2; 1:30 is 90 in YAML 1.1 and the text '1:30' in YAML 1.2)."""
    quote = f"or quote it ('{text}') if text is meant"
    if ":" in text:
        return f"{text} is a base-60 number in YAML 1.1 (1:30 is 90); write the number in decimal, {quote}"
    sign, digits = text[0] if text[0] in "+-" else "", text.lstrip("+-").replace("_", "").lstrip("0") or "0"
    octal = f" ({int(sign + digits, 8)})" if set(digits) <= set("01234567") else ""
    return (f"{text}: a leading 0 makes it octal in YAML 1.1{octal} and decimal in YAML 1.2; write "
            f"{'-' if sign == '-' and digits != '0' else ''}{digits}{'' if sign else f' (or 0o{digits} for octal)'}, "
            f"{quote}")


class _Loader(yaml.SafeLoader):
    """SafeLoader with limits on depth and aliases, refusing duplicate keys."""

    def __init__(self, stream: str, source: str) -> None:
        super().__init__(stream)
        self._source = source
        self._depth = 0
        self._aliases = 0

    def _where(self, mark: Any) -> str:
        # a command-line option's text (--set key, --option ...) is named without a line
        return f"{self._source}:{mark.line + 1}" if mark is not None and not self._source.startswith("-") \
            else self._source

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


def _construct_int(loader: _Loader, node: yaml.ScalarNode) -> Any:
    text = loader.construct_scalar(node)
    if _AMBIGUOUS_NUMBER.fullmatch(text):
        raise ConfigError((), _ambiguous(text), loader._where(node.start_mark))
    if text.startswith("0o"):  # YAML 1.2's octal
        return int(text[2:].replace("_", ""), 8)
    return loader.construct_yaml_int(node)


def _construct_float(loader: _Loader, node: yaml.ScalarNode) -> Any:
    text = loader.construct_scalar(node)
    if _AMBIGUOUS_NUMBER.fullmatch(text):
        raise ConfigError((), _ambiguous(text), loader._where(node.start_mark))
    return loader.construct_yaml_float(node)


# YAML 1.1's numbers as PyYAML reads them (1_000 is 1000, 0x1f is 31), and three changes: the numbers YAML 1.2 writes
# that YAML 1.1 leaves as text are numbers (1e3 and 1.0e3, the text '1e3' in YAML 1.1: a config value written 1e6
# is a million; 0o17, YAML 1.2's octal), and the numbers whose value YAML 1.1 and YAML 1.2 read differently (010:
# 8 or 10; 1:30: 90 or text) are refused naming the line, not read as 8 and 90 without a word
_Loader.add_implicit_resolver(_FLOAT_TAG, re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+$"),
                              list("-+0123456789."))
_Loader.add_implicit_resolver(_INT_TAG, re.compile(r"^0o[0-7_]+$"), ["0"])
_Loader.add_constructor(_INT_TAG, _construct_int)
_Loader.add_constructor(_FLOAT_TAG, _construct_float)


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


def load_yaml_text(text: str, source: str, invalid_as_text: bool = False) -> Any:
    """Parse the YAML document ``text`` with the limits above; errors name ``source`` (a file
    with the line, or e.g. the command-line option the text came from). With ``invalid_as_text``
    text that is not valid YAML is returned as it is (an option's value such as ``[a``); the
    limits and the refused numbers (010, 1:30) still raise."""
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
        if invalid_as_text:
            return text
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
