"""Wordle: guess a hidden five-letter word in a few tries from per-letter feedback.

The word list is embedded (a few hundred common English words) so the game needs no data
files and every process agrees on it; the answer is drawn from the list by a splitmix64
stream of the seed. An invalid guess (not five letters, not in the list, or breaking the
hard-mode rule) is answered with `valid: false` and does not use up a guess, because a
typo by a language model should cost feedback, not the game; a cap on invalid attempts
keeps the episode bounded.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from oracle.base import ActionField, Environment, ExecutionError, JsonObject, Outcome, ResetRequest
from oracle.envs import _gamekit as kit
from oracle.rng import SplitMix64, derive_seed

_WORD_BLOCK = """
    about above abuse actor acute admit adopt adult after again agent agree ahead alarm album
    alert alike alive allow alone along alter among anger angle angry apart apple apply arena
    argue arise array aside asset audio audit avoid award aware badly baker basic basis beach
    began begin being below bench birth black blade blame blank blast blend bless blind block
    blood bloom board boast bonus boost booth bound brain brake brand brave bread break breed
    brick bride brief bring broad broke brook brown brush build built bunch burst buyer cabin
    cable camel candy cargo carry catch cause cedar chain chair chalk charm chart chase cheap
    check cheek cheer chess chest chief child chill choir chose civil claim clash class clean
    clear clerk click cliff climb clock close cloth cloud coach coast could count court cover
    crack craft crane crash crazy cream creek crime crisp cross crowd crown crude crush curve
    cycle daily dairy dance dealt death debut decay delay delta dense depth devil diary dirty
    doing doubt dough dozen draft drain drama drank drawn dream dress dried drift drill drink
    drive drove dwarf dying eager eagle early earth eight elbow elder elite empty enemy enjoy
    enter entry equal error essay event every exact exist extra fable faint faith false fancy
    fault feast fence ferry fever fiber field fifth fifty fight final first flame flash fleet
    flesh float flock flood floor flour fluid flute focus force forge forth forty forum found
    frame fraud fresh front frost fruit fully funny gauge ghost giant given glass gleam globe
    glory glove going grace grade grain grand grant grape graph grasp grass grave great greed
    green greet grief grill grind gross group grove grown guard guess guest guide habit happy
    harsh haven heart heavy hedge hello hence honey honor horse hotel house hover human humor
    ideal image index inner input irony issue ivory jelly jewel joint judge juice knife knock
    known label labor large laser later laugh layer learn lease least leave legal lemon level
    light limit linen local lodge logic loose lower loyal lucky lunar lunch magic major maker
    maple march marsh match maybe mayor meant medal media melon mercy merit metal might minor
    mixed model money month moral motor mount mouse mouth movie music naval nerve never night
    noble noise north noted novel nurse occur ocean offer often olive onion opera orbit order
    other ought ounce outer owner paint panel paper party pasta patch pause peace peach pearl
    pedal penny phase phone photo piano piece pilot pitch place plain plane plant plate plaza
    plead point polar porch pound power press price pride prime print prior prize probe proof
    proud prove pulse punch pupil quart queen quest quick quiet quite quote radar radio raise
    rally ranch range rapid ratio raven reach react ready realm rebel refer relax reply ridge
    rifle right rigid rival river roast robin robot rocky rough round route royal rural salad
    salon sauce scale scarf scene scent scope score scout scrap sense serve seven shade shake
    shall shape share shark sharp sheep sheet shelf shell shift shine shirt shock shoot shore
    short shout shown sight silly since skill skirt slate sleep slice slide slope small smart
    smile smoke snack snake solar solid solve sorry sound south space spare spark speak spear
    speed spell spend spent spice spine split spoke spoon sport spray squad stack staff stage
    stain stair stake stamp stand stare start state steam steel steep stick still sting stock
    stone stood stool store storm story stove strap straw strip stuck study stuff style sugar
    suite sunny super surge swamp swear sweat sweep sweet swift swing sword table taken taste
    teach thank theme there thick thief thing think third thorn those three threw throw thumb
    tiger tight timer tired title toast today token topic torch total touch tough towel tower
    toxic trace track trade trail train trait treat trend trial tribe trick truck truly trunk
    trust truth tulip tumor twice twist ultra uncle under union unity until upper upset urban
    usage usual valid value vapor vault venue verse video vigor virus visit vital vivid vocal
    voice wagon waste watch water whale wheat wheel where which while white whole whose witch
    woman world worry worse worst worth would wound woven wrist write wrong wrote yacht yield
    young youth zebra
"""
WORDS: tuple[str, ...] = tuple(_WORD_BLOCK.split())
WORD_SET = frozenset(WORDS)
LENGTH = 5
#: difficulty -> (guesses allowed, hard mode: revealed hints must be reused)
LEVELS = {1: (8, False), 2: (6, False), 3: (6, True), 4: (5, True), 5: (4, True)}
#: The episode ends after this many invalid attempts, whatever is left of the guesses.
MAX_INVALID = 10

RULES = (
    "Guess the hidden five-letter English word. After each guess every letter is marked: "
    "G = right letter in the right place, Y = in the word but elsewhere, . = not in the "
    "word (a letter repeated in the guess is marked Y/G only as often as it occurs in the "
    "answer). A guess that is not a word from the game's list does not count but is "
    "reported with valid=false."
)


def score_guess(guess: str, answer: str) -> str:
    """The G/Y/. feedback, greens first so repeated letters are not over-credited."""
    marks = ["."] * LENGTH
    spare = Counter(a for g, a in zip(guess, answer, strict=True) if g != a)
    for i, (g, a) in enumerate(zip(guess, answer, strict=True)):
        if g == a:
            marks[i] = "G"
        elif spare[g] > 0:
            marks[i] = "Y"
            spare[g] -= 1
    return "".join(marks)


def hard_mode_violation(guess: str, history: list[tuple[str, str]]) -> str | None:
    """Why `guess` ignores a revealed hint (greens kept in place, hinted letters reused)."""
    for past, marks in history:
        for i, (letter, mark) in enumerate(zip(past, marks, strict=True)):
            if mark == "G" and guess[i] != letter:
                return f"hard mode: position {i + 1} must be {letter!r}"
        needed = Counter(letter for letter, mark in zip(past, marks, strict=True) if mark != ".")
        for letter, count in needed.items():
            if guess.count(letter) < count:
                return f"hard mode: the guess must contain {letter!r}"
    return None


class WordleEnvironment(Environment):
    """Guess the word; integer reward 1 on the solving guess, 0 otherwise."""

    server_name = "wordle"
    env_name = "wordle_env"
    class_name = "WordleEnvironment"
    description = "Wordle with an embedded word list; integer reward 1 on solve."
    readme = f'# wordle\n\n{RULES}\n\nAction: `{{"guess": "<five letters>"}}`.\n'
    category = "game"
    action_title = "WordleAction"
    action_fields = (ActionField("guess", "string", "A five-letter English word."),)
    observation_title = "WordleObservation"
    observation_fields = (
        kit.INPUT_TEXT,
        kit.int_field("guesses", "Valid guesses made so far.", minimum=0),
        kit.int_field("max_guesses", "Valid guesses allowed.", minimum=1),
        kit.int_field("word_length", "Letters in the hidden word.", minimum=1),
        kit.bool_field(
            "valid", "Whether the last guess was accepted (null after reset).", nullable=True
        ),
        kit.str_field("last_guess", "The last guess as sent, lower-cased.", nullable=True),
        kit.str_field("feedback", "G/Y/. marks of the last valid guess.", nullable=True),
        kit.list_field(
            "history",
            {
                "type": "object",
                "properties": {"guess": {"type": "string"}, "feedback": {"type": "string"}},
                "required": ["guess", "feedback"],
            },
            "Every valid guess with its marks, oldest first.",
        ),
        kit.str_field("message", "What happened to the last guess."),
        kit.bool_field("solved", "Whether the word has been found."),
        kit.bool_field("hard_mode", "Whether revealed hints must be reused."),
        kit.int_field("invalid_attempts", "Invalid guesses so far.", minimum=0),
        kit.str_field("answer", "The hidden word, revealed once the game is over.", nullable=True),
    )

    def __init__(self) -> None:
        super().__init__()
        self.seed = 0
        self.difficulty = 2
        self.answer = ""
        self.history: list[tuple[str, str]] = []
        self.valid: bool | None = None
        self.last_guess: str | None = None
        self.message = ""
        self.invalid = 0
        self.solved = False
        self.started = False

    def _over(self) -> bool:
        limit = LEVELS[self.difficulty][0]
        return self.solved or len(self.history) >= limit or self.invalid >= MAX_INVALID

    def _observation(self) -> JsonObject:
        limit, hard = LEVELS[self.difficulty]
        lines = [f"  {guess.upper()}  {marks}" for guess, marks in self.history]
        state = [
            f"Guesses used: {len(self.history)} of {limit}.",
            *(["Hard mode: every revealed hint must be used in later guesses."] if hard else []),
            *(["Previous guesses:", *lines] if lines else ["No guesses yet."]),
            *([self.message] if self.message else []),
        ]
        reply = kit.reply_line("guess", '"<five-letter word>"')
        return {
            "input_text": kit.compose("Wordle.", RULES, state, reply),
            "guesses": len(self.history),
            "max_guesses": limit,
            "word_length": LENGTH,
            "valid": self.valid,
            "last_guess": self.last_guess,
            "feedback": self.history[-1][1] if self.history else None,
            "history": [{"guess": g, "feedback": f} for g, f in self.history],
            "message": self.message,
            "solved": self.solved,
            "hard_mode": hard,
            "invalid_attempts": self.invalid,
            "answer": self.answer if self._over() else None,
        }

    def _reset(self, request: ResetRequest) -> Outcome:
        self.seed, self.difficulty = request.seed, request.difficulty
        self.answer = SplitMix64(derive_seed(self.seed, "wordle")).choice(WORDS)
        self.history = []
        self.valid = self.last_guess = None
        self.message = ""
        self.invalid = 0
        self.solved = False
        self.started = True
        return Outcome(self._observation(), None, False)

    def _step(self, action: Mapping[str, Any]) -> Outcome:
        if not self.started:
            raise kit.not_started()
        raw = action.get("guess")
        if not isinstance(raw, str):
            raise ExecutionError("guess must be a string")
        guess = raw.strip().lower()[:40]
        self.last_guess = guess
        problem: str | None = None
        if len(guess) != LENGTH or not guess.isascii() or not guess.isalpha():
            problem = f"{guess!r} is not a {LENGTH}-letter word"
        elif guess not in WORD_SET:
            problem = f"{guess!r} is not in the word list"
        elif LEVELS[self.difficulty][1]:
            problem = hard_mode_violation(guess, self.history)
        if problem is not None:
            self.valid = False
            self.invalid += 1
            self.message = f"Invalid guess ({problem}); it does not count."
            return Outcome(self._observation(), 0, self._over())
        marks = score_guess(guess, self.answer)
        self.history.append((guess, marks))
        self.valid = True
        self.solved = guess == self.answer
        self.message = f"{guess.upper()} scored {marks}." + (" Solved!" if self.solved else "")
        if self._over() and not self.solved:
            self.message += f" Out of guesses: the word was {self.answer.upper()}."
        return Outcome(self._observation(), 1 if self.solved else 0, self._over())

    def _extra_state(self) -> JsonObject:
        return {"seed": self.seed, "difficulty": self.difficulty, "guesses": len(self.history)}
