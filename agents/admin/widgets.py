"""Admin widgets hardened against what a request can put in them."""

from __future__ import annotations

from typing import Any

from django.contrib.admin.widgets import AutocompleteSelect
from django.core.exceptions import ValidationError


class SafeAutocompleteSelect(AutocompleteSelect):
    """Django's autocomplete widget looks up the selected values to render them; a value that is
    not a valid key (`?coach=xx`, a re-rendered invalid POST) raised ValueError there, a 500.
    Such values are left out: the form reports them as invalid choices instead."""

    def optgroups(self, name: str, value: Any, attr: Any = None) -> Any:
        remote_pk = self.field.remote_field.model._meta.pk
        valid = []
        for item in value:
            try:
                remote_pk.to_python(item)
            except ValidationError:
                continue
            valid.append(item)
        return super().optgroups(name, valid, attr)


class SafeAutocompleteMixin:
    """For ModelAdmins with autocomplete_fields: their foreign keys use SafeAutocompleteSelect."""

    def formfield_for_foreignkey(self, db_field: Any, request: Any, **kwargs: Any) -> Any:
        formfield = super().formfield_for_foreignkey(db_field, request, **kwargs)  # type: ignore[misc]
        widget = getattr(formfield, "widget", None)
        inner = getattr(widget, "widget", None)  # the related-field wrapper's own widget
        for holder, current in ((formfield, widget), (widget, inner)):
            if holder is not None and type(current) is AutocompleteSelect:
                safe = SafeAutocompleteSelect(current.field, current.admin_site, attrs=current.attrs)
                safe.choices = current.choices
                holder.widget = safe
        return formfield
