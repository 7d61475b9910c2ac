"""Numbers in words and in digits, both ways, and the choice scorer reading "seven" as the option "7"."""

import pytest

from toolpath.evals.scorers import choice
from toolpath.number_words import digits, in_words, spoken


@pytest.mark.parametrize("text, expected", [
    ("The number you need is seven.", "The number you need is 7."),
    ("forty-two and Ninety nine", "42 and 99"),
    ("four five six", "4 5 6"),  # digits read one by one stay apart (word2number sums them to 26)
    ("one hundred and five", "105"),
    ("two and three", "2 and 3"),
    ("two thousand three hundred and forty one", "2341"),
    ("one million two hundred thousand", "1200000"),
    ("one thousand two thousand", "1000 2000"),
    ("sevens are not numbers", "sevens are not numbers"),
])
def test_digits_writes_number_words_as_digits(text, expected):
    assert digits(text) == expected


def test_in_words_and_digits_are_inverses():
    assert in_words(42) == "forty two" and spoken("is 1,200 or 3.5") == "is one thousand two hundred or 3.5"
    assert all(digits(in_words(n)) == str(n) for n in [*range(0, 2000, 7), 10**6, 987_654_321_012])
    with pytest.raises(ValueError, match="outside"):
        in_words(-1)


def test_choice_reads_a_number_in_words_as_the_option_in_digits():
    opts = {"scoring": "toolpath", "choices": ["12", "7", "99", "3"]}
    assert choice("The number you need is seven.", "B", opts) == 1.0
    assert choice("ninety-nine", "C", opts) == 1.0
    assert choice("seventy", "B", opts) == 0.0  # 70 is no option
    assert choice("The number you need is seven.", "B", {**opts, "scoring": "official"}) == 0.0
