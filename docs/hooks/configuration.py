"""MkDocs hook: the configuration reference, generated at build time from the settings schema.

`docs/configuration.md` holds the marker `<!-- configuration-reference -->`; this hook replaces it
with tables built from what `python -m sweep` itself checks (`sweep.settings.check_config`):

- the top-level settings: the schema dataclass `Settings` (types, ranges, choices) with the
  defaults and comments of `conf/config.yaml`;
- every option of every config group (`conf/<group>/<option>.yaml`): its `_target_` class's
  declared settings (`sweep.settings.settings_of`: the constructor's `Annotated` parameters), each
  with the value the option's YAML gives it (else the class's default) and the comment beside it
  (in the YAML, else in the class's source); nested components (`model.embedder`, ...) too.

Nothing here is kept by hand: a setting added to a class or a YAML appears on the next build, and a
`_target_` that does not import fails the build (`mkdocs build --strict` in `.ci/run`).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Union

MARKER = "<!-- configuration-reference -->"
PAGE = "configuration.md"
SCHEMA_MODULES = ("sweep.experiment.trial",)  # where the top-level `Settings` dataclass lives
_KEY_LINE = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z_][\w]*)\s*:(?P<rest>.*)$")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"docs/{PAGE}: the marker {MARKER} is missing")
    conf = Path(config.config_file_path).resolve().parent / "conf"
    return markdown.replace(MARKER, reference(conf))


def reference(conf: Path) -> str:
    """The whole reference as Markdown."""
    schema, module = _schema()
    top_yaml = _load_yaml(conf / "config.yaml")
    comments = _yaml_comments(conf / "config.yaml")
    groups = _group_order(top_yaml, conf)
    defaults = _defaults(top_yaml)
    out = [
        "## Top-level settings",
        "",
        f"Declared by `{module}.{schema.__name__}`; the defaults are `conf/config.yaml`'s. "
        "Set any of them on the command line: `python -m sweep depth=50 'context.k=[5,10]'`.",
        "",
        "| key | allowed | default | what it does |",
        "|---|---|---|---|",
    ]
    for key, hint, source_comment in _schema_rows(schema, ""):
        if _dataclass_in(hint) is not None and key in groups:
            continue  # a config group (golden): its own section below
        value = _lookup(top_yaml, key)
        default = _shown(value) if value is not _ABSENT else _shown(_schema_default(schema, key))
        out.append(_row(key, _describe(hint), default, comments.get(key) or source_comment))
    out += [
        "",
        "## Config groups",
        "",
        "Choose an option with `group=option` (`index=hnsw`), sweep several with `-m group=a,b`, and set "
        "one of its settings with `group.setting=value` (`index.M=16`).",
        "",
        "| group | default | options |",
        "|---|---|---|",
    ]
    for group in groups:
        options = ", ".join(f"[`{o}`](#{group}-{o.replace('_', '-')})" for o in _options(conf, group))
        out.append(f"| [`{group}`](#{group}) | `{defaults.get(group, '')}` | {options} |")
    for group in groups:
        out += ["", f"### `{group}` {{ #{group} }}", ""]
        for option in _options(conf, group):
            out += _option_section(conf, group, option, schema)
        for nested in sorted(p.name for p in (conf / group).iterdir() if p.is_dir() and any(p.glob("*.yaml"))):
            anchor = f"{group}-{nested}"
            out += ["", f"### `{group}/{nested}` {{ #{anchor} }}", "", f"Chosen with `{group}/{nested}=option`.", ""]
            for option in _options(conf / group, nested):
                out += _option_section(conf, f"{group}/{nested}", option, schema)
    return "\n".join(out) + "\n"


def _option_section(conf: Path, group: str, option: str, schema: type) -> list[str]:
    path = conf / group / f"{option}.yaml"
    node = _load_yaml(path)
    key = group.replace("/", ".")  # a nested group's settings: model/embedder=openai sets model.embedder.*
    comments = {f"{key}.{k}": v for k, v in _yaml_comments(path).items()}
    header = _header_comment(path)
    anchor = f"{group.replace('/', '-')}-{option.replace('_', '-')}"
    out = [f"#### `{group}={option}` {{ #{anchor} }}", ""]
    target = node.get("_target_") if isinstance(node, dict) else None
    if header:
        header = _text(header)
        out += [header[0].upper() + header[1:] + ("" if header.endswith(".") else "."), ""]
    if target == "???":
        return out + [
            f"`{group}._target_` must be given: the import path of your class. Its own constructor parameters "
            f"are its settings (`+{group}.name=value` adds one the YAML does not have).",
            "",
        ]
    rows = ["| key | allowed | default | what it does |", "|---|---|---|---|"]
    if target:
        cls = _import(target, f"conf/{group}/{option}.yaml")
        out += [f"Class: `{target}`.", ""]
        rows += _component_rows(cls, node, key, comments)
    else:  # a group of plain settings (golden): the schema's nested dataclass for it
        hint = typing.get_type_hints(schema, include_extras=True).get(group)
        nested = _dataclass_in(hint)
        if nested is None:
            raise ValueError(f"conf/{group}/{option}.yaml has no _target_ and {schema.__name__}.{group} no schema")
        for key, field_hint, source_comment in _schema_rows(nested, f"{group}."):
            value = _lookup(node, key.split(".", 1)[1])
            default = _shown(value) if value is not _ABSENT else _shown(_schema_default(nested, key.split(".", 1)[1]))
            rows.append(_row(key, _describe(field_hint), default, comments.get(key) or source_comment))
    if len(rows) == 2:
        return out + ["No settings.", ""]
    return out + rows + [""]


def _component_rows(cls: type, node: dict, prefix: str, comments: dict[str, str]) -> list[str]:
    from sweep.settings import settings_of

    rows = []
    signature = inspect.signature(cls)
    for name, hint in settings_of(cls).items():
        key = f"{prefix}.{name}"
        value = node.get(name, _ABSENT)
        comment = comments.get(key) or _source_comment(cls, name)
        if isinstance(value, dict) and "_target_" in value:  # a nested component: its own rows
            child = _import(value["_target_"], key)
            rows.append(_row(key, f"a component (`{child.__name__}`)", "", comment))
            rows += _component_rows(child, value, key, comments)
            continue
        if isinstance(value, str) and re.fullmatch(r"\$\{[\w.]+\}", value) and value[2:-1] in _GROUP_NAMES:
            allowed = f"the [`{value[2:-1]}`](#{value[2:-1]}) group"
        else:
            allowed = _describe(hint)
        if value is _ABSENT and (option := _nested_option(node, name)):  # `- embedder: local`: a group in the option
            group = f"{prefix.split('.')[0]}/{name}"
            rows.append(_row(key, f"the [`{group}`](#{group.replace('/', '-')}) group", f"`{option}`", comment))
            continue
        if value is _ABSENT and (members := _members(node, name)):  # a hybrid's members, from the defaults list
            rows.append(_row(key, allowed, members, comment))
            continue
        if value is _ABSENT:
            default = _class_default(cls, signature, name)
            shown = "required" if default is _ABSENT else _shown(default) + " (not in the YAML)"
        else:
            shown = _shown(value)
        rows.append(_row(key, allowed, shown, comment))
    return rows


def _defaults_entries(node: dict) -> list[tuple[str, str]]:
    """(source, option) of every `- source: option` entry in the option's defaults list."""
    return [(str(k), str(v)) for entry in node.get("defaults", []) if isinstance(entry, dict) for k, v in entry.items()]


def _members(node: dict, name: str) -> str:
    """The options the defaults list places under `name` (`- /model@members.bm25: bm25`), as
    `bm25: model=bm25, ...`; "" when none."""
    placed = []
    for source, option in _defaults_entries(node):
        group, _, package = source.lstrip("/").partition("@")
        if package.startswith(f"{name}."):
            placed.append(f"{package.removeprefix(name + '.')}: {group}={option}")
    return ", ".join(placed)


def _nested_option(node: dict, name: str) -> str | None:
    """The option the defaults list chooses for the group `name` inside this one (`- embedder: local`)."""
    return next((option for source, option in _defaults_entries(node) if source == name), None)


# --- the schema ---------------------------------------------------------------------------------

_ABSENT = object()
_GROUP_NAMES: set[str] = set()


def _schema() -> tuple[type, str]:
    errors = []
    for module in SCHEMA_MODULES:
        try:
            schema = importlib.import_module(module).Settings
        except (ImportError, AttributeError) as error:
            errors.append(f"{module}: {error}")
            continue
        if dataclasses.is_dataclass(schema):
            return schema, module
    raise ValueError("configuration hook: no Settings dataclass found (" + "; ".join(errors) + ")")


def _schema_rows(schema: type, prefix: str) -> list[tuple[str, Any, str]]:
    """(dotted key, declared type, comment in the source) for every field, nested dataclasses flattened."""
    hints = typing.get_type_hints(schema, include_extras=True)
    rows = []
    for field in dataclasses.fields(schema):
        hint = hints[field.name]
        key = prefix + field.name
        nested = _dataclass_in(hint)
        if nested is not None and not (prefix == "" and field.name in _GROUP_NAMES):
            rows += _schema_rows(nested, key + ".")
        else:
            rows.append((key, hint, _source_comment(schema, field.name)))
    return rows


def _schema_default(schema: type, dotted: str) -> Any:
    head, _, rest = dotted.partition(".")
    field = {f.name: f for f in dataclasses.fields(schema)}[head]
    if rest:
        return _schema_default(_dataclass_in(typing.get_type_hints(schema, include_extras=True)[head]), rest)
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return _ABSENT


def _dataclass_in(hint: Any) -> type | None:
    for option in typing.get_args(hint) or (hint,):
        if isinstance(option, type) and dataclasses.is_dataclass(option):
            return option
    return None


def _class_default(cls: type, signature: inspect.Signature, name: str) -> Any:
    if dataclasses.is_dataclass(cls):
        for field in dataclasses.fields(cls):
            if field.name == name:
                if field.default is not dataclasses.MISSING:
                    return field.default
                if field.default_factory is not dataclasses.MISSING:
                    return field.default_factory()
                return _ABSENT
    default = signature.parameters[name].default
    return _ABSENT if default is inspect.Parameter.empty else default


def _describe(hint: Any) -> str:
    """A declared type in words, as `check_value`'s errors say it: `an integer from 2 to 1024, or null`."""
    from sweep.settings import KINDS, Cutoffs, Exists, NonEmpty, OneOf

    if hint is Any:
        return "any value"
    base, constraints = hint, ()
    if typing.get_origin(hint) is Annotated:
        base, *constraints = typing.get_args(hint)
    options = typing.get_args(base) if typing.get_origin(base) in (Union, types.UnionType) else (base,)
    optional = type(None) in options
    kinds = [typing.get_origin(k) or k for k in options if k is not type(None)]
    words = [KINDS.get(k) or f"a `{getattr(k, '__name__', k)}`" for k in kinds]
    described = [str(c) for c in constraints if not isinstance(c, NonEmpty)]
    if any(isinstance(c, (OneOf, Exists, Cutoffs)) for c in constraints):
        text = " ".join(described)
    else:
        first = "a non-empty string" if any(isinstance(c, NonEmpty) for c in constraints) and str in kinds else None
        text = " ".join([first or " or ".join(words), *described])
    return text + (", or null" if optional else "")


def _source_comment(cls: type, name: str) -> str:
    """The comment beside `name`'s declaration in the class body or its constructor, nearest class first."""
    pattern = re.compile(rf"^\s*{re.escape(name)}\s*:[^#\n]*#\s*(?P<comment>.+?)\s*$")
    for klass in cls.__mro__:
        if klass is object:
            continue
        sources = []
        for obj in (klass, klass.__dict__.get("__init__")):
            if obj is None:
                continue
            try:
                sources.append(inspect.getsource(obj))
            except (OSError, TypeError):
                continue
        for source in sources:
            for line in source.splitlines():
                match = pattern.match(line)
                if match:
                    return match.group("comment")
    return ""


def _import(target: str, where: str) -> type:
    module, _, name = str(target).rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except Exception as error:
        raise ValueError(f"configuration hook: {where}: _target_ {target} does not import ({error})") from error


# --- the YAML files -----------------------------------------------------------------------------


def _load_yaml(path: Path) -> dict:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.load(path), resolve=False) or {}


def _yaml_comments(path: Path) -> dict[str, str]:
    """{dotted key: the comment at the end of its line} (the `# ...` outside quotes)."""
    out: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        match = _KEY_LINE.match(line)
        if not match or line.lstrip().startswith("#"):
            continue
        indent = len(match["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key = ".".join([k for _, k in stack] + [match["key"]])
        stack.append((indent, match["key"]))
        comment = _trailing_comment(match["rest"])
        if comment:
            out[key] = comment
    return out


def _trailing_comment(rest: str) -> str:
    quote = None
    for i, char in enumerate(rest):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or rest[i - 1].isspace()):
            return rest[i + 1 :].strip()
    return ""


def _header_comment(path: Path) -> str:
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    return " ".join(lines)


def _defaults(top: dict) -> dict[str, str]:
    out = {}
    for entry in top.get("defaults", []):
        if isinstance(entry, dict):
            out.update({str(k): str(v) for k, v in entry.items()})
    return out


def _group_order(top: dict, conf: Path) -> list[str]:
    listed = [g for g in _defaults(top) if (conf / g).is_dir()]
    others = sorted(p.name for p in conf.iterdir() if p.is_dir() and p.name not in listed and any(p.glob("*.yaml")))
    _GROUP_NAMES.clear()
    _GROUP_NAMES.update(listed + others)
    return listed + others


def _options(conf: Path, group: str) -> list[str]:
    return sorted(p.stem for p in (conf / group).glob("*.yaml"))


def _lookup(node: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _ABSENT
        node = node[part]
    return node


def _shown(value: Any) -> str:
    if value is _ABSENT:
        return ""
    if value is None:
        text = "null"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, list):
        text = "[" + ", ".join(_plain(v) for v in value) + "]"
    elif isinstance(value, dict):
        text = "{" + ", ".join(f"{k}: {_plain(v)}" for k, v in value.items()) + "}"
    elif value == "???":
        return "required"
    elif value == "":
        text = '""'
    else:
        text = str(value)
    return f"`{text}`"


def _plain(value: Any) -> str:
    return _shown(value).strip("`")


def _row(key: str, allowed: str, default: str, comment: str) -> str:
    cells = [f"`{key}`", allowed, default, _text(comment)]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _text(comment: str) -> str:
    """A comment from a YAML or a source file as literal Markdown text."""
    return comment.replace("<", "&lt;").replace("*", "\\*")
