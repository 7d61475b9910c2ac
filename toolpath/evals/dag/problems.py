"""Math word problems with exact answers, generated from a seed, for the dag_math benchmark.

Generated rather than shipped: no installable package here carries math word problems with their answers, and a
generated set is the same on every machine for a seed, has answers that are right by construction (fractions,
never rounded), and cannot have leaked into a model's training text. Each kind needs two to four steps that use
each other, so a solution has a graph worth checking:

    shopping   a total from two prices and two quantities            (an integer)
    speed      the average speed over two legs of a trip              (a fraction)
    equation   x in a·x + b = c·x + d                                  (a fraction)
    share      what is left of a whole after two parts are taken      (a fraction)
    discount   a price after a discount and then a tax, in percent    (a fraction)
"""

from __future__ import annotations

import random
from fractions import Fraction

KINDS = ("shopping", "speed", "equation", "share", "discount")


def _shopping(rng: random.Random) -> tuple[str, Fraction]:
    a, b, c, d = rng.randint(2, 15), rng.randint(1, 9), rng.randint(2, 9), rng.randint(2, 9)
    who = rng.choice(["Mia", "Omar", "Lena", "Kofi", "Ines"])
    return (f"A notebook costs {a} dollars and a pen costs {b} dollars. {who} buys {c} notebooks and {d} pens. "
            f"How many dollars does {who} spend in total?", Fraction(c * a + d * b))


def _speed(rng: random.Random) -> tuple[str, Fraction]:
    h, k = rng.randint(1, 4), rng.randint(1, 4)
    a, b = rng.randint(10, 40) * h, rng.randint(10, 40) * k
    return (f"A cyclist rides {a} km in {h} hours and then {b} km in {k} hours. What is the cyclist's average speed "
            "over the whole ride, in km per hour?", Fraction(a + b, h + k))


def _equation(rng: random.Random) -> tuple[str, Fraction]:
    a, c = rng.sample(range(2, 10), 2)
    b, d = rng.randint(-20, 20), rng.randint(-20, 20)

    def side(m: int, n: int) -> str:
        return f"{m}x" + (f" + {n}" if n > 0 else f" - {-n}" if n < 0 else "")

    return f"Solve for x: {side(a, b)} = {side(c, d)}.", Fraction(d - b, a - c)


def _share(rng: random.Random) -> tuple[str, Fraction]:
    p, q = rng.sample(range(3, 10), 2)
    who, other = rng.sample(["Tom", "Ann", "Raj", "Zoe", "Eli"], 2)
    return (f"{who} eats 1/{p} of a pizza and {other} eats 1/{q} of the same pizza. What fraction of the pizza is "
            "left?", 1 - Fraction(1, p) - Fraction(1, q))


def _discount(rng: random.Random) -> tuple[str, Fraction]:
    price, off, tax = rng.randint(2, 30) * 10, rng.choice([10, 20, 25, 30, 40, 50]), rng.choice([5, 8, 10, 20])
    return (f"A jacket costs {price} dollars. Its price is cut by {off} percent, and then a tax of {tax} percent is "
            "added to the reduced price. What is the final price in dollars?",
            price * (1 - Fraction(off, 100)) * (1 + Fraction(tax, 100)))


_MAKE = {"shopping": _shopping, "speed": _speed, "equation": _equation, "share": _share, "discount": _discount}


def problems(n: int, seed: int = 0) -> list[dict]:
    """`n` problems, the kinds in turn: {"id", "kind", "problem", "answer"} with the answer as exact text (`12`,
    `17/4`, `-3/2`)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = KINDS[i % len(KINDS)]
        text, answer = _MAKE[kind](rng)
        out.append({"id": f"dag-{seed}-{i:03d}", "kind": kind, "problem": text, "answer": str(answer)})
    return out
