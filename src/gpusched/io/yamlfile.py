"""YAML loading that remembers line numbers, and pydantic errors turned into file:line messages.

Every mapping loaded through :func:`load_yaml` carries its starting line under the key
:data:`LINE_KEY`; :func:`validate` strips those keys, validates with a pydantic model, and turns
the first validation error into a :class:`~gpusched.errors.TraceError` naming file, line and
field (``jobs[3].task.gpus``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from gpusched.errors import TraceError

__all__ = ["LINE_KEY", "entry_line", "load_yaml", "validate"]

LINE_KEY = "__line__"
KEY_LINES = "__key_lines__"
M = TypeVar("M", bound=BaseModel)


class _LineLoader(yaml.SafeLoader):
    pass


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    mapping = loader.construct_mapping(node, deep=True)
    mapping[LINE_KEY] = node.start_mark.line + 1
    mapping[KEY_LINES] = {
        k.value: k.start_mark.line + 1 for k, _ in node.value if isinstance(k, yaml.ScalarNode)
    }
    return mapping


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_yaml(path: str | Path) -> Any:
    """Parse ``path``; syntax errors become :class:`TraceError` with the line."""
    p = Path(path)
    if not p.is_file():
        raise TraceError(str(p), None, None, "file not found")
    try:
        with p.open(encoding="utf-8") as fh:
            return yaml.load(fh, Loader=_LineLoader)
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else None
        raise TraceError(str(p), line, None, f"invalid YAML: {exc.problem}") from None


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in (LINE_KEY, KEY_LINES)}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _line_of(data: Any, loc: tuple[int | str, ...]) -> int | None:
    line = data.get(LINE_KEY) if isinstance(data, dict) else None
    node = data
    for part in loc:
        if isinstance(node, dict) and isinstance(node.get(KEY_LINES), dict):
            line = node[KEY_LINES].get(part, line)
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            break
        if isinstance(node, dict) and LINE_KEY in node:
            line = node[LINE_KEY]
    return line if isinstance(line, int) else None


def _field(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def validate(model: type[M], data: Any, path: str | Path) -> M:
    """Validate ``data`` (from :func:`load_yaml`) as ``model``; errors name file, line, field."""
    try:
        return model.model_validate(_strip(data))
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        got = err.get("input")
        got_text = "" if isinstance(got, dict | list) or got is None else f"got {got!r}; "
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise TraceError(
            str(path), _line_of(data, loc), _field(loc) or None, f"{got_text}{msg}"
        ) from None


def entry_line(data: Any, key: str, i: int) -> int | None:
    """The line of entry ``i`` of the list ``data[key]`` as :func:`load_yaml` recorded it, or
    ``None`` where the data has no such entry or line."""
    try:
        line = data[key][i][LINE_KEY]
    except (KeyError, IndexError, TypeError):
        return None
    return line if isinstance(line, int) else None
