"""Sphinx configuration of the course book, copied into each build's source tree by ``attnstruct.teaching.book``.

Nothing here reaches the web: notebooks are not executed again, MathJax 2.7 is the copy under
``_static/mathjax/`` (from the ``jupyter_server_mathjax`` package, which ships the combined configuration
``TeX-AMS-MML_HTMLorMML-full`` with HTML-CSS output and STIX-Web fonts, not ``TeX-AMS_CHTML``), and the theme's
launch, repository and issue buttons are off.
"""

project = "attnstruct course book"
author = "attnstruct contributors"
copyright = "the attnstruct contributors"
# attnstruct.teaching.book is also a Sphinx extension: it folds sphinx-exercise solutions of class dropdown (<details>)
extensions = ["myst_nb", "sphinx.ext.mathjax", "sphinx_exercise", "attnstruct.teaching.book"]
root_doc = "index"
exclude_patterns = ["_build", "**.ipynb_checkpoints"]

# myst-nb: render the stored outputs as they are; Markdown outputs of code cells get MyST (and its math) too
nb_execution_mode = "off"
nb_render_markdown_format = "myst"
nb_ipywidgets_js = {}  # no require.js or widget scripts from a CDN
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_update_mathjax = False  # its settings are MathJax 3's; tex2jax below says what MathJax 2 typesets
exercise_style = "solution_follow_exercise"  # a solution right below its exercise is titled "Solution"

# mathjax_path (the local copy) is appended by attnstruct.teaching.book, which copies the files it names
mathjax2_config = {
    "tex2jax": {
        "inlineMath": [["\\(", "\\)"]],
        "displayMath": [["\\[", "\\]"]],
        "processEscapes": True,
        "processEnvironments": True,
        "processClass": "math|output_area|tex2jax_process",
        "ignoreClass": "tex2jax_ignore|mathjax_ignore",
    },
    "HTML-CSS": {
        "availableFonts": [],
        "preferredFont": None,
        "webFont": "STIX-Web",
        "imageFont": None,
        "linebreaks": {"automatic": True},
        # Inline math at the size of the text around it: by default MathJax scales its STIX-Web glyphs until their
        # x-height matches the page font's (130% here), which makes inline math tower over the line.
        "matchFontHeight": False,
    },
    "messageStyle": "none",
    # The hidden assistive MathML copy would ask for fonts (MathJax_AMS, MathJax_Script .otf) that the packaged
    # MathJax does not ship: 404s offline. The typeset HTML-CSS output stays.
    "menuSettings": {"assistiveMML": False},
}
# Notebook Markdown may skip a heading level ("#" then "###"); that is a note on the prose, not broken output,
# so it does not fail the build (sphinx-build -W turns every other warning into an error).
suppress_warnings = ["myst.header"]

html_theme = "sphinx_book_theme"
html_title = "attnstruct course book"
html_static_path = ["_static"]
html_css_files = ["book.css"]
html_extra_path = ["_extra"]  # _extra/data/*.nc -> data/*.nc
html_theme_options = {
    "use_download_button": True,
    "use_fullscreen_button": True,
    "use_repository_button": False,
    "use_issues_button": False,
    "use_edit_page_button": False,
    "use_source_button": False,
    "launch_buttons": {},
    "show_toc_level": 2,
    "icon_links": [],
}
html_context = {"default_mode": "light"}
