"""Name -> function tables for getters and metrics, with lazy imports.

Task JSON names a getter by ``type`` (``"vm_file"`` resolves to ``get_vm_file``) and a metric by
``func`` (OSWorld's names). The tables hold ``"module:function"`` strings, so checking that a name
exists (at task load time) imports nothing, and a heavy metric module (openpyxl, python-docx, ...)
is imported only when a task actually uses it.

The tables live with the task format (like Gymnasium's ``envs/registration.py``, below the
environments its entry points name): task validation needs the names, and the entry points are
strings into :mod:`osworld_gym.evaluators`, so this module imports nothing of it.

A getter is ``(ctx: EvalContext, config: dict) -> value``; a metric is
``(result, [expected,] **options) -> float`` in ``[0, 1]``.

>>> has_metric("exact_match"), has_getter("vm_file"), has_getter("get_vm_file")
(True, True, False)
>>> metric("exact_match")("a", {"expected": "a"})
1.0
>>> register_metric("always_one", lambda result, **_: 1.0)
>>> metric("always_one")(None)
1.0
>>> unregister_metric("always_one")
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

Getter = Callable[..., Any]
Metric = Callable[..., float]

_G = "osworld_gym.evaluators.getters"
_M = "osworld_gym.evaluators.metrics"

#: getter name (task JSON ``type``) -> "module:function"
_GETTERS: dict[str, str | Getter] = {
    "vm_file": f"{_G}.file:get_vm_file",
    "cloud_file": f"{_G}.file:get_cloud_file",
    "cache_file": f"{_G}.file:get_cache_file",
    "vm_command_line": f"{_G}.general:get_vm_command_line",
    "vm_command_error": f"{_G}.general:get_vm_command_error",
    "rule": f"{_G}.misc:get_rule",
    "list_directory": f"{_G}.info:get_list_directory",
    "accessibility_tree": f"{_G}.info:get_accessibility_tree",
    "vm_terminal_output": f"{_G}.info:get_vm_terminal_output",
    "rule_relativeTime": f"{_G}.relative_time:get_rule_relativeTime",
    "active_tab_info": f"{_G}.chrome:get_active_tab_info",
    "open_tabs_info": f"{_G}.chrome:get_open_tabs_info",
    "active_url_from_accessTree": f"{_G}.chrome:get_active_url_from_accessTree",
    "enable_do_not_track": f"{_G}.chrome_profile:get_enable_do_not_track",
    "default_search_engine": f"{_G}.chrome_profile:get_default_search_engine",
    "profile_name": f"{_G}.chrome_profile:get_profile_name",
    "bookmarks": f"{_G}.chrome_profile:get_bookmarks",
    "vlc_config": f"{_G}.vlc:get_vlc_config",
    "vlc_playing_info": f"{_G}.vlc:get_vlc_playing_info",
    "chrome_font_size": f"{_G}.chrome_profile:get_chrome_font_size",
    "enable_safe_browsing": f"{_G}.chrome_profile:get_enable_safe_browsing",
    "new_startup_page": f"{_G}.chrome_profile:get_new_startup_page",
    "find_unpacked_extension_path": f"{_G}.chrome_profile:get_find_unpacked_extension_path",
    "find_installed_extension_name": f"{_G}.chrome_profile:get_find_installed_extension_name",
    "data_delete_automacally": f"{_G}.chrome_profile:get_data_delete_automacally",
    "gimp_config_file": f"{_G}.apps:get_gimp_config_file",
    "default_video_player": f"{_G}.apps:get_default_video_player",
    "vm_screen_size": f"{_G}.apps:get_vm_screen_size",
    "vm_window_size": f"{_G}.info:get_vm_window_size",
    "vm_wallpaper": f"{_G}.info:get_vm_wallpaper",
    "audio_in_slide": f"{_G}.slides:get_audio_in_slide",
    "background_image_in_slide": f"{_G}.slides:get_background_image_in_slide",
}

#: metric name (task JSON ``func``) -> "module:function"
_METRICS: dict[str, str | Metric] = {
    "exact_match": f"{_M}.general:exact_match",
    "match_in_list": f"{_M}.general:match_in_list",
    "check_include_exclude": f"{_M}.general:check_include_exclude",
    "check_gnome_favorite_apps": f"{_M}.general:check_gnome_favorite_apps",
    "check_direct_json_object": f"{_M}.general:check_direct_json_object",
    "infeasible": f"{_M}.general:infeasible",
    "compare_text_file": f"{_M}.text:compare_text_file",
    "check_list": f"{_M}.text:check_list",
    "check_json_settings": f"{_M}.text:check_json_settings",
    "compare_table": f"{_M}.table:compare_table",
    "compare_docx_files": f"{_M}.docs:compare_docx_files",
    "compare_pptx_files": f"{_M}.slides:compare_pptx_files",
    "compare_pdfs": f"{_M}.pdf:compare_pdfs",
    "compare_audios": f"{_M}.media:compare_audios",
    "compare_videos": f"{_M}.media:compare_videos",
    "compare_pdf_images": f"{_M}.media:compare_pdf_images",
    "compare_images": f"{_M}.images:compare_images",
    "is_expected_url_pattern_match": f"{_M}.chrome:is_expected_url_pattern_match",
    "is_expected_active_tab": f"{_M}.chrome:is_expected_active_tab",
    "is_expected_active_tab_approximate": f"{_M}.chrome:is_expected_active_tab_approximate",
    "is_expected_tabs": f"{_M}.chrome:is_expected_tabs",
    "is_in_list": f"{_M}.general:is_in_list",
    "is_utc_0": f"{_M}.general:is_utc_0",
    "diff_text_file": f"{_M}.files:diff_text_file",
    "compare_csv": f"{_M}.files:compare_csv",
    "check_csv": f"{_M}.files:check_csv",
    "check_json": f"{_M}.files:check_json",
    "file_contains": f"{_M}.files:file_contains",
    "compare_zip_files": f"{_M}.files:compare_zip_files",
    "compare_docx_tables": f"{_M}.docs_format:compare_docx_tables",
    "compare_line_spacing": f"{_M}.docs_format:compare_line_spacing",
    "compare_font_names": f"{_M}.docs_format:compare_font_names",
    "contains_page_break": f"{_M}.docs_format:contains_page_break",
    "has_page_numbers_in_footers": f"{_M}.docs_format:has_page_numbers_in_footers",
    "is_first_line_centered": f"{_M}.docs_format:is_first_line_centered",
    "compare_subscript_contains": f"{_M}.docs_format:compare_subscript_contains",
    "check_thunderbird_prefs": f"{_M}.apps:check_thunderbird_prefs",
    "check_thunderbird_filter": f"{_M}.apps:check_thunderbird_filter",
    "check_config_status": f"{_M}.apps:check_config_status",
    "check_structure_sim": f"{_M}.gimp:check_structure_sim",
    "check_file_exists_and_structure_sim": f"{_M}.gimp:check_file_exists_and_structure_sim",
    "check_brightness_decrease_and_structure_sim": (
        f"{_M}.gimp:check_brightness_decrease_and_structure_sim"
    ),
    "check_contrast_increase_and_structure_sim": (
        f"{_M}.gimp:check_contrast_increase_and_structure_sim"
    ),
    "check_saturation_increase_and_structure_sim": (
        f"{_M}.gimp:check_saturation_increase_and_structure_sim"
    ),
    "check_image_mirror": f"{_M}.gimp:check_image_mirror",
    "check_image_file_size": f"{_M}.gimp:check_image_file_size",
    "check_image_size": f"{_M}.gimp:check_image_size",
    "check_structure_sim_resized": f"{_M}.gimp:check_structure_sim_resized",
    "check_palette_and_structure_sim": f"{_M}.gimp:check_palette_and_structure_sim",
    "check_green_background": f"{_M}.gimp:check_green_background",
    "check_triangle_position": f"{_M}.gimp:check_triangle_position",
    "check_textbox_on_leftside": f"{_M}.gimp:check_textbox_on_leftside",
    "is_vlc_playing": f"{_M}.vlc:is_vlc_playing",
    "check_qt_bgcone": f"{_M}.vlc:check_qt_bgcone",
    "check_qt_max_volume": f"{_M}.vlc:check_qt_max_volume",
    "check_qt_minimal_view": f"{_M}.vlc:check_qt_minimal_view",
    "check_qt_slider_colours": f"{_M}.vlc:check_qt_slider_colours",
    "check_global_key_play_pause": f"{_M}.vlc:check_global_key_play_pause",
    "check_one_instance_when_started_from_file": (
        f"{_M}.vlc:check_one_instance_when_started_from_file"
    ),
    "is_vlc_recordings_folder": f"{_M}.vlc:is_vlc_recordings_folder",
    "check_play_and_exit": f"{_M}.vlc:check_play_and_exit",
    "is_vlc_fullscreen": f"{_M}.vlc:is_vlc_fullscreen",
    "check_presenter_console_disable": f"{_M}.slides_checks:check_presenter_console_disable",
    "check_auto_saving_time": f"{_M}.slides_checks:check_auto_saving_time",
    "check_slide_orientation_Portrait": f"{_M}.slides_checks:check_slide_orientation_Portrait",
    "check_transition": f"{_M}.slides_checks:check_transition",
    "check_page_number_colors": f"{_M}.slides_checks:check_page_number_colors",
    "check_left_panel": f"{_M}.slides_checks:check_left_panel",
    "check_image_stretch_and_center": f"{_M}.slides_checks:check_image_stretch_and_center",
    "evaluate_presentation_fill_to_rgb_distance": (
        f"{_M}.slides_checks:evaluate_presentation_fill_to_rgb_distance"
    ),
    "check_tabstops": f"{_M}.docs_checks:check_tabstops",
    "find_default_font": f"{_M}.docs_checks:find_default_font",
    "check_highlighted_words": f"{_M}.docs_checks:check_highlighted_words",
    "evaluate_strike_through_last_paragraph": (
        f"{_M}.docs_checks:evaluate_strike_through_last_paragraph"
    ),
    "check_italic_font_size_14": f"{_M}.docs_checks:check_italic_font_size_14",
    "compare_docx_files_and_ignore_new_lines": (
        f"{_M}.docs_checks:compare_docx_files_and_ignore_new_lines"
    ),
    "compare_docx_images": f"{_M}.docs_checks:compare_docx_images",
    "compare_references": f"{_M}.docs_checks:compare_references",
    "is_expected_bookmarks": f"{_M}.misc_checks:is_expected_bookmarks",
    "is_expected_installed_extensions": f"{_M}.misc_checks:is_expected_installed_extensions",
    "check_accessibility_tree": f"{_M}.misc_checks:check_accessibility_tree",
    "check_moved_jpgs": f"{_M}.misc_checks:check_moved_jpgs",
    "run_sqlite3": f"{_M}.misc_checks:run_sqlite3",
    "check_line_number": f"{_M}.misc_checks:check_line_number",
    "check_pdf_pages": f"{_M}.misc_checks:check_pdf_pages",
    "is_in_vm_clickboard": f"{_M}.misc_checks:is_in_vm_clickboard",
    "compare_unique_train_records": f"{_M}.misc_checks:compare_unique_train_records",
    "compare_archive": f"{_M}.misc_checks:compare_archive",
    "check_font_size": f"{_M}.chrome:check_font_size",
    "fuzzy_place_math": f"{_M}.docs_checks:fuzzy_place_math",
    "evaluate_colored_words_in_tables": f"{_M}.docs_checks:evaluate_colored_words_in_tables",
    "compare_image_list": f"{_M}.gimp:compare_image_list",
    "compare_conference_city_in_order": f"{_M}.misc_checks:compare_conference_city_in_order",
}


def _resolve(
    table: dict[str, str | Callable[..., Any]], kind: str, name: str
) -> Callable[..., Any]:
    try:
        target = table[name]
    except KeyError:
        raise KeyError(f"unknown {kind} {name!r}; known: {', '.join(sorted(table))}") from None
    if callable(target):
        return target
    module_name, _, attr = target.partition(":")
    fn = getattr(importlib.import_module(module_name), attr)
    table[name] = fn
    return fn


def getter(name: str) -> Getter:
    """The getter for task JSON ``type`` ``name`` (imports its module on first use).

    Raises:
        KeyError: no such getter.
    """
    return _resolve(_GETTERS, "getter", name)


def metric(name: str) -> Metric:
    """The metric for task JSON ``func`` ``name`` (imports its module on first use).

    Raises:
        KeyError: no such metric.
    """
    return _resolve(_METRICS, "metric", name)


def has_getter(name: str) -> bool:
    """True if ``name`` is a registered getter type (without importing anything)."""
    return name in _GETTERS


def has_metric(name: str) -> bool:
    """True if ``name`` is a registered metric (without importing anything)."""
    return name in _METRICS


def getter_names() -> list[str]:
    """Sorted names of all registered getters."""
    return sorted(_GETTERS)


def metric_names() -> list[str]:
    """Sorted names of all registered metrics."""
    return sorted(_METRICS)


def register_getter(name: str, fn: Getter | str) -> None:
    """Add (or replace) getter ``name``: a callable or a lazy ``"module:function"`` string."""
    _GETTERS[name] = fn


def register_metric(name: str, fn: Metric | str) -> None:
    """Add (or replace) metric ``name``: a callable or a lazy ``"module:function"`` string."""
    _METRICS[name] = fn


def unregister_getter(name: str) -> None:
    """Remove getter ``name`` (no error if absent)."""
    _GETTERS.pop(name, None)


def unregister_metric(name: str) -> None:
    """Remove metric ``name`` (no error if absent)."""
    _METRICS.pop(name, None)
