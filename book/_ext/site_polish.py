"""Small fixes to what the reader's browser receives, and links into the API reference.

* Scripts that two extensions both register are emitted once.  (Jupyter Book 1
  sets up sphinx-thebe so that its inline configuration script is added twice,
  and the second ``const THEBE_JS_URL`` is a console error on every page.)
* MathJax is loaded on every page, since the navigation of every page shows
  chapter and section titles, some with math.
* Inline code naming an attncore object (``attncore.softmax``, or a public
  name written as a call, ``rope(x)``, or with an underscore,
  ``linear_attention``) becomes a link to its entry in the API reference
  (book/appendix/api.rst, autodoc over ``attncore.__all__``).  A name with no
  entry is a build warning, and so an error: a misspelt name fails the build.
* A short name in a docstring (``:data:`STAGES```, documented as
  ``attncore._cost.STAGES``) finds the one documented attncore object it names.
* Each chapter and notebook page ends with links to the attncore functions its
  code uses.
* The toggle of a folded code cell (myst-nb's ``hide-input``, the notebooks' setup
  cell) loses its ``aria-label="Toggle hidden content"``: its visible text ("Show code
  cell source") is then its accessible name, as WCAG's label-in-name rule (axe
  ``label-content-name-mismatch``) asks.
"""

from __future__ import annotations

import re

ATTNCORE_NAME = re.compile(r"^attncore(\.[A-Za-z_][A-Za-z0-9_]*)+(\(\))?$")
BARE_CALL = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\(.*\))?$")


def setup(app):
    from docutils import nodes
    from sphinx import addnodes
    from sphinx.transforms import SphinxTransform

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
        """Inline code naming an attncore object -> a cross-reference to its API entry.

        ``attncore.x`` always links; a bare public name links when written as a
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
                    node.replace_self(api_ref(text.removesuffix("()"), text))
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

    def resolve_short_names(app, env, node, contnode):
        """A py reference to ``NAME`` or ``attncore.<path>.NAME`` -> the one documented attncore object named NAME."""
        target = node.get("reftarget", "").lstrip("~.")
        if node.get("refdomain") != "py" or ("." in target and not target.startswith("attncore.")):
            return None
        short = target.rsplit(".", 1)[-1]
        py = env.get_domain("py")
        found = [name for name in py.objects if name.startswith("attncore.") and name.rsplit(".", 1)[-1] == short]
        if len(found) != 1 or found[0] == target:
            return None  # unknown or ambiguous: stays unresolved, a warning under -n
        return py.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], found[0], node, contnode)

    # Titles with math appear in every page's navigation: load MathJax on every
    # page, not only on pages whose body has math, or the sidebar shows raw TeX.
    app.set_html_assets_policy("always")
    def toggle_names(app, pagename, templatename, context, doctree):
        if "body" in context:
            context["body"] = context["body"].replace('<summary aria-label="Toggle hidden content">', "<summary>")

    app.connect("html-page-context", dedupe_scripts, priority=900)
    app.connect("html-page-context", toggle_names, priority=900)
    app.connect("missing-reference", resolve_short_names)
    app.add_transform(LinkAttncoreNames)
    app.add_transform(ListAttncoreUsed)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
