"""Chat templates are bounded (tokenizer/chat_bounds.py, chat_sandbox.py, chat_sizes.py): a
template is code from whoever published the model, so each way a rendering or its compilation
can grow a value is held to the rendering's budget of characters and to its CPU time, refused in
one line naming the template's file before the value is made, and the memory Python allocates for
a refused template stays within the order of the budget (tens of MB, not the GBs it asks for).
Below the bounds, every measured operation renders as transformers renders it."""

import gc
import re
import shutil
import threading
import time
import tracemalloc

import pytest

from gptkit.tokenizer import Tokenizer
from gptkit.tokenizer.chat import TEMPLATE_FILE, ChatError, ChatTemplate
from gptkit.tokenizer.chat_bounds import SIZE_LIMIT
from tests.unit.test_chat_template import gptkit_tokenizer

# The budget is SIZE_LIMIT characters or items (and 16 for each character of the conversation,
# a few here): a list of that many items takes 8 bytes an item.
PEAK = 8 * SIZE_LIMIT
LIMIT = r"past its limit of 4,19\d,\d{3} \(4,194,304 and 16 for each character of the messages"
PAST = r"(makes a value of [\d,]+ characters|makes [\d,]+ characters in all)"
DOUBLING = "{{% set ns = namespace(v={start}) %}}{{% for i in range(40) %}}{{% set ns.v = {step} %}}{{% endfor %}}"
GROWTH = {  # each way to grow a value: (the template, what its refusal says)
    # strings and lists doubled by operators, macros and blocks
    "tilde-doubling": (DOUBLING.format(start="'ab'", step="ns.v ~ ns.v"), PAST),
    "plus-doubling": (DOUBLING.format(start="'ab'", step="ns.v + ns.v"), PAST),
    "list-plus-doubling": (DOUBLING.format(start="[1]", step="ns.v + ns.v"), PAST),
    "macro-doubling": (
        "{% macro twice(s) %}{{ s }}{{ s }}{% endmacro %}" + DOUBLING.format(start="'ab'", step="twice(ns.v)"),
        PAST,
    ),  # fmt: skip
    "set-block-doubling": (
        "{% set ns = namespace(v='ab') %}{% for i in range(40) %}{% set x %}{{ ns.v }}{{ ns.v }}{% endset %}"
        "{% set ns.v = x %}{% endfor %}",
        PAST,
    ),
    "times": ("{{ 'x' * 100000000 }}", "makes a value of 100,000,000 characters"),
    "list-times": ("{{ [messages] * 100000000 }}", "makes a value of 100,000,000 characters"),
    # many copies kept: each is within the budget, all of them together are not
    "copies-kept": (
        "{% set ns = namespace(s='x' * 1000000, l=[]) %}{% for i in range(100000) %}"
        "{% set ns.l = ns.l + [ns.s ~ i] %}{% endfor %}",
        "characters in all",
    ),
    "slices-kept": (
        "{% set ns = namespace(s='x' * 1000000, l=[]) %}{% for i in range(100000) %}"
        "{% set ns.l = ns.l + [ns.s[i:]] %}{% endfor %}",
        "characters in all",
    ),
    "call-arguments": (
        "{% macro f() %}{{ varargs|length }}{% endmacro %}{% set l = [1] * 1000000 %}{{ f(*l) }}",
        "makes a value of 4,000,000 characters",
    ),
    # numbers
    "number-squaring": (
        DOUBLING.format(start="3", step="ns.v * ns.v"),
        "makes a number of [\\d,]+ digits, past the limit of 4,300",
    ),  # fmt: skip
    "power": ("{{ 9 ** 999999999 }}", "makes a number of 903,089,999 digits"),
    "round": ("{{ 5|round(-100000000) }}", "makes a number of 100,000,001 digits"),
    # widths, counts and separators given to filters and methods
    "center": ("{{ 'x'|center(100000000) }}", "makes a value of 100,000,000 characters"),
    "ljust": ("{{ 'x'.ljust(100000000) }}", "makes a value of 100,000,000 characters"),
    "zfill": ("{{ '1'.zfill(100000000) }}", "makes a value of 100,000,000 characters"),
    "indent": ("{{ ('x\\n' * 1000)|indent(1000000) }}", "makes a value of 1,000,002,000 characters"),
    "indent-alone": ("{{ ''|indent(100000000) }}", "makes a value of 100,000,000 characters"),
    "wordwrap": ("{{ ('a ' * 1000)|wordwrap(1, wrapstring='x' * 100000) }}", "makes a value of 99,901,000 characters"),
    "replace-chain": (
        "{{ ('x' * 10)" + "|replace('x', 'x' * 10)" * 8 + " }}",
        "makes a value of 10,000,000 characters",
    ),
    "replace-method": ("{{ ('x' * 1000).replace('x', 'x' * 100000) }}", "makes a value of 100,000,000 characters"),
    "join": ("{{ (['a'] * 1000)|join('x' * 100000) }}", "makes a value of 99,901,000 characters"),
    "join-method": ("{{ ('x' * 100000).join(['a'] * 1000) }}", "makes a value of 99,901,000 characters"),
    "expandtabs": ("{{ ('\\t' * 1000).expandtabs(1000000) }}", "may make a value of up to 1,000,000,000 characters"),
    "translate": (
        "{{ ('a' * 1000).translate({97: 'x' * 100000}) }}",
        "may make a value of up to 100,000,000 characters",
    ),
    "urlize": (
        "{{ ('a.com ' * 1000)|urlize(target='x' * 100000) }}",
        "may make a value of up to 100,052,000 characters",
    ),
    "strftime": ("{{ strftime_now('%Y' * 100000) }}", "may make a value of up to 51,200,000 characters"),
    "to-bytes": ("{{ (1).to_bytes(100000000, 'big') }}", "makes a value of 100,000,000 characters"),
    "batch": ("{{ [1]|batch(100000000, 0)|list }}", "makes a value of 100,000,000 characters"),
    "slice": ("{{ [1]|slice(100000000)|list }}", "makes a value of 100,000,000 characters"),
    "sum-of-lists": ("{{ ([[1] * 1000] * 10000)|sum(start=[]) }}", "makes a value of 10,000,000 characters"),
    "tojson-indent": ("{{ messages|tojson(indent=200000000) }}", "makes a value of [\\d,]{11} characters"),
    # format specs, % and str.format
    "format-filter": ("{{ '%100000000d'|format(1) }}", "makes a value of 100,000,011 characters"),
    "percent": ("{{ '%100000000d' % 1 }}", "makes a value of 100,000,011 characters"),
    "percent-star": ("{{ '%*d' % (100000000, 1) }}", "makes a value of 100,000,003 characters"),
    "percent-precision": ("{{ '%.100000000f' % 1.5 }}", "makes a value of 100,000,014 characters"),
    "percent-repeated": ("{{ ('%s' * 1000) % ((('x' * 100000),) * 1000) }}", "makes a value of 100,002,000 characters"),
    "format-width": ("{{ '{:>100000000}'.format('x') }}", "makes a value of 100,000,000 characters"),
    "format-precision": ("{{ '{:.100000000f}'.format(1.5) }}", "makes a value of 100,000,000 characters"),
    "format-repeated": ("{{ ('{0}' * 1000).format('x' * 100000) }}", "makes a value of 100,000 characters with"),
    "format-map": ("{{ '{a:>100000000}'.format_map({'a': 1}) }}", "makes a value of 100,000,000 characters"),
    # the text of a list that holds one long string many times over
    "list-written": ("{{ ['x' * 1000000] * 1000 }}", "makes a value of 4,002,002 characters"),
    "list-tilde": ("{{ 'a' ~ (['x' * 1000000] * 1000) }}", "makes a value of 4,002,003 characters"),
    "list-string": ("{{ (['x' * 1000000] * 1000)|string }}", "makes a value of 4,002,002 characters"),
    "list-tojson": ("{{ (['x' * 1000000] * 1000)|tojson }}", "makes a value of 4,002,002 characters"),
    "list-pprint": ("{{ (['x' * 1000000] * 1000)|pprint }}", "may make a value of up to"),
    "list-sorted": ("{{ (['x' * 1000000] * 1000)|sort }}", "makes a value of 4,002,002 characters"),
    # what jinja would fold while compiling, reached
    "folded-center": ("{{ 'x'|center(1000000000) }}", "makes a value of 1,000,000,000 characters"),
}


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tokenizer")
    gptkit_tokenizer(directory)
    return directory


def with_template(tokenizer_dir, directory, source):
    """The tokenizer of `tokenizer_dir` in `directory`, with the chat template `source` beside it."""
    shutil.copy(tokenizer_dir / "tokenizer.json", directory / "tokenizer.json")
    (directory / TEMPLATE_FILE).write_text(source, encoding="utf-8")
    return directory / "tokenizer.json"


def load_measured(path):
    """(ChatTemplate.beside `path`, or the ChatError it raised; the peak of Python's allocations)."""
    tracemalloc.start()
    try:
        return ChatTemplate.beside(path), tracemalloc.get_traced_memory()[1]
    except ChatError as e:
        return e, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("source, needle", GROWTH.values(), ids=GROWTH.keys())
def test_each_way_to_grow_a_value_is_refused_before_it_is_made(tokenizer_dir, tmp_path, source, needle):
    """At load (the probe conversation renders), in one line naming the template file and the
    bound, with at most about the budget allocated."""
    path = with_template(tokenizer_dir, tmp_path, source)
    error, peak = load_measured(path)
    assert isinstance(error, ChatError), "accepted"
    assert str(error).startswith(f"{tmp_path / TEMPLATE_FILE}: the rendering ") and "\n" not in str(error)
    assert error.where == str(tmp_path / TEMPLATE_FILE)
    assert re.search(needle, error.reason), error.reason
    if "digits" not in needle:
        assert re.search(LIMIT, error.reason), error.reason
    assert peak < PEAK, f"{peak / 2**20:.0f} MiB allocated"


@pytest.mark.parametrize(
    "source, needle",
    [
        (
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            "the rendering takes more than 1 s of CPU time, the limit",
        ),
        ("{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}", "s of CPU time"),
        ("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", "characters"),
        ("x" * (SIZE_LIMIT + 1), "the chat template has more than 4,194,304 characters, the limit"),
        ("", "the chat template is empty"),
        (" \n\t", "the chat template is empty"),
    ],
    ids=["loops", "recurses", "writes", "too-long", "empty", "blank"],
)
def test_a_template_past_the_bounds_is_refused_at_once(tokenizer_dir, tmp_path, source, needle):
    """At load, in one line naming the template file."""
    path = with_template(tokenizer_dir, tmp_path, source)
    with pytest.raises(ChatError, match=rf"^{tmp_path / TEMPLATE_FILE}: .*{needle}") as e:
        ChatTemplate.beside(path)
    assert "\n" not in str(e.value) and e.value.where == str(tmp_path / TEMPLATE_FILE)


def test_compiling_a_template_is_bounded_too(tokenizer_dir, tmp_path, monkeypatch):
    """The first rendering compiles the template, under the same CPU bound: a long one is stopped
    there. The bound is made small here, so that the test does not depend on this machine's speed."""
    import gptkit.tokenizer.chat_bounds as bounds

    monkeypatch.setattr(bounds, "RENDER_SECONDS", 0.05)
    path = with_template(tokenizer_dir, tmp_path, "{{ a }}" * 100_000)
    with pytest.raises(ChatError, match=rf"^{tmp_path / TEMPLATE_FILE}: .*s of CPU time"):
        ChatTemplate.beside(path)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_rendering_is_stopped_even_where_its_first_stop_is_dropped(tokenizer_dir, tmp_path, monkeypatch):
    """The stop is an exception raised in the rendering's thread; one that lands in a garbage
    collector's callback is dropped there (hypothesis installs such a callback). The watchdog raises
    again while the rendering runs on. Here a callback, run at once in the rendering, takes the
    first stops: it runs for 0.4 s of CPU, past the (small) bound."""
    import gptkit.tokenizer.chat_bounds as bounds

    monkeypatch.setattr(bounds, "RENDER_SECONDS", 0.05)
    path = with_template(
        tokenizer_dir, tmp_path, "{% for i in range(100000) %}{% for j in range(100) %}{% endfor %}{% endfor %}"
    )
    threshold, began, burnt = gc.get_threshold(), [], []

    def slow_once(phase, info):
        if burnt or bounds._CURRENT.get() is None:
            return
        began.append(time.thread_time())
        if began[-1] - began[0] > 0.02:  # the watchdog watches the rendering by now
            burnt.append(phase)
            gc.set_threshold(*threshold)
            while time.thread_time() < began[-1] + 0.4:
                pass

    gc.callbacks.append(slow_once)
    gc.set_threshold(1)  # collections at once, in the rendering
    try:
        with pytest.raises(ChatError, match=rf"^{tmp_path / TEMPLATE_FILE}: .*s of CPU time"):
            ChatTemplate.beside(path)
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(slow_once)
    assert burnt


def test_nothing_of_a_template_runs_while_it_compiles(tokenizer_dir, tmp_path):
    """jinja's optimizer folded constants while compiling: a filter's output made even in a branch
    never taken, outside any bound. Here what is never reached is never made."""
    path = with_template(
        tokenizer_dir,
        tmp_path,
        "{% if false %}{{ 'x'|center(1000000000) }}{% set a = 'x'|center(1000000000) %}{% endif %}"
        "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endfor %}",
    )
    template, peak = load_measured(path)
    assert template.render([{"role": "user", "content": "hi"}]) == "<|user|>hi<|end|>"
    assert peak < PEAK


def test_a_template_that_hangs_or_grows_on_some_conversations_is_stopped_there(tokenizer_dir, tmp_path):
    """The bounds hold for each rendering, in any thread (a server renders in its request's), and
    scale with the conversation: a long one renders."""
    path = with_template(
        tokenizer_dir,
        tmp_path,
        "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>{% if m.content == 'spin' %}"
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{% endif %}"
        "{% if m.content == 'wide' %}{{ messages|tojson(indent=200000000) }}{% endif %}{% endfor %}",
    )
    tokenizer, template = Tokenizer.from_file(path), ChatTemplate.beside(path)
    long = "word " * 1_000_000  # 5 MB: more than the fixed part of the budget
    assert template.render([{"role": "user", "content": long}]) == f"<|user|>{long}<|end|>"
    outcome = []

    def ask(content):
        try:
            template.prompt_ids(tokenizer, [{"role": "user", "content": content}])
        except ChatError as e:
            outcome.append(e.reason)

    for content in ("spin", "wide"):
        thread = threading.Thread(target=ask, args=(content,))
        thread.start()
        thread.join(30)
    assert outcome[0] == "the rendering takes more than 1 s of CPU time, the limit"
    assert outcome[1].startswith("the rendering makes a value of ") and "past its limit" in outcome[1]
    assert template.render([{"role": "user", "content": "fine"}]) == "<|user|>fine<|end|>"  # and it goes on


# A template that takes every measured path at small sizes.
EVERY_PATH = (
    "{% set ns = namespace(s='ab', l=[1], n=3) %}{% macro twice(x) %}{{ x }}{{ x }}{% endmacro %}"
    "{% for m in messages %}"
    "[{{ m.content|center(12) }}|{{ '%5d|%-4s|%.2f|%(x)s' % (loop.index, m.role, 1.5, 0) if false else "
    "'%5d|%-4s|%.2f' % (loop.index, m.role, 1.5) }}|{{ '%(r)s=%(i)03d' % {'r': m.role, 'i': loop.index} }}"
    "|{{ '{:>6}|{:.3f}|{}'.format(m.role, 2.25, [1, 'a']) }}|{{ '{r}:{i:x}'.format_map({'r': m.role, 'i': 255}) }}"
    "|{{ m.content|replace('a', 'AA') }}|{{ m.content.replace('e', 'E', 1) }}|{{ '%s%%'|format(5) }}"
    "|{{ ('a\nb\n\nc')|indent(3) }}|{{ ('a\nb\n\nc')|indent('> ', first=true, blank=true) }}"
    "|{{ m.content|wordwrap(5, wrapstring='<br>') }}|{{ m.content|wordwrap(4) }}"
    "|{{ messages|tojson(indent=2) }}|{{ messages|tojson(separators=(',', ':')) }}|{{ m|tojson }}"
    "|{{ messages|join(', ', attribute='role') }}|{{ [1, 2, 3]|join('-') }}|{{ '-'.join(['x', 'y']) }}"
    "|{{ [[1], [2, 3]]|sum(start=[]) }}|{{ [1, 2, 3]|sum }}|{{ [(1,), (2,)]|sum(start=()) }}"
    "|{{ [1, 2, 3, 4, 5]|batch(2, 0)|list }}|{{ [1, 2, 3, 4, 5]|slice(3, 'x')|list }}"
    "|{{ 'a' ~ [1, 'b'] ~ {'k': none} ~ 3 }}|{{ [1, [2, 'x']]|pprint }}"
    "|{{ 'see www.example.com'|urlize(target='_blank') }}|{{ 3.14159|round(2) }}|{{ 1234|round(-2) }}"
    "|{{ 'ab'.ljust(5, '.') }}{{ 'ab'.rjust(5) }}{{ '7'.zfill(3) }}{{ 'a\tb'.expandtabs(4) }}"
    "|{{ 'abc'.translate({97: 'xy'}) }}|{{ (255).to_bytes(2, 'big') }}|{{ m.content[1:4] }}{{ m.content[::-1] }}"
    "|{{ twice(m.role) }}{% set b %}{{ m.role }}!{% endset %}{{ b }}{% filter upper %}{{ m.role }}{% endfilter %}"
    "|{{ ns.s + ns.s }}{{ ns.l + [2] }}{{ ns.n * ns.n }}{{ 2 ** 10 }}{{ 'x' * 3 }}{{ [0] * 2 }}{{ 7 % 3 }}"
    "|{{ (messages|map(attribute='role')|list)|sort|unique|list }}{{ messages|max(attribute='content') }}"
    "|{{ 'aXbXc'.split('X') }}{{ messages[-1:] }}{{ range(3)|list }}{{ [1]|string }}{{ '<a>'|e }}"
    "{% endfor %}"
)


def test_below_the_bounds_every_measured_operation_renders_as_transformers_renders_it(tokenizer_dir, tmp_path):
    transformers = pytest.importorskip("transformers")
    path = with_template(tokenizer_dir, tmp_path, EVERY_PATH)
    theirs = transformers.PreTrainedTokenizerFast(tokenizer_file=str(path), chat_template=EVERY_PATH)
    messages = [{"role": "user", "content": "hello there, a cat"}, {"role": "assistant", "content": "a reply"}]
    assert ChatTemplate.beside(path).render(messages) == theirs.apply_chat_template(messages, tokenize=False)
