"""Metrics: small pure functions scoring a getter's value against the expected one.

Each is ``metric(result, [expected,] **options) -> float`` in ``[0, 1]`` with OSWorld's name and
keyword arguments, so task JSON works unchanged. A ``None`` result (the file the agent should
have produced does not exist) scores 0; an unreadable *gold* file raises (no trustworthy score).
Modules group metrics by the libraries they need; heavy libraries are imported inside the
functions and the modules themselves lazily through :mod:`osworld_gym.tasks.evaluator_registry`:

* :mod:`.general`: values, strings, JSON objects, ``infeasible`` (standard library only);
* :mod:`.text`: text files, line patterns, JSON settings files;
* :mod:`.table` (+ :mod:`.table_props`): ``compare_table`` (openpyxl);
* :mod:`.docs`: ``compare_docx_files`` (python-docx, lxml); :mod:`.slides`:
  ``compare_pptx_files`` (python-pptx); :mod:`.pdf`: ``compare_pdfs`` (pypdf);
* :mod:`.images`: ``compare_images`` (SSIM in numpy); :mod:`.chrome`: URL, tab and
  font-size checks;
* :mod:`.table_cells`: cell values read from the sheet XML, as OSWorld reads them;
* :mod:`.docs_format`, :mod:`.docs_checks`: docx/odt structure and formatting checks;
* :mod:`.slides_checks`: smaller presentation and LibreOffice-settings checks;
* :mod:`.files`: text diffs, CSV, JSON, zip archives; :mod:`.apps`: Thunderbird prefs and
  filters, GIMP's config; :mod:`.gimp`: image-editing checks; :mod:`.vlc`: vlcrc and
  playback status; :mod:`.misc_checks`: bookmarks, accessibility tree, sqlite, archives, ...;
* :mod:`.match`: the shared ``{"method", "ref"}`` rule language and fuzzy ratio;
  :mod:`.options`: which OSWorld options a metric honours.

Where OSWorld's own code raises (unparsable text, a missing file), each metric decides and
says so in its docstring: the agent's output missing or malformed scores 0; a gold file or
rule the judge cannot use raises (an evaluator error, never a 0). OSWorld's quirks are kept
and documented where they decide a score ("Quirk kept").
"""
