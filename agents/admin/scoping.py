"""Who sees which conversations in admin: a coach sees only the coachees assigned to them.

Every admin class that shows coachee data mixes in `CoacheeScopedMixin` (or, for inlines,
`CoacheeScopedInlineMixin`) and names the path from its model to the coachee. The scope is
then applied where Django admin reads rows: the queryset (changelist, change, history and
delete views, actions, `select_across`, date hierarchy, filters and facets), the search
(including the autocomplete endpoint, which calls the related admin's queryset and search),
every object permission, and the choices of foreign-key fields. Superusers are not scoped;
users who are not in the coaches group see no conversation data at all, whatever model
permissions they hold (operators configure, they do not read conversations).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db.models import Model, QuerySet
from django.http import HttpRequest

from agents.models import CoachAssignment

COACHES_GROUP = "coaches"
_REQUEST_CACHE = "_coachee_scope"


@dataclass(frozen=True)
class Scope:
    """What one request may see: everything (superuser), some coachees (coach) or nothing."""

    everything: bool
    is_coach: bool
    coachee_ids: frozenset[int]

    @property
    def sees_conversations(self) -> bool:
        return self.everything or self.is_coach

    def allows(self, coachee_id: int | None) -> bool:
        return self.everything or (coachee_id is not None and coachee_id in self.coachee_ids)


NOTHING = Scope(everything=False, is_coach=False, coachee_ids=frozenset())


def scope_for(request: HttpRequest) -> Scope:
    """The request user's scope, computed once per request."""
    cached = getattr(request, _REQUEST_CACHE, None)
    if isinstance(cached, Scope):
        return cached
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or not user.is_active:
        scope = NOTHING
    elif user.is_superuser:
        scope = Scope(everything=True, is_coach=False, coachee_ids=frozenset())
    elif user.groups.filter(name=COACHES_GROUP).exists():
        ids = CoachAssignment.objects.filter(coach_id=user.pk).values_list("coachee_id", flat=True)
        scope = Scope(everything=False, is_coach=True, coachee_ids=frozenset(ids))
    else:
        scope = NOTHING
    setattr(request, _REQUEST_CACHE, scope)
    return scope


def scope_queryset(queryset: QuerySet[Any], request: HttpRequest, coachee_path: str) -> QuerySet[Any]:
    """`queryset` cut down to the rows whose coachee (reached by `coachee_path`) the user may see."""
    scope = scope_for(request)
    if scope.everything:
        return queryset
    if not scope.coachee_ids:
        return queryset.none()
    return queryset.filter(**{f"{coachee_path}__in": sorted(scope.coachee_ids)})


def coachee_id_of(obj: Model, coachee_path: str) -> int | None:
    """Follow `coachee_path` (e.g. "turn__session__coachee") from obj to the coachee's id."""
    *relations, last = coachee_path.split("__")
    current: Any = obj
    for name in relations:
        current = getattr(current, name, None)
        if current is None:
            return None
    value = getattr(current, f"{last}_id", None)
    return int(value) if value is not None else None


def object_in_scope(request: HttpRequest, obj: Model | None, coachee_path: str) -> bool:
    """True when obj is None (a question about the model) or its coachee is in scope."""
    if obj is None:
        return True
    scope = scope_for(request)
    return scope.everything or scope.allows(coachee_id_of(obj, coachee_path))


def scoped_coachees(request: HttpRequest) -> QuerySet[Any]:
    """The coachees (users) the request may see: assigned ones, or every user for a superuser."""
    users = get_user_model().objects.all()
    scope = scope_for(request)
    if scope.everything:
        return users
    return users.filter(pk__in=sorted(scope.coachee_ids))


class AssignedCoacheeFilter(admin.SimpleListFilter):
    """Filter by coachee, offering only the coachees in scope (never every user, as a
    related-field filter would)."""

    title = "coachee"
    parameter_name = "coachee"

    def lookups(self, request: HttpRequest, model_admin: Any) -> Iterable[tuple[Any, str]]:
        users = scoped_coachees(request)
        if scope_for(request).everything:  # not every account: those with sessions
            users = users.filter(coaching_sessions__isnull=False).distinct()
        return [(str(user.pk), user.get_username()) for user in users.order_by("username")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any] | None:
        value = self.value()
        if not value:
            return queryset
        path = getattr(self, "coachee_path", "coachee")
        if not value.isdigit():
            return queryset.none()
        return queryset.filter(**{path: int(value)})


def coachee_filter(coachee_path: str) -> type[AssignedCoacheeFilter]:
    """An `AssignedCoacheeFilter` for a model whose coachee is at `coachee_path`."""
    return type(f"CoacheeFilter_{coachee_path}", (AssignedCoacheeFilter,), {"coachee_path": coachee_path})


if TYPE_CHECKING:
    _AdminBase = admin.ModelAdmin
    _InlineBase = admin.options.InlineModelAdmin
else:
    _AdminBase = object
    _InlineBase = object


def _scoped_related_queryset(admin_site: Any, request: HttpRequest, model: type[Model]) -> QuerySet[Any] | None:
    """The queryset a foreign key to `model` may offer: a scoped admin's rows, or the coachees
    in scope for a foreign key to the user model."""
    related_admin = admin_site._registry.get(model)
    if isinstance(related_admin, CoacheeScopedMixin):
        return related_admin.get_queryset(request)
    if model is get_user_model():
        return scoped_coachees(request)
    return None


class CoacheeScopedMixin(_AdminBase):
    """Put before `admin.ModelAdmin`; set `coachee_path` to the model's path to its coachee."""

    coachee_path: str = "coachee"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return scope_queryset(super().get_queryset(request), request, self.coachee_path)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        # The autocomplete view and the changelist both come here; scope again whatever
        # queryset we were handed.
        found, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        return scope_queryset(found, request, self.coachee_path), may_have_duplicates

    def has_module_permission(self, request: HttpRequest) -> bool:
        return scope_for(request).sees_conversations and super().has_module_permission(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return (
            scope_for(request).sees_conversations
            and super().has_view_permission(request, obj)
            and object_in_scope(request, obj, self.coachee_path)
        )

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return (
            scope_for(request).sees_conversations
            and super().has_change_permission(request, obj)
            and object_in_scope(request, obj, self.coachee_path)
        )

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return (
            scope_for(request).sees_conversations
            and super().has_delete_permission(request, obj)
            and object_in_scope(request, obj, self.coachee_path)
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return scope_for(request).sees_conversations and super().has_add_permission(request)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        related = _scoped_related_queryset(self.admin_site, request, db_field.remote_field.model)
        if related is not None:
            kwargs["queryset"] = related
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def scoped(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """Scope a queryset again: actions call this before they touch anything."""
        return scope_queryset(queryset, request, self.coachee_path)


class CoacheeScopedInlineMixin(_InlineBase):
    """For inlines: `coachee_path` from the inline's model, `parent_coachee_path` from the parent's
    (Django passes the parent object to an inline's permission checks)."""

    coachee_path: str = "coachee"
    parent_coachee_path: str = "coachee"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return scope_queryset(super().get_queryset(request), request, self.coachee_path)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return (
            scope_for(request).sees_conversations
            and super().has_view_permission(request, obj)
            and object_in_scope(request, obj, self.parent_coachee_path)
        )

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return (
            scope_for(request).sees_conversations
            and super().has_change_permission(request, obj)
            and object_in_scope(request, obj, self.parent_coachee_path)
        )

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return (
            scope_for(request).sees_conversations
            and super().has_delete_permission(request, obj)
            and object_in_scope(request, obj, self.parent_coachee_path)
        )

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return (
            scope_for(request).sees_conversations
            and super().has_add_permission(request, obj)
            and object_in_scope(request, obj, self.parent_coachee_path)
        )
