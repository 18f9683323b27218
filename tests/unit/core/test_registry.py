"""The plugin registry: provenance, conflicts, broken and blocked plugins, lookups."""

from __future__ import annotations

from importlib import metadata
from typing import Any, ClassVar, Literal

import attrs
import pytest

import dpkit
from dpkit import registry as registry_module


@attrs.frozen
class Dummy(dpkit.plugin.Mechanism):
    name: ClassVar[str] = "rr"  # deliberately clashes with the built-in
    kind: ClassVar[Literal["local", "central"]] = "local"


class ClashingPlugin:
    @dpkit.plugin.hookimpl
    def dpkit_register_mechanisms(self, register: Any) -> None:
        register(Dummy)


class RaisingPlugin:
    @dpkit.plugin.hookimpl
    def dpkit_register_mechanisms(self, register: Any) -> None:
        raise RuntimeError("boom")


class TypoPlugin:
    @dpkit.plugin.hookimpl
    def dpkit_register_mechanism(self, register: Any) -> None:  # missing "s"
        pass


def test_builtins_come_from_entry_points_with_provenance(registry: dpkit.registry.Registry) -> None:
    for name in ("rr", "krr"):
        info = registry.info(name)
        assert info.provenance.plugin == "ldp"
        assert info.provenance.distribution == "dpkit"
        assert info.provenance.version == dpkit.__version__
        assert info.kind == "local"


def test_duplicate_names_are_an_error_naming_both_plugins() -> None:
    with pytest.raises(dpkit.errors.PluginConflict) as info:
        dpkit.load_registry(plugins=[("clasher", ClashingPlugin())])
    assert set(info.value.plugins) == {"ldp", "clasher"}
    assert "'ldp'" in str(info.value) and "'clasher'" in str(info.value)


def test_a_plugin_whose_hook_raises_is_reported_and_the_others_load() -> None:
    registry = dpkit.load_registry(plugins=[("raiser", RaisingPlugin())])
    assert "rr" in registry.names()
    assert [f.plugin for f in registry.failures] == ["raiser"]
    assert "boom" in registry.failures[0].error


def test_a_plugin_that_fails_to_import_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    real = metadata.entry_points
    broken = metadata.EntryPoint(name="broken", value="dpkit_no_such_module_xyz", group="dpkit")

    def entry_points(**kwargs: Any) -> Any:
        return [*real(**kwargs), broken] if kwargs.get("group") == "dpkit" else real(**kwargs)

    monkeypatch.setattr(registry_module.metadata, "entry_points", entry_points)
    registry = dpkit.load_registry()
    assert "krr" in registry.names()
    assert registry.failures[0].plugin == "broken"
    assert "ModuleNotFoundError" in registry.failures[0].error


def test_an_unknown_name_names_the_plugins_that_failed_to_load() -> None:
    """A mechanism or statistic whose plugin is broken must not look as if it never existed:
    the error names the plugin and why it failed."""
    registry = dpkit.load_registry(plugins=[("raiser", RaisingPlugin())])
    for lookup in (registry.info, registry.query_info):
        with pytest.raises(dpkit.errors.UnknownMechanism) as info:
            lookup("from_the_raiser")
        assert info.value.failed == [f"raiser ({registry.failures[0].error})"]
        assert "failed to load" in str(info.value) and "boom" in str(info.value)
    healthy = dpkit.load_registry()
    with pytest.raises(dpkit.errors.UnknownMechanism) as info:
        healthy.info("from_the_raiser")
    assert info.value.failed == [] and "failed to load" not in str(info.value)


def test_a_misspelt_hook_is_reported() -> None:
    registry = dpkit.load_registry(plugins=[("typo", TypoPlugin())])
    assert [f.plugin for f in registry.failures] == ["typo"]
    assert "dpkit_register_mechanism" in registry.failures[0].error


def test_disable_plugins_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DPKIT_DISABLE_PLUGINS", "ldp, clasher")
    registry = dpkit.load_registry(plugins=[("clasher", ClashingPlugin())])
    assert "rr" not in registry.names() and "krr" not in registry.names()


def test_without_entry_points_the_registry_is_empty() -> None:
    registry = dpkit.load_registry(entry_points=False)
    assert registry.names() == []
    with pytest.raises(dpkit.UnknownMechanism, match="no plugin is loaded"):
        registry.info("rr")


def test_unknown_mechanism_suggests_close_names(registry: dpkit.registry.Registry) -> None:
    with pytest.raises(dpkit.UnknownMechanism) as info:
        registry.mechanism("kr", epsilon=1)
    assert "krr" in info.value.suggestions
    assert "did you mean 'krr'" in str(info.value)
    assert isinstance(info.value, KeyError)


def test_unknown_parameter_is_named(registry: dpkit.registry.Registry) -> None:
    with pytest.raises(dpkit.InvalidParameter) as info:
        registry.mechanism("rr", epsilon=1.0, epsilom=2.0)
    assert info.value.parameter == "epsilom"
    assert "epsilon" in str(info.value)


def test_registering_a_non_mechanism_is_a_plugin_failure() -> None:
    class BadPlugin:
        @dpkit.plugin.hookimpl
        def dpkit_register_mechanisms(self, register: Any) -> None:
            register(object)

    registry = dpkit.load_registry(entry_points=False, plugins=[("bad", BadPlugin())])
    assert registry.failures and "not a dpkit.plugin.Mechanism" in registry.failures[0].error


def test_loading_has_no_import_time_side_effects() -> None:
    import importlib

    import dpkit.registry

    importlib.reload(dpkit.registry)
    assert dpkit.registry._default is None
