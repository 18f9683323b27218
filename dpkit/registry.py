"""The plugin registry: which mechanisms and estimators exist, and who provided them.

:func:`load_registry` builds a fresh registry; it has no side effects at import time and each
call is independent. Plugins come from the ``dpkit`` entry-point group (the built-ins included),
plus any plugin objects passed in. ``DPKIT_DISABLE_PLUGINS=a,b`` blocks plugins by name.
A plugin that fails to import or whose hook raises is recorded in ``Registry.failures`` and
the others still load.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from importlib import metadata
from typing import Any

import attrs
import pluggy

from dpkit import hookspecs
from dpkit.errors import InvalidParameter, PluginConflict, PluginError, UnknownMechanism
from dpkit.estimator import Estimator
from dpkit.mechanism import Mechanism
from dpkit.params import parameter_specs

__all__ = [
    "MechanismInfo",
    "PluginFailure",
    "QueryInfo",
    "Registry",
    "get_registry",
    "load_registry",
]

DISABLE_ENV = "DPKIT_DISABLE_PLUGINS"
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@attrs.frozen
class Provenance:
    """Which plugin, from which distribution and version, registered something."""

    plugin: str
    distribution: str | None = None
    version: str | None = None


@attrs.frozen
class MechanismInfo:
    """A registered mechanism class with its provenance."""

    name: str
    cls: type[Mechanism]
    provenance: Provenance

    @property
    def kind(self) -> str:
        return self.cls.kind


@attrs.frozen
class QueryInfo:
    """A registered query class (a statistic over a dataset) with its provenance."""

    name: str
    cls: type[Any]
    provenance: Provenance


@attrs.frozen
class PluginFailure:
    """A plugin that could not be loaded; ``error`` says why."""

    plugin: str
    distribution: str | None
    error: str


@attrs.define
class Registry:
    """Name → mechanism class and estimator factory, each with the plugin that provided it."""

    mechanisms: dict[str, MechanismInfo] = attrs.field(factory=dict)
    estimators: dict[str, tuple[Callable[[Any], Estimator], Provenance]] = attrs.field(factory=dict)
    queries: dict[str, QueryInfo] = attrs.field(factory=dict)
    failures: list[PluginFailure] = attrs.field(factory=list)

    def names(self) -> list[str]:
        return sorted(self.mechanisms)

    def _failed(self) -> list[str]:
        """The plugins that failed to load, for an unknown name's message: a mechanism whose
        plugin is broken must not look as if it never existed."""
        return [f"{failure.plugin} ({failure.error})" for failure in self.failures]

    def info(self, name: str) -> MechanismInfo:
        if not isinstance(name, str) or name not in self.mechanisms:
            raise UnknownMechanism(str(name), self.mechanisms, failed=self._failed())
        return self.mechanisms[name]

    def mechanism(self, name: str, /, **params: Any) -> Mechanism:
        """Construct the mechanism ``name`` with ``params`` (validated by the mechanism)."""
        cls = self.info(name).cls
        declared = cls.parameters()
        for key in params:
            if key not in declared:
                allowed = "one of " + ", ".join(declared) if declared else "no parameters"
                raise InvalidParameter(
                    key, params[key], f"a known parameter ({allowed})", owner=name
                )
        try:
            return cls(**params)
        except TypeError as error:  # a required parameter is missing
            missing = [p for p in declared if p not in params]
            raise InvalidParameter(
                "parameters",
                params,
                f"complete; missing {', '.join(missing)} ({error})",
                owner=name,
            ) from None

    def query_info(self, name: str) -> QueryInfo:
        if not isinstance(name, str) or name not in self.queries:
            raise UnknownMechanism(str(name), self.queries, kind="statistic", failed=self._failed())
        return self.queries[name]

    def query(self, name: str, /, **params: Any) -> Any:
        """Construct the query (statistic) ``name`` with ``params`` (validated by the query)."""
        return _construct(self.query_info(name).cls, name, params)

    def estimator(self, mechanism: Mechanism) -> Estimator:
        if mechanism.name not in self.estimators:
            raise UnknownMechanism(
                f"estimator for {mechanism.name}", self.estimators, failed=self._failed()
            )
        factory, _ = self.estimators[mechanism.name]
        return factory(mechanism)


def _construct(cls: type[Any], name: str, params: dict[str, Any]) -> Any:
    declared = parameter_specs(cls)
    for key in params:
        if key not in declared:
            allowed = "one of " + ", ".join(declared) if declared else "no parameters"
            raise InvalidParameter(key, params[key], f"a known parameter ({allowed})", owner=name)
    missing = [
        key
        for key, field in attrs.fields_dict(cls).items()
        if key in declared and key not in params and field.default is attrs.NOTHING
    ]
    if missing:
        raise InvalidParameter(missing[0], None, "given (it is required)", owner=name)
    return cls(**params)


def _entry_point_distribution(ep: metadata.EntryPoint) -> tuple[str | None, str | None]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return None, None
    return dist.metadata["Name"], dist.version


def _constant(plugin: object) -> Callable[[], object]:
    return lambda: plugin


def _disabled_plugins() -> set[str]:
    return {name.strip() for name in os.environ.get(DISABLE_ENV, "").split(",") if name.strip()}


def load_registry(
    *, entry_points: bool = True, plugins: Iterable[tuple[str, object]] = ()
) -> Registry:
    """Build a registry from the ``dpkit`` entry points (if asked) and extra ``(name, plugin)``s.

    Blocked plugins (``DPKIT_DISABLE_PLUGINS``) are skipped. Failures to import a plugin, unknown
    hook names in it and exceptions raised by its hooks are recorded per plugin in
    ``Registry.failures``; conflicting names raise :class:`PluginConflict`.
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    registry = Registry()
    provenance: dict[str, Provenance] = {}
    disabled = _disabled_plugins()

    candidates: list[tuple[str, Callable[[], object], str | None, str | None]] = []
    if entry_points:
        for ep in sorted(metadata.entry_points(group=hookspecs.PROJECT_NAME), key=lambda e: e.name):
            dist, version = _entry_point_distribution(ep)
            candidates.append((ep.name, ep.load, dist, version))
    for name, plugin in plugins:
        candidates.append((name, _constant(plugin), None, None))

    for name, load, dist, version in candidates:
        if name in disabled or name in provenance:
            continue
        try:
            plugin = load()
            pm.register(plugin, name=name)
        except Exception as error:  # a broken plugin must not take the others down
            registry.failures.append(PluginFailure(name, dist, f"{type(error).__name__}: {error}"))
            continue
        try:
            pm.check_pending()
        except pluggy.PluginValidationError as error:
            pm.unregister(name=name)
            registry.failures.append(PluginFailure(name, dist, str(error)))
            continue
        provenance[name] = Provenance(name, dist, version)

    for hook_name, add in (
        ("dpkit_register_mechanisms", _mechanism_adder),
        ("dpkit_register_queries", _query_adder),
        ("dpkit_register_estimators", _estimator_adder),
    ):
        hook = getattr(pm.hook, hook_name)
        for impl in sorted(hook.get_hookimpls(), key=lambda i: i.plugin_name):
            origin = provenance[impl.plugin_name]
            try:
                impl.function(register=add(registry, origin))
            except PluginConflict:
                raise
            except Exception as error:
                registry.failures.append(
                    PluginFailure(origin.plugin, origin.distribution, f"{hook_name}: {error}")
                )
    return registry


def _mechanism_adder(registry: Registry, origin: Provenance) -> Callable[[type[Mechanism]], None]:
    def register(cls: type[Mechanism]) -> None:
        if not (isinstance(cls, type) and issubclass(cls, Mechanism)):
            raise PluginError(
                f"plugin {origin.plugin!r} registered {cls!r}, not a dpkit.plugin.Mechanism subclass"
            )
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not _NAME.match(name):
            raise PluginError(
                f"plugin {origin.plugin!r}: mechanism name {name!r} is not snake_case"
            )
        if getattr(cls, "kind", None) not in ("local", "central"):
            raise PluginError(
                f"plugin {origin.plugin!r}: mechanism {name!r} must set kind to 'local' or 'central'"
            )
        if name in registry.mechanisms:
            raise PluginConflict(
                "mechanism", name, registry.mechanisms[name].provenance.plugin, origin.plugin
            )
        registry.mechanisms[name] = MechanismInfo(name, cls, origin)

    return register


def _query_adder(registry: Registry, origin: Provenance) -> Callable[[type[Any]], None]:
    def register(cls: type[Any]) -> None:
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not _NAME.match(name):
            raise PluginError(f"plugin {origin.plugin!r}: query name {name!r} is not snake_case")
        if not (attrs.has(cls) and callable(getattr(cls, "run", None)) and hasattr(cls, "privacy")):
            raise PluginError(
                f"plugin {origin.plugin!r}: query {name!r} must be an attrs class with "
                "privacy and run(data, /, *, rng)"
            )
        if name in registry.queries:
            raise PluginConflict(
                "query", name, registry.queries[name].provenance.plugin, origin.plugin
            )
        registry.queries[name] = QueryInfo(name, cls, origin)

    return register


def _estimator_adder(
    registry: Registry, origin: Provenance
) -> Callable[[str, Callable[[Any], Estimator]], None]:
    def register(name: str, factory: Callable[[Any], Estimator]) -> None:
        if name in registry.estimators:
            raise PluginConflict(
                "estimator", name, registry.estimators[name][1].plugin, origin.plugin
            )
        registry.estimators[name] = (factory, origin)

    return register


_default: Registry | None = None


def get_registry(*, reload: bool = False) -> Registry:
    """The process-wide registry of installed plugins, built on first use."""
    global _default
    if _default is None or reload:
        _default = load_registry()
    return _default


def _reset_default_registry() -> None:
    global _default
    _default = None
