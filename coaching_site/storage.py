"""Static files storage: WhiteNoise's hashed, compressed names, ES module imports included."""

from __future__ import annotations

from whitenoise.storage import CompressedManifestStaticFilesStorage  # type: ignore[import-untyped]


class ModuleAwareStaticFilesStorage(CompressedManifestStaticFilesStorage):
    """The chat page is ES modules (static/chat/main.js imports ./order.js …). Without this,
    collectstatic hashes main.js but leaves its imports pointing at the plain names, which
    WhiteNoise caches for only a minute: after a deploy a browser could pair a new main.js with
    an old module. With it, every import names the hashed file, cached for ever."""

    support_js_module_import_aggregation = True
