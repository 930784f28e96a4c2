"""measure: exact unit conversion.

"Convert 7/2 ft to cm." Every factor is an exact rational taken from the definitions the
prompt lists (1 in = 2.54 cm exactly, 1 lb = 453.59237 g exactly, 1 US gal = 231 in^3), so
every answer is an exact fraction. Difficulty: 1 metric prefixes; 2 customary or time
units; 3 from a customary unit to a metric one, with a fractional value; 4 areas (squared
units) across systems, either direction; 5 speeds (length per time) across systems.
"""

from __future__ import annotations

from fractions import Fraction

from oracle.envs.math.exact import ExactAnswerEnvironment, Problem, between, canonical
from oracle.rng import SplitMix64

DEFINITIONS = (
    "Use these exact definitions: 1 km = 1000 m, 1 m = 100 cm, 1 cm = 10 mm, "
    "1 in = 2.54 cm, 1 ft = 12 in, 1 yd = 3 ft, 1 mi = 5280 ft; 1 kg = 1000 g, "
    "1 g = 1000 mg, 1 lb = 453.59237 g, 1 lb = 16 oz; 1 L = 1000 mL, 1 mL = 1 cm^3, "
    "1 gal = 231 in^3, 1 gal = 4 qt, 1 qt = 2 pt, 1 pt = 2 cup; 1 min = 60 s, "
    "1 h = 60 min, 1 day = 24 h, 1 week = 7 day. A unit written u^2 is a square u."
)

_INCH = Fraction(254, 10000)  # metres
_POUND = Fraction(45359237, 100000)  # grams
_GALLON = 231 * (_INCH * 100) ** 3  # millilitres (cubic centimetres)

#: Unit -> size in the base unit of its dimension (m, g, mL, s).
LENGTH = {
    "mm": Fraction(1, 1000),
    "cm": Fraction(1, 100),
    "m": Fraction(1),
    "km": Fraction(1000),
    "in": _INCH,
    "ft": 12 * _INCH,
    "yd": 36 * _INCH,
    "mi": 63360 * _INCH,
}
MASS = {
    "mg": Fraction(1, 1000),
    "g": Fraction(1),
    "kg": Fraction(1000),
    "oz": _POUND / 16,
    "lb": _POUND,
}
VOLUME = {
    "mL": Fraction(1),
    "L": Fraction(1000),
    "gal": _GALLON,
    "qt": _GALLON / 4,
    "pt": _GALLON / 8,
    "cup": _GALLON / 16,
}
TIME = {
    "s": Fraction(1),
    "min": Fraction(60),
    "h": Fraction(3600),
    "day": Fraction(86400),
    "week": Fraction(604800),
}

METRIC = (("mm", "cm", "m", "km"), ("mg", "g", "kg"), ("mL", "L"))
CUSTOMARY = (
    ("in", "ft", "yd", "mi"),
    ("oz", "lb"),
    ("cup", "pt", "qt", "gal"),
    ("s", "min", "h", "day", "week"),
)
CROSS = (
    (("mm", "cm", "m", "km"), ("in", "ft", "yd", "mi")),
    (("g", "kg"), ("oz", "lb")),
    (("mL", "L"), ("cup", "pt", "qt", "gal")),
)
TABLES = {**LENGTH, **MASS, **VOLUME, **TIME}


def _pair(rng: SplitMix64, group: tuple[str, ...]) -> tuple[str, str]:
    first = rng.choice(group)
    second = rng.choice([unit for unit in group if unit != first])
    return first, second


def _cross(rng: SplitMix64, metric: tuple[str, ...], customary: tuple[str, ...]) -> list[str]:
    pair = [rng.choice(metric), rng.choice(customary)]
    rng.shuffle(pair)
    return pair


def _value(rng: SplitMix64, difficulty: int) -> Fraction:
    if difficulty <= 2:
        return Fraction(between(rng, 1, 20 * difficulty * difficulty))
    return Fraction(between(rng, 1, 60), rng.choice((1, 2, 3, 4, 5, 8)))


class MeasureEnvironment(ExactAnswerEnvironment):
    server_name = "measure"
    env_name = "measure_env"
    class_name = "MeasureEnvironment"
    description = "Exact unit conversion (length, mass, volume, time, area, speed)."
    action_title = "MeasureAction"
    observation_title = "MeasureObservation"

    @classmethod
    def generate(cls, rng: SplitMix64, difficulty: int) -> Problem:
        value = _value(rng, difficulty)
        if difficulty == 1:
            source, target = _pair(rng, rng.choice(METRIC))
            factor = TABLES[source] / TABLES[target]
        elif difficulty == 2:
            source, target = _pair(rng, rng.choice(CUSTOMARY))
            factor = TABLES[source] / TABLES[target]
        elif difficulty == 3:
            metric, customary = rng.choice(CROSS)
            source, target = rng.choice(customary), rng.choice(metric)
            factor = TABLES[source] / TABLES[target]
        elif difficulty == 4:
            source, target = _cross(rng, *CROSS[0])
            factor = (LENGTH[source] / LENGTH[target]) ** 2
            source, target = f"{source}^2", f"{target}^2"
        else:
            lengths = _cross(rng, *CROSS[0])
            times = _pair(rng, ("s", "min", "h"))
            factor = (LENGTH[lengths[0]] / TIME[times[0]]) / (LENGTH[lengths[1]] / TIME[times[1]])
            source, target = f"{lengths[0]}/{times[0]}", f"{lengths[1]}/{times[1]}"
        statement = f"Convert {canonical(value)} {source} to {target}.\n{DEFINITIONS}"
        return Problem(statement, canonical(value * factor), "fraction")
