"""Action sets as a specification: what each syntax accepts, what it refuses and why.

Every registered action set describes, parses, samples and renders from one table; the tests
below check exact primitives for valid input, a message naming the problem for invalid input,
render -> parse round trips, and that ``space().sample()`` is always a valid action.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import numpy as np
import osworld_gym.actions as actions_pkg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from osworld_gym.actions import (
    ACTION_SETS,
    ACTION_TYPES,
    PYAUTOGUI_FUNCTIONS,
    SPECIALS,
    UITARS_ACTIONS,
    Computer13ActionSet,
    ParsedAction,
    PyAutoGUIActionSet,
    UITarsActionSet,
    make_action_set,
    smart_resize,
)
from osworld_gym.actions.base import random_primitive
from osworld_gym.actions.computer13 import from_space_sample
from osworld_gym.errors import ActionError
from osworld_gym.protocol.primitives import (
    Click,
    DragTo,
    Hotkey,
    KeyDown,
    KeyUp,
    MouseDown,
    MouseUp,
    MoveTo,
    Press,
    Scroll,
    TypeText,
    Wait,
    validate,
)

PY = PyAutoGUIActionSet()
C13 = Computer13ActionSet()
UI = UITarsActionSet()

# -- the registry: one test over every action set -----------------------------------------------


@pytest.mark.parametrize("name", sorted(ACTION_SETS))
def test_every_action_set_samples_valid_actions_that_round_trip(name):
    action_set = make_action_set(name)
    space = action_set.space()
    space.seed(0)
    for _ in range(150):
        sample = space.sample()
        assert space.contains(sample)
        parsed = action_set.parse(sample)
        assert all(validate(p) == p for p in parsed.primitives)
        again = action_set.parse(action_set.render(parsed))
        assert (again.primitives, again.special) == (parsed.primitives, parsed.special)


@pytest.mark.parametrize("name", sorted(ACTION_SETS))
def test_every_action_set_describes_every_name_its_parser_accepts(name):
    action_set = make_action_set(name)
    text = action_set.describe()
    assert action_set.names(), "the parser table is empty"
    for n in action_set.names():
        assert (f"- {n}:" if name == "computer_13" else f"{n}(") in text, n


@pytest.mark.parametrize("name", sorted(ACTION_SETS))
@pytest.mark.parametrize("special", SPECIALS)
def test_every_action_set_accepts_the_special_strings(name, special):
    action_set = make_action_set(name)
    parsed = action_set.parse(f"  {special}\n")
    assert parsed == ParsedAction((), special, f"  {special}\n")
    assert action_set.parse(action_set.render(parsed)).special == special
    with pytest.raises(ActionError):
        action_set.parse(special.lower() + "!")


def test_make_action_set_passes_screen_size_and_options_and_rejects_unknown_names():
    s = make_action_set("uitars", screen_size=(1280, 720), coordinate_mode="relative1000")
    assert (
        isinstance(s, UITarsActionSet) and s.screen_size == (1280, 720) and s.frame == (1000, 1000)
    )
    with pytest.raises(ValueError, match="unknown action set"):
        make_action_set("claude")
    with pytest.raises(ValueError):
        make_action_set("pyautogui", screen_size=(0, 10))


def test_doctests_of_the_actions_package_pass():
    modules = [actions_pkg] + [
        importlib.import_module(f"osworld_gym.actions.{m.name}")
        for m in pkgutil.iter_modules(actions_pkg.__path__)
    ]
    attempted = 0
    for mod in modules:
        result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS, verbose=False)
        assert result.failed == 0, mod.__name__
        attempted += result.attempted
    assert len(modules) >= 8 and attempted >= 40


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_any_expressible_primitive_renders_and_parses_back_exactly(seed):
    p = random_primitive(np.random.default_rng(seed), (1920, 1080))
    for action_set in (PY, C13, UI):
        try:
            rendered = action_set.render(ParsedAction((p,)))
        except ActionError:
            continue
        assert action_set.parse(rendered).primitives == (p,), (action_set.name, rendered)


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200).filter(lambda t: not t.endswith("\n")))
def test_typed_text_survives_every_syntax(text):
    try:
        p = validate(TypeText(text))
    except ActionError:
        return
    for action_set in (PY, C13, UI):
        assert action_set.parse(action_set.render(ParsedAction((p,)))).primitives == (p,)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=300))
def test_arbitrary_text_parses_or_raises_action_error(text):
    for action_set in (PY, C13, UI):
        try:
            parsed = action_set.parse(text)
        except ActionError:
            continue
        assert all(validate(p) == p for p in parsed.primitives)


# -- pyautogui ------------------------------------------------------------------------------------

PYAUTOGUI_VALID = [
    ("pyautogui.moveTo(100, 200)", [MoveTo(100, 200)]),
    ("pyautogui.moveTo(x=100.4, y=199.6, duration=0.5)", [MoveTo(100, 200)]),
    ("pyautogui.moveTo(1, 2, 0.5, pyautogui.easeInOutQuad)", [MoveTo(1, 2)]),
    ("pyautogui.click()", [Click()]),
    ("pyautogui.click(10, 20, 2, 0.1, 'right')", [Click(10, 20, "right", 2)]),
    ("pyautogui.click(x=10, y=20, clicks=3, button='middle')", [Click(10, 20, "middle", 3)]),
    ("pyautogui.click((10, 20))", [Click(10, 20)]),
    ("pyautogui.click(10, 20, button='secondary')", [Click(10, 20, "right")]),
    ("pyautogui.doubleClick(5, 6)", [Click(5, 6, "left", 2)]),
    ("pyautogui.tripleClick(5, 6)", [Click(5, 6, "left", 3)]),
    ("pyautogui.rightClick(5, 6)", [Click(5, 6, "right", 1)]),
    ("pyautogui.middleClick()", [Click(button="middle")]),
    ("pyautogui.mouseDown(5, 6, 'right')", [MouseDown("right", 5, 6)]),
    ("pyautogui.mouseUp()", [MouseUp()]),
    (
        "pyautogui.moveTo(100, 100)\npyautogui.dragTo(300, 400, 1.0, button='left')",
        [MoveTo(100, 100), DragTo(300, 400)],
    ),
    ("pyautogui.dragTo(300, 400, button='right')", [DragTo(300, 400, "right")]),
    ("pyautogui.dragTo(300, 400, mouseDownUp=False)", [MoveTo(300, 400)]),
    (
        "pyautogui.moveTo(10, 10); pyautogui.moveRel(5, -5); pyautogui.dragRel(0, 10)",
        [MoveTo(10, 10), MoveTo(15, 5), DragTo(15, 15)],
    ),
    (
        "pyautogui.click(10, 10)\npyautogui.move(None, 3)\npyautogui.click(y=50)",
        [Click(10, 10), MoveTo(10, 13), Click(10, 50)],
    ),
    ("pyautogui.scroll(-3)", [Scroll(dy=-3)]),
    ("pyautogui.scroll(5, x=10, y=20)", [Scroll(5, 0, 10, 20)]),
    ("pyautogui.vscroll(-1, 5, 6)", [Scroll(-1, 0, 5, 6)]),
    ("pyautogui.hscroll(2)", [Scroll(dx=2)]),
    ("pyautogui.press('enter')", [Press("enter")]),
    ("pyautogui.press('Enter', presses=3)", [Press("enter", 3)]),
    ("pyautogui.press(['tab', 'enter'])", [Press("tab"), Press("enter")]),
    ("pyautogui.press(['a', 'b'], 2)", [Press("a"), Press("b"), Press("a"), Press("b")]),
    (
        "pyautogui.keyDown('shift'); pyautogui.keyUp(key='shift')",
        [KeyDown("shift"), KeyUp("shift")],
    ),
    ("pyautogui.hotkey('ctrl', 'shift', 't')", [Hotkey(("ctrl", "shift", "t"))]),
    ("pyautogui.hotkey(['ctrl', 'c'], interval=0.1)", [Hotkey(("ctrl", "c"))]),
    ("pyautogui.hotkey('Control', 'ArrowUp')", [Hotkey(("ctrl", "up"))]),
    ("pyautogui.typewrite('hello\\n')", [TypeText("hello\n")]),
    ("pyautogui.write('x<y', interval=0.05)", [TypeText("x<y")]),
    ("pyautogui.write('Grüße 日本 🙂')", [TypeText("Grüße 日本 🙂")]),
    ("pyautogui.typewrite(['a', 'enter'])", [Press("a"), Press("enter")]),
    (
        "import pyautogui\nimport time\npyautogui.click(1, 2)\ntime.sleep(0.5)",
        [Click(1, 2), Wait(0.5)],
    ),
    ("import pyautogui, time\npyautogui.sleep(1)", [Wait(1.0)]),
    ("```python\npyautogui.click(1, 2)\n```", [Click(1, 2)]),
    ('"""Open the file menu."""\n# a comment\npyautogui.press("a")', [Press("a")]),
    ({"command": "pyautogui.click(1, 2)"}, [Click(1, 2)]),
]


@pytest.mark.parametrize(("text", "expected"), PYAUTOGUI_VALID)
def test_pyautogui_valid_code_gives_exact_primitives_and_round_trips(text, expected):
    parsed = PY.parse(text)
    assert list(parsed.primitives) == expected and parsed.special is None
    assert PY.parse(PY.render(parsed)).primitives == parsed.primitives


PYAUTOGUI_INVALID = [
    ("import os", "'import os'"),
    ("from os import system", "from-import"),
    ("import pyautogui as pg", "not 'import pyautogui as pg'"),
    ("os.system('ls')", "os.system(...)"),
    ("pyautogui.__dict__", "attribute access (pyautogui.__dict__)"),
    ("pyautogui.__class__.__init__(1)", "pyautogui.__class__.__init__"),
    ("getattr(pyautogui, 'click')(1, 2)", "a function call is not allowed"),
    ("pyautogui.click(x=__import__('os'), y=1)", "__import__(...)"),
    ("exec('print(1)')", "exec(...)"),
    ("eval('1')", "eval(...)"),
    ("open('/tmp/x', 'w')", "open(...)"),
    ("pyautogui.write(f'{open(1)}')", "f-string"),
    ("pyautogui.click(*[1, 2])", "star-arguments"),
    ("pyautogui.click(**{'x': 1})", "(**kwargs)"),
    ("for i in range(3): pyautogui.click(1, 2)", "for loop"),
    ("while True: pass", "while loop"),
    ("if True: pyautogui.click(1, 2)", "if statement"),
    ("with open('x') as f: pass", "with statement"),
    ("x = 5", "assignment"),
    ("pyautogui.click(lambda: 1)", "lambda"),
    ("pyautogui.click([i for i in range(2)])", "comprehension"),
    ("pyautogui.write('abc'[0])", "subscripting"),
    ("pyautogui.click((x := 5), 1)", "walrus"),
    ("@pyautogui.click\ndef f(): pass", "function definition"),
    ("class A: pass", "class definition"),
    ("pyautogui.click(1 + 1, 2)", "arithmetic"),
    ("pyautogui.click(1, 2, 3, 4, 5, 6, 7, 8, 9)", "too many positional arguments"),
    ("pyautogui.click(1, 2, foo=3)", "unexpected keyword argument 'foo'"),
    ("pyautogui.scroll()", "missing a required argument: 'clicks'"),
    ("pyautogui.locateOnScreen('a.png')", "pyautogui.locateOnScreen() is not supported"),
    ("pyautogui.click('a.png')", "locating an image"),
    ("pyautogui.moveRel(10, 0)", "relative moves need the pointer position"),
    ("pyautogui.click(x=5)", "x and y are both needed"),
    ("pyautogui.press('notakey')", "unknown key 'notakey'"),
    ("pyautogui.hotkey()", "non-empty list of key names"),
    ("pyautogui.click(1, 2, button='side')", "button must be"),
    ("pyautogui.click(1e999, 2)", "x must be finite"),
    ("pyautogui.click(99999999999, 2)", "too large"),
    ("pyautogui.click(1, 2, clicks=5)", "clicks=5 is out of range"),
    ("pyautogui.moveTo(1, 2, tween=print)", "tween must be"),
    ("pyautogui.moveTo(1, 2, duration=-1)", "duration must be a non-negative number"),
    ("time.sleep(60)", "out of range"),
    ("time.sleep(20)\ntime.sleep(20)", "the limit is 30 s"),
    ("time.time()", "time.time() is not supported"),
    ("pyautogui.write('" + "a" * 4097 + "')", "the limit is 4096"),
    (
        "pyautogui.write('" + "a" * 3000 + "')\npyautogui.write('" + "a" * 3000 + "')",
        "the limit is 4096",
    ),
    ("pyautogui.click(1, 2)\n" * 51, "the limit is 50"),
    ("pyautogui.press(['a'] * 2, presses=50)", "arithmetic"),
    ("pyautogui.press(" + repr(["a"] * 64) + ", presses=50)", "more than 256 primitive actions"),
    ("x" * 20_001, "the limit is 20000"),
    ("pyautogui.click(1, 2", "not valid Python syntax"),
    ("(" * 300, "nests brackets more than 64 deep"),
    ("-" * 19_000 + "1", "more than 300 operators"),
    ("", "no pyautogui call"),
    ("pyautogui.click(1, 2)\x00", "null byte"),
    ("pyautogui.click(1, 2)\nx", "line 2: a variable name (x) is not allowed"),
    (42, "must be a string of code"),
]


@pytest.mark.parametrize(("text", "message"), PYAUTOGUI_INVALID)
def test_pyautogui_refuses_with_a_message_naming_the_problem(text, message):
    with pytest.raises(ActionError) as e:
        PY.parse(text)
    assert message in str(e.value)


def test_pyautogui_describe_is_generated_from_the_parser_table():
    text = PY.describe()
    for key, fn in PYAUTOGUI_FUNCTIONS.items():
        assert f"{key}{fn.signature}" in text
    assert "WAIT" in text and "DONE" in text and "FAIL" in text


def test_pyautogui_render_refuses_code_and_a_special_together():
    with pytest.raises(ActionError, match="either code or"):
        PY.render(ParsedAction((Click(1, 2),), "DONE"))


# -- computer_13 ----------------------------------------------------------------------------------


def _a(kind: str, **params) -> dict:
    return {"action_type": kind, "parameters": params}


C13_VALID = [
    (_a("MOVE_TO", x=10, y=20), [MoveTo(10, 20)], None),
    ({"action_type": "MOVE_TO", "x": 10.6, "y": 20}, [MoveTo(11, 20)], None),
    (_a("CLICK"), [Click()], None),
    (_a("CLICK", button="right"), [Click(button="right")], None),
    (_a("CLICK", button="left", num_clicks=2), [Click(clicks=2)], None),
    (_a("CLICK", x=1, y=2), [Click(1, 2)], None),
    (_a("CLICK", x=1, y=2, num_clicks=3), [Click(1, 2, clicks=3)], None),
    (_a("CLICK", button="middle", x=1, y=2), [Click(1, 2, "middle")], None),
    (_a("CLICK", button="middle", x=1, y=2, num_clicks=2), [Click(1, 2, "middle", 2)], None),
    (_a("MOUSE_DOWN"), [MouseDown()], None),
    (_a("MOUSE_UP", button="middle"), [MouseUp("middle")], None),
    (_a("RIGHT_CLICK"), [Click(button="right")], None),
    (_a("RIGHT_CLICK", x=5, y=6), [Click(5, 6, "right")], None),
    (_a("DOUBLE_CLICK", x=5, y=6), [Click(5, 6, "left", 2)], None),
    (_a("DRAG_TO", x=1920, y=1080), [DragTo(1920, 1080)], None),
    (_a("SCROLL", dx=2, dy=-3), [Scroll(dy=-3, dx=2)], None),
    (_a("SCROLL", dy=5), [Scroll(dy=5)], None),
    (_a("TYPING", text="hi\nthere"), [TypeText("hi\nthere")], None),
    (_a("PRESS", key="Enter"), [Press("enter")], None),
    (_a("KEY_DOWN", key="shift"), [KeyDown("shift")], None),
    (_a("KEY_UP", key="shift"), [KeyUp("shift")], None),
    (_a("HOTKEY", keys=["ctrl", "s"]), [Hotkey(("ctrl", "s"))], None),
    (_a("WAIT"), [], "WAIT"),
    ({"action_type": "FAIL"}, [], "FAIL"),
    (_a("DONE"), [], "DONE"),
    ('{"action_type": "CLICK", "parameters": {"x": 3, "y": 4}}', [Click(3, 4)], None),
    ('```json\n{"action_type": "PRESS", "key": "a"}\n```', [Press("a")], None),
    ('"DONE"', [], "DONE"),
]


@pytest.mark.parametrize(("action", "expected", "special"), C13_VALID)
def test_computer_13_valid_actions_give_exact_primitives_and_round_trip(action, expected, special):
    parsed = C13.parse(action)
    assert list(parsed.primitives) == expected and parsed.special == special
    rendered = C13.render(parsed)
    assert isinstance(rendered, dict)
    again = C13.parse(rendered)
    assert (again.primitives, again.special) == (parsed.primitives, parsed.special)


C13_INVALID = [
    ({"action_type": "JUMP"}, "unknown action_type 'JUMP'"),
    ({"action_type": "click"}, "unknown action_type 'click'"),
    ({}, 'no "action_type"'),
    (_a("MOVE_TO"), "MOVE_TO takes (x, y); got no parameters"),
    (_a("CLICK", x=1), "got (x)"),
    (_a("CLICK", num_clicks=2), "got (num_clicks)"),
    (_a("CLICK", x=1, y=2, num_clicks=4), "num_clicks must be 1, 2 or 3"),
    (_a("CLICK", button="side"), "button must be one of"),
    (_a("MOVE_TO", x=5000, y=1), "off the 1920x1080 screen"),
    (_a("MOVE_TO", x=-1, y=1), "off the 1920x1080 screen"),
    (_a("MOVE_TO", x="10", y=1), "x must be a finite number"),
    (_a("DRAG_TO", x=True, y=1), "x must be a finite number"),
    (_a("SCROLL"), "SCROLL takes (dx, dy), or (dx), or (dy)"),
    (_a("SCROLL", dy=1.5), "SCROLL dy must be an int"),
    (_a("SCROLL", dy=1000), "out of range"),
    (_a("TYPING", text=5), "TYPING text must be a string"),
    (_a("TYPING", text="a" * 4097), "the limit is 4096"),
    (_a("PRESS", key="notakey"), "unknown key 'notakey'"),
    (_a("PRESS"), "PRESS takes (key)"),
    (_a("HOTKEY", keys="ctrl+c"), "must be a list of key names"),
    (_a("HOTKEY", keys=[]), "non-empty list"),
    (_a("WAIT", x=1), "WAIT takes no parameters"),
    (
        {"action_type": "CLICK", "parameters": {"x": 1, "y": 2}, "x": 1},
        "put every parameter inside",
    ),
    ({"action_type": "CLICK", "parameters": [1, 2]}, '"parameters" must be a JSON object'),
    ({"action_type": "CLICK", "parameters": {"x": object(), "y": 1}}, "is not JSON data"),
    ("not json", "not valid JSON"),
    ("[1, 2]", "must be a JSON object"),
    ('{"action_type": "CLICK", "x": 1e999, "y": 1}', "finite"),
    ('{"action_type": "CLICK", "x": NaN, "y": 1}', "finite"),
    ("[" * 10_000, "nested too deeply"),
    ("x" * 70_000, "the limit is 65536"),
    (None, "must be a JSON object"),
]


@pytest.mark.parametrize(("action", "message"), C13_INVALID)
def test_computer_13_refuses_with_a_message_naming_the_problem(action, message):
    with pytest.raises(ActionError) as e:
        C13.parse(action)
    assert message in str(e.value)


def test_computer_13_space_samples_convert_to_osworld_dicts():
    space = C13.space()
    space.seed(3)
    kinds = set()
    for _ in range(400):
        d = from_space_sample(space.sample())
        kinds.add(d["action_type"])
        assert C13.parse(d) is not None
    assert kinds == set(ACTION_TYPES)
    no_key = int(space["keys"].nvec[-1]) - 1  # slots 2..6 use this value for "no key"
    sample = {
        **space.sample(),
        "action_type": np.int64(ACTION_TYPES.index("HOTKEY")),
        "keys": np.array([3, 7, no_key, no_key, no_key, no_key]),
    }
    assert len(C13.parse(sample).primitives[0].keys) == 2


def test_computer_13_render_refuses_what_it_cannot_express():
    for p in (
        Wait(1.0),
        Press("a", 2),
        Scroll(dy=1, x=1, y=1),
        MouseDown("left", 1, 1),
        DragTo(1, 1, "right"),
    ):
        with pytest.raises(ActionError, match="cannot express"):
            C13.render(ParsedAction((p,)))
    with pytest.raises(ActionError, match="exactly one primitive"):
        C13.render(ParsedAction((Click(), Click())))


# -- uitars ---------------------------------------------------------------------------------------

UITARS_VALID = [
    (
        "Thought: open it\nAction: click(start_box='<|box_start|>(966,546)<|box_end|>')",
        [Click(960, 540)],
        None,
    ),
    ("Action: click(start_box='(966,546)')", [Click(960, 540)], None),
    ("Action: click(start_box='[956,536,976,556]')", [Click(960, 540)], None),
    ("Action: click(start_box='<point>966 546</point>')", [Click(960, 540)], None),
    ("Action: click(point='<point>966 546</point>')", [Click(960, 540)], None),
    ("Action: click(start_box='<bbox>956 536 976 556</bbox>')", [Click(960, 540)], None),
    ("Action: left_single(start_box='(0,0)')", [Click(0, 0)], None),
    ("Action: left_double(start_box='(966,546)')", [Click(960, 540, "left", 2)], None),
    ("Action: right_single(start_box='(966,546)')", [Click(960, 540, "right")], None),
    ("Action: hover(start_box='(966,546)')", [MoveTo(960, 540)], None),
    (
        "Action: drag(start_box='(0,0)', end_box='(1932,1092)')",
        [MoveTo(0, 0), DragTo(1919, 1079)],
        None,
    ),
    (
        "Action: select(start_box='(0,0)', end_box='(966,546)')",
        [MoveTo(0, 0), DragTo(960, 540)],
        None,
    ),
    ("Action: hotkey(key='ctrl c')", [Hotkey(("ctrl", "c"))], None),
    ("Action: hotkey(key='ctrl+shift+t')", [Hotkey(("ctrl", "shift", "t"))], None),
    ("Action: hotkey(key='arrowleft')", [Hotkey(("left",))], None),
    ("Action: press(key='enter')", [Press("enter")], None),
    (
        "Action: keydown(key='shift')\n\nkeyup(key='shift')",
        [KeyDown("shift"), KeyUp("shift")],
        None,
    ),
    ("Action: type(content='hello')", [TypeText("hello")], None),
    ("Action: type(content='hello\\n')", [TypeText("hello"), Press("enter")], None),
    ("Action: type(content='\\n')", [Press("enter")], None),
    ("Action: type(content='It\\'s')", [TypeText("It's")], None),
    ("Action: type(content='It's')", [TypeText("It's")], None),
    ('Action: type(content="say \\"hi\\"")', [TypeText('say "hi"')], None),
    ("Action: type(content='line1\\nline2\\tend')", [TypeText("line1\nline2\tend")], None),
    ("Action: type(content='C:\\Users\\x')", [TypeText("C:\\Users\\x")], None),
    ("Action: type(content='a\n\nb')", [TypeText("a\n\nb")], None),
    (
        'Action: type(content=\'__import__("os").system("rm -rf /")\')',
        [TypeText('__import__("os").system("rm -rf /")')],
        None,
    ),
    ("Action: scroll(start_box='(966,546)', direction='down')", [Scroll(-5, 0, 960, 540)], None),
    ("Action: scroll(direction='up')", [Scroll(dy=5)], None),
    ("Action: scroll(direction='left')", [Scroll(dx=-5)], None),
    ("Action: scroll(start_box='(966,546)', direction='Right')", [Scroll(0, 5, 960, 540)], None),
    ("Action: wait()", [], "WAIT"),
    ("Action: finished(content='done')", [], "DONE"),
    ("Action: finished()", [], "DONE"),
    ("Action: call_user()", [], "FAIL"),
    ("Action: error_env()", [], "FAIL"),
    (
        (
            "Thought: a\nAction: "
            "click(start_box='(966,546)')\n\ntype(content='abc\\n')\n\nfinished(content='ok')"
        ),
        [Click(960, 540), TypeText("abc"), Press("enter")],
        "DONE",
    ),
    ("Thought: x Action: click(start_box='(1,1)')", [Click(1, 1)], None),
]


@pytest.mark.parametrize(("text", "expected", "special"), UITARS_VALID)
def test_uitars_valid_answers_give_exact_primitives_and_round_trip(text, expected, special):
    parsed = UI.parse(text)
    assert list(parsed.primitives) == expected and parsed.special == special
    again = UI.parse(UI.render(parsed))
    assert (again.primitives, again.special, again.thought) == (
        parsed.primitives,
        parsed.special,
        parsed.thought,
    )


def test_uitars_keeps_the_thought_reflection_and_summary():
    assert UI.parse("Thought: find the menu\nAction: wait()").thought == "find the menu"
    assert UI.parse("Action_Summary: press it\nAction: wait()").thought == "press it"
    t = UI.parse("Reflection: it failed\nAction_Summary: retry\nAction: wait()").thought
    assert t == "Reflection: it failed\nAction_Summary: retry"
    assert UI.parse("Action: wait()").thought is None


UITARS_INVALID = [
    ("Thought: nothing to do", "no 'Action:' found"),
    ("Action: ", "followed by nothing"),
    ("Action: jump()", "unknown action 'jump'"),
    ("Action: click('(1,2)')", "use keyword arguments"),
    ("Action: click(start_box=(1,2))", "start_box must be a quoted string"),
    ("Action: click(start_box=__import__('os'))", "__import__(...)"),
    ("Action: click()", "missing start_box"),
    ("Action: click(start_box='(1,2)', foo='x')", "does not take 'foo'"),
    ("Action: click(start_box='(1,1)', point='(2,2)')", "start_box given twice"),
    ("Action: click(start_box='here')", "cannot read a point"),
    ("Action: click(start_box='(-5,10)')", "cannot read a point"),
    ("Action: click(start_box='(2000,10)')", "outside the model's 1932x1092 image frame"),
    ("Action: scroll(direction='sideways')", "scroll direction must be"),
    ("Action: hotkey(key='ctrl notakey')", "unknown key 'notakey'"),
    ("Action: hotkey(key='')", "hotkey needs keys"),
    ("Action: finished()\n\nclick(start_box='(1,1)')", "must be the last action"),
    ("Action: os.system('x')", "each action must be one call"),
    ("Action: click(start_box='(1,1)')\nclick(start_box='(2,2)')", "not valid Python syntax"),
    ("Action: click(start_box='(1,1)', **{'a': 1})", "keyword unpacking"),
    ("Action: " + "wait()\n\n" * 51, "the limit is 50"),
    ("Action: type(content='" + "a" * 4097 + "')", "the limit is 4096"),
    ("Action: click(start_box='(1,1)')\x00", "null byte"),
    ("x" * 20_001, "the limit is 20000"),
    ({"action": "click"}, "must be text"),
]


@pytest.mark.parametrize(("text", "message"), UITARS_INVALID)
def test_uitars_refuses_with_a_message_naming_the_problem(text, message):
    with pytest.raises(ActionError) as e:
        UI.parse(text)
    assert message in str(e.value)


def test_uitars_describe_is_the_computer_prompt_with_an_instruction_slot():
    text = UI.describe()
    for name in UITARS_ACTIONS:
        assert f"{name}(" in text
    assert "Thought:" in text and "Action:" in text and "<|box_start|>(x1,y1)<|box_end|>" in text
    filled = text.format(instruction="Open the terminal")  # no other braces in the template
    assert filled.rstrip().endswith("Open the terminal")
    assert UI.prompt("{not a slot}").rstrip().endswith("{not a slot}")


def test_smart_resize_matches_qwen25vl():
    assert smart_resize(1080, 1920, max_pixels=2116800) == (1092, 1932)
    assert smart_resize(1080, 1920) == (1092, 1932)
    assert smart_resize(720, 1280, max_pixels=2116800) == (728, 1288)
    with pytest.raises(ValueError):
        smart_resize(1, 1000)


@settings(max_examples=200, deadline=None)
@given(h=st.integers(28, 8000), w=st.integers(28, 8000))
def test_smart_resize_keeps_multiples_of_28_within_pixel_bounds(h, w):
    if max(h, w) / min(h, w) > 200:
        return
    rh, rw = smart_resize(h, w, max_pixels=2116800)
    assert rh % 28 == 0 and rw % 28 == 0
    assert 3136 <= rh * rw <= 2116800


def test_uitars_coordinate_modes_map_the_model_frame_to_the_screen():
    rel = UITarsActionSet(coordinate_mode="relative1000")
    assert rel.parse("Action: click(start_box='(500,500)')").primitives == (Click(960, 540),)
    assert rel.parse("Action: click(start_box='(1000,1000)')").primitives == (Click(1919, 1079),)
    with pytest.raises(ActionError, match="1000x1000 image frame"):
        rel.parse("Action: click(start_box='(1001,5)')")
    absolute = UITarsActionSet(coordinate_mode="absolute")
    assert absolute.parse("Action: click(start_box='(100,200)')").primitives == (Click(100, 200),)
    small = UITarsActionSet(screen_size=(1280, 720))
    assert small.frame == (1288, 728)
    assert small.parse("Action: click(start_box='(644,364)')").primitives == (Click(640, 360),)
    with pytest.raises(ValueError, match="coordinate_mode"):
        UITarsActionSet(coordinate_mode="pixels")  # type: ignore[arg-type]


def test_uitars_render_refuses_what_it_cannot_express():
    for p in (
        Click(),
        Click(1, 1, "middle"),
        Click(1, 1, "left", 3),
        Wait(1.0),
        Scroll(dy=2),
        Press("a", 3),
        MouseDown(),
        DragTo(5, 5),
    ):
        with pytest.raises(ActionError, match="cannot express"):
            UI.render(ParsedAction((p,)))


def test_text_spaces_accept_any_unicode_and_sample_valid_actions():
    for action_set in (PY, UI):
        space = action_set.space()
        assert (
            space.contains("日本語 🙂")
            and not space.contains(b"x")
            and not space.contains("x" * 20_001)
        )
        space.seed(5)
        texts = [space.sample() for _ in range(50)]
        assert all(isinstance(action_set.parse(t), ParsedAction) for t in texts)
        assert len(set(texts)) > 25
