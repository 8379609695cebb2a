"""Reading and validating a config (:mod:`simulations.config`): a YAML file or a mapping into a
:class:`~simulations.config.Config`, with ``--set`` overrides and file paths relative to the
config file's folder."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from onlineeval.errors import ConfigError
from simulations.config.checks import _check_components
from simulations.config.keypaths import set_key_path
from simulations.config.messages import _first_error
from simulations.config.run import Config


#: keys of a click-model spec that name files
_MODEL_FILE_KEYS = ("fitted", "params_file")


def _resolve_paths(data: dict[str, Any], base: Path) -> None:
    """Make file paths in the config (collection files, fitted click-model parameters)
    relative to the config file's folder."""

    def fix(value: Any) -> Any:
        if isinstance(value, str) and not Path(value).is_absolute():
            return str(base / value)
        return value

    users = data.get("users")
    if isinstance(users, dict):
        specs = [users.get("click_model")] + [
            t.get("click_model") for t in users.get("types") or [] if isinstance(t, dict)
        ]
        for spec in specs:
            if isinstance(spec, dict):
                for key in _MODEL_FILE_KEYS:
                    if key in spec:
                        spec[key] = fix(spec[key])
    coll = data.get("collection")
    if not isinstance(coll, dict) or coll.get("type") != "trec":
        return
    for key in ("qrels", "frequencies"):
        if key in coll:
            coll[key] = fix(coll[key])
    if isinstance(coll.get("runs"), dict):
        coll["runs"] = {k: fix(v) for k, v in coll["runs"].items()}


def config_from_mapping(data: Mapping[str, Any], source: str | None = None) -> Config:
    """Validate a mapping into a :class:`Config`, including component specs and files.

    Raises
    ------
    ConfigError
        naming the key path of the first problem and what is allowed.
    """
    if not isinstance(data, Mapping):
        raise ConfigError((), f"the config must be a mapping of keys, got {type(data).__name__}", source)
    try:
        config = Config.model_validate(dict(data))
    except ValidationError as exc:
        raise _first_error(exc, source) from None
    _check_components(config, source)
    return config


def load_config(path: str | Path, overrides: Mapping[str, Any] | None = None) -> Config:
    """Read, parse and validate a YAML config file.

    Parameters
    ----------
    path:
        The YAML file. Relative collection paths are taken relative to its folder.
    overrides:
        Dotted keys to set after reading, e.g. ``{"replicates": 50, "traffic.days": 7}``.
    """
    path = Path(path)
    source = str(path)
    if not path.is_file():
        raise ConfigError((), "config file not found", source)
    from simulations.yaml_safe import load_yaml

    data = load_yaml(path)  # bounded size, depth and aliases; no duplicate keys; UTF-8 with file:line
    if data is None:
        raise ConfigError((), "the config file is empty", source)
    if not isinstance(data, dict):
        raise ConfigError((), f"the config must be a mapping of keys, got {type(data).__name__}", source)
    for dotted, value in (overrides or {}).items():
        set_key_path(data, dotted, value, source)
    _resolve_paths(data, path.resolve().parent)
    return config_from_mapping(data, source)
