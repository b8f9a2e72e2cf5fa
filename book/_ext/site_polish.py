"""Small fixes to what the reader's browser receives, and links into the API reference.

* Scripts that two extensions both register are emitted once.  (Jupyter Book
  sets up sphinx-thebe in a way that adds its inline configuration script twice,
  and the second ``const THEBE_JS_URL`` is a console error on every page.)
* MathJax is loaded on every page, since the navigation of every page shows
  chapter and section titles, some with math.
* The theme gets an explicit colour mode: with none, the page's first script
  stores an empty mode and the theme logs "Got invalid theme mode" on a
  reader's first visit.
* The ``attncore-api`` directive writes the API reference from the package
  itself: every public function and class of every module, documented from its
  docstring, under its public name (``attncore.softmax`` when the package
  exports it, ``attncore.<module>.<name>`` otherwise).
* Inline code naming a public function of attncore (``attncore.softmax`` or
  ``attncore.linear_attention``) becomes a link to its entry in the API
  reference, so every page that uses a function links to it without anyone
  writing the link by hand.  A name with no entry is a build warning (and so
  an error), which catches typos.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re

ATTNCORE_NAME = re.compile(r"^attncore(\.[A-Za-z_][A-Za-z0-9_]*)+(\(\))?$")
BARE_CALL = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\(.*\))?$")


def api_members():
    """``[(module name, [(name, object), ...]), ...]`` for every public module of attncore.

    A module's members are the public functions and classes it defines itself
    (not the ones it imports).
    """
    import attncore

    out = []
    for info in sorted(pkgutil.iter_modules(attncore.__path__), key=lambda m: m.name):
        if info.name == "_checks":  # validation helpers, not part of the course's API
            continue
        module_name = f"attncore.{info.name}"
        module = importlib.import_module(module_name)
        assigned = {
            target.id
            for node in ast.parse(inspect.getsource(module)).body
            if isinstance(node, (ast.Assign, ast.AnnAssign))
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(target, ast.Name)
        }
        members = [
            (name, obj) for name, obj in vars(module).items()
            if not name.startswith("_")
            and (
                ((inspect.isfunction(obj) or inspect.isclass(obj)) and getattr(obj, "__module__", None) == module_name)
                or (name.isupper() and name in assigned)  # public constants such as size limits
            )
        ]
        out.append((module_name, sorted(members, key=lambda m: m[0])))
    return out


def shadowed(module_name: str) -> bool:
    """True when the package exports a function with the module's own name."""
    import attncore

    short = module_name.rsplit(".", 1)[-1]
    return short in getattr(attncore, "__all__", ())


def public_name(dotted: str) -> str:
    """The name under which the API reference documents ``dotted``.

    ``attncore.softmax`` and ``attncore.softmax`` both name the function
    the package exports as ``attncore.softmax``; a function the package does not
    export keeps its module path.  A name that is not an attncore object is
    returned unchanged (and then fails to resolve, which the build reports).
    """
    import attncore

    parts = dotted.split(".")
    obj = None
    for cut in range(len(parts), 0, -1):  # the longest importable module prefix
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for part in parts[cut:]:
                obj = getattr(obj, part)
        except AttributeError:
            return dotted
        break
    if obj is None:
        return dotted
    name = getattr(obj, "__name__", None)
    if name in getattr(attncore, "__all__", ()) and getattr(attncore, name) is obj:
        return f"attncore.{name}"
    module = getattr(obj, "__module__", None)
    if module and name and not inspect.ismodule(obj):
        return f"{module}.{name}"
    return dotted


def setup(app):
    from docutils import nodes
    from docutils.parsers.rst import Directive
    from docutils.statemachine import StringList
    from sphinx import addnodes
    from sphinx.transforms import SphinxTransform
    from sphinx.util.nodes import nested_parse_with_titles

    # Runs before the theme's own script reads the stored mode.
    default_mode = 'if (!localStorage.getItem("mode")) { document.documentElement.dataset.mode = "auto"; }'

    def dedupe_scripts(app, pagename, templatename, context, doctree):
        seen, unique = set(), []
        for script in context.get("script_files", []):
            # An inline script may be registered with filename None or "": same script.
            key = (str(getattr(script, "filename", script) or ""), tuple(sorted(getattr(script, "attributes", {}).items())))
            if key not in seen:
                seen.add(key)
                unique.append(script)
        context["script_files"] = unique

    def api_ref(target, text):
        ref = addnodes.pending_xref(
            "", refdomain="py", reftype="obj", reftarget=target,
            refexplicit=True, refwarn=True, **{"py:module": None, "py:class": None},
        )
        ref += nodes.literal(text, text, classes=["xref", "py", "py-obj"])
        return ref

    class LinkAttncoreNames(SphinxTransform):
        """Inline code naming an attncore function -> a cross-reference to its API entry.

        ``attncore.x.y`` always links; a bare public name links when written as a
        call (``rope(x)``) or when it is unmistakable (``permutation_matrix``,
        with an underscore), so that prose words such as ``softmax`` stay prose.
        """

        default_priority = 400

        def apply(self):
            import attncore

            public = set(attncore.__all__)
            for node in list(self.document.findall(nodes.literal)):
                if isinstance(node.parent, (nodes.reference, addnodes.pending_xref, nodes.literal_block)):
                    continue
                text = node.astext()
                if ATTNCORE_NAME.match(text):
                    node.replace_self(api_ref(public_name(text.removesuffix("()")), text))
                    continue
                match = BARE_CALL.match(text)
                if match and match.group(1) in public and (match.group(2) or "_" in match.group(1)):
                    node.replace_self(api_ref(f"attncore.{match.group(1)}", text))

    class ListAttncoreUsed(SphinxTransform):
        """End each chapter and notebook page with links to the attncore functions its code uses."""

        default_priority = 410

        def apply(self):
            import attncore

            docname = self.env.docname
            if not (docname.startswith("notebooks/") or (docname.startswith("book/") and "/appendix/" not in docname)):
                return
            public = set(attncore.__all__)
            used = set()
            for block in self.document.findall(nodes.literal_block):
                code = block.astext()
                used.update(n for n in re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)\b", code) if n in public and "attncore" in code)
            if not used:
                return
            para = nodes.paragraph()
            para += nodes.Text("Functions of attncore used on this page: ")
            for i, name in enumerate(sorted(used, key=str.lower)):
                if i:
                    para += nodes.Text(", ")
                para += api_ref(f"attncore.{name}", name)
            para += nodes.Text(".")
            section = next(iter(self.document.findall(nodes.section)), None)
            (section if section is not None else self.document).append(nodes.rubric(text="attncore on this page"))
            (section if section is not None else self.document).append(para)

    class AttncoreApi(Directive):
        """The API reference of attncore, generated from the package (see module doc)."""

        def run(self):
            lines = []
            for module_name, members in api_members():
                module = importlib.import_module(module_name)
                title = module_name.replace("attncore._", "attncore: ")
                lines += [title, "-" * len(title), ""]
                if not shadowed(module_name):
                    lines += [f".. py:module:: {module_name}", ""]
                summary = (inspect.getdoc(module) or "").split("\n\n")[0]
                lines += [summary, ""]
                for name, obj in members:
                    if name.isupper():
                        lines += [f".. autodata:: {module_name}.{name}", ""]
                        continue
                    kind = "autoclass" if inspect.isclass(obj) else "autofunction"
                    lines += [f".. {kind}:: {public_name(f'{module_name}.{name}')}", ""]
                    if kind == "autoclass":
                        lines += ["   :members:", ""]
            box = nodes.section()
            box.document = self.state.document
            nested_parse_with_titles(self.state, StringList(lines, source="attncore-api"), box)
            return box.children

    app.add_js_file(None, body=default_mode, priority=100)
    # Titles with math appear in every page's navigation: load MathJax on every
    # page, not only on pages whose body has math, or the sidebar shows raw TeX.
    app.set_html_assets_policy("always")
    def resolve_short_names(app, env, node, contnode):
        """A docstring's ``:func:`rope``` or ``:data:`STAGES``` finds the attncore object it means.

        Autodoc documents a function under its public name (``attncore.rope``),
        so a short name written inside its module's docstrings does not resolve
        by itself; look it up in the package's modules instead.
        """
        if node.get("refdomain") != "py":
            return None
        target = node["reftarget"].lstrip("~.")
        if "." in target and not target.startswith("attncore."):
            return None
        short = target.rsplit(".", 1)[-1]
        candidates = [public_name(target)] if target.startswith("attncore.") else []
        candidates += [
            public_name(f"{module_name}.{short}")
            for module_name, _ in api_members()
            if hasattr(importlib.import_module(module_name), short)
        ]
        py = env.get_domain("py")
        for candidate in dict.fromkeys(candidates):
            if candidate == node["reftarget"]:
                continue
            found = py.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], candidate, node, contnode)
            if found is not None:
                return found
        return None

    app.connect("html-page-context", dedupe_scripts, priority=900)
    app.connect("missing-reference", resolve_short_names)
    app.add_transform(LinkAttncoreNames)
    app.add_transform(ListAttncoreUsed)
    app.add_directive("attncore-api", AttncoreApi)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
