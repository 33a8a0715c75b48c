"""A griffe extension: the Sphinx roles of accord's docstrings become links on the site.

accord's docstrings name other objects as ``:class:`~accord.Result``` or ``:func:`echoed```, which
read well in the source. On the site such a role becomes a code span, linked when it names a
public object: ``:class:`~accord.Result``` links to ``accord.Result``, ``:meth:`run``` in a
method of ``Stabilizer`` to ``accord.Stabilizer.run``. A role that names a public name in full
(``accord.X``) must resolve, or ``mkdocs build --strict`` fails; one that names a private helper
(``:func:`echoed```) stays plain code.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from griffe import Alias, Extension, Module, Object

_ROLE = re.compile(r":(?:class|func|meth|attr|exc|data|mod|obj):`(?P<tilde>[~!]?)(?P<target>[\w.]+)(?:\(\))?`")


def _public_names(pkg: Module) -> dict[str, str]:
    """Canonical path -> public path, for every name a public module exports."""
    public: dict[str, str] = {}
    for module in (pkg, pkg.members.get("models")):
        if not isinstance(module, Module | Alias) or module.exports is None:
            continue
        for name in map(str, module.exports):
            member = module.members.get(name)
            if member is None:
                continue
            target = member.target_path if isinstance(member, Alias) else member.path
            public.setdefault(target, f"{module.path}.{name}")
    return public


class SphinxRoles(Extension):
    """Rewrites every docstring of the package once it is loaded."""

    def on_package(self, *, pkg: Module, **kwargs: Any) -> None:
        if pkg.name != "accord":
            return
        self.public = _public_names(pkg)
        self.exposed = set(self.public.values())
        self._walk(pkg)

    def _walk(self, obj: Object) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(lambda m: self._link(m, obj), obj.docstring.value)
        for member in obj.members.values():
            if not isinstance(member, Alias):
                self._walk(member)

    def _link(self, match: re.Match[str], where: Object) -> str:
        target = match["target"]
        shown = f"`{target.rsplit('.', 1)[-1] if match['tilde'] == '~' else target}`"
        if target.startswith("accord.") and not any(part.startswith("_") for part in target.split(".")):
            return f"[{shown}][{target}]"  # a public name in full: the strict build checks it resolves
        public = self._public(target, where)
        if public is None:
            return shown  # a private helper: code, not a link
        if public in self.exposed:
            return f"[{shown}][{public}]"
        return f'<autoref identifier="{public}" optional>{shown}</autoref>'  # a member: linked when it is shown

    def _public(self, target: str, where: Object) -> str | None:
        """The public path of the object a role names, seen from ``where`` (None: private)."""
        canonical = target if target.startswith("accord.") else None
        scope: Object | None = where
        while canonical is None and scope is not None:
            head, _, rest = target.partition(".")
            member = scope.members.get(head)
            if member is not None:
                base = member.target_path if isinstance(member, Alias) else member.path
                canonical = f"{base}.{rest}" if rest else base
            scope = scope.parent
        prefix = _within(canonical, self.public) if canonical else None
        return self.public[prefix] + canonical[len(prefix) :] if canonical and prefix else None


def _within(path: str, names: Iterable[str]) -> str | None:
    """The longest of ``names`` that is ``path`` or a parent of it."""
    found = [name for name in names if path == name or path.startswith(name + ".")]
    return max(found, key=len, default=None)
