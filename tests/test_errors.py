from generator.errors import MESSAGE_LIMIT, one_line


def test_one_line_collapses_whitespace_and_names_a_silent_exception() -> None:
    assert one_line(ValueError("bad\n  value\tthere")) == "bad value there"
    assert one_line(KeyError()) == "KeyError"
    assert one_line("") == ""


def test_one_line_cuts_at_the_limit_unless_told_otherwise() -> None:
    long = "x" * (MESSAGE_LIMIT + 50)
    assert one_line(long) == "x" * (MESSAGE_LIMIT - 3) + "..."
    assert one_line(long, limit=None) == long
