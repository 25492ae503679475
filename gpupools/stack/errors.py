"""User-facing errors: every mistake becomes one line naming the field, so the CLI can exit 2."""

from __future__ import annotations

import bisect
import functools
import json
import re
import unicodedata
from dataclasses import dataclass, replace
from typing import Any, Iterable


# Characters str.splitlines() breaks at (and other C0 controls): escaped, so every problem stays one line
# whatever a user's value holds.
_ONE_LINE = {c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" for c in (*range(0x00, 0x09), *range(0x0a, 0x20), 0x7f, 0x85, 0x2028, 0x2029)}


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a stack: the field's path and what is allowed, printed as one line."""

    path: str
    message: str

    def __str__(self) -> str:
        text = f"error: {self.path}: {self.message}" if self.path else f"error: {self.message}"
        return text.translate(_ONE_LINE)


class ConfigError(Exception):
    """All problems found in one stack file, reported together rather than one per run."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def field_path(loc: tuple | list) -> str:
    """Spell a location the way users read it: ``pools[1].sharing.migProfile``. A mapping key that does not look
    like a name (it may be a credential pasted in the wrong place) is described, not spelled."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            text = str(part)
            out += ("." if out else "") + (text if name_like(text) else f"<{kind(text)}>")
    return out


# --------------------------------------------------------------------------------------------------------------------
# What an error message may quote
#
# A stack file is written by whoever can open a pull request, and `gpupools check` prints its errors into CI logs
# that everyone with read access sees. A credential pasted into the wrong key, or given the wrong shape (a webhook
# URL where a mapping belongs), must not come back out in an error. So a message quotes a value only when its field
# holds enumerations, names, sizes or ids (QUOTED_FIELDS), and only when the value looks like one (`name_like`,
# or a short number); every other value is described by its type and length (`kind`). `shown` applies that rule
# where a message is written; `redact` applies it once more to every finished message of a stack file, so a check
# that quotes a value by itself cannot leak one either.

# Field paths as `field_path` spells them with every list index and every user-chosen mapping key as `*`
# (`pools.*.labels.*` is any label of any pool). Anything not listed, including every field added later, is
# described, never quoted: the secret-bearing ones (alert receivers, SMTP, provider credentials) and the free text
# ones (reservation tags, the SMTP user) alike, and the Azure ids (`subscriptionId`, `tenantId`, `clientId`) that sit
# next to `clientSecret` and are where a copied secret lands.
QUOTED_FIELDS = frozenset({
    # top level
    "cloud", "quotas", "autoscaler",
    "cluster.name", "cluster.create", "cluster.kubernetesVersion", "cluster.resourceGroup", "cluster.location", "cluster.subnetIds.*",
    "cluster.endpointAccess", "cluster.authorizedCidrs.*", "cluster.secretsEncryption", "cluster.controlPlaneLogs.*",
    "cluster.logRetentionDays", "cluster.authenticationMode", "cluster.managedAddons", "cluster.localAccounts", "cluster.azurePolicy",
    "cluster.defenderWorkspaceId", "cluster.networkPolicy", "cluster.privateNodes", "cluster.releaseChannel", "cluster.production",
    "cluster.binaryAuthorization", "cluster.systemPool.machineType", "cluster.systemPool.minNodes", "cluster.systemPool.maxNodes",
    *(f"{at}.{f}" for at in ("sharing", "pools.*.sharing") for f in ("mode", "replicas", "migProfile", "memoryScaling", "memoryPerPod", "fraction")),
    "gpuSoftware.installer", "gpuSoftware.migStrategy", "gpuSoftware.version",
    *(f"pools.*.{f}" for f in ("name", "instanceType", "instanceTypes.*", "gpu", "gpuCount", "minNodes", "maxNodes", "spot", "diskSizeGb", "os", "labels.*",
                               "zones.*", "fabric", "topologyLevel", "autoRepair", "capacity.*", "capacity.*.reservation.id",
                               "capacity.*.reservation.ownerId", "capacity.*.reservation.kind", "capacity.*.reservation.zones.*",
                               "capacity.*.reservation.nodes", "capacity.*.flexStart.maxRunDuration", "capacity.*.queued.maxRunDuration",
                               "taints.*.key", "taints.*.value", "taints.*.effect")),
    "monitoring.enabled", "monitoring.prometheus", "monitoring.releaseLabel", "monitoring.grafana", "monitoring.idle.utilizationBelowPercent",
    "monitoring.idle.forHours",
    *(f"teams.*.{f}" for f in ("name", "namespace", "gpus", "gpus.*", "pools.*", "borrow", "lend", "priority", "overQuotaWeight",
                               "tolerations.*.key", "tolerations.*.operator", "tolerations.*.value", "tolerations.*.effect")),
    *(f"departments.*.{f}" for f in ("name", "teams.*", "gpus", "borrow", "priority", "overQuotaWeight")),
    "health.readinessGate",
    # provider settings that name a place or a profile
    "aws:region", "aws:profile", "gcp:project", "gcp:region", "gcp:zone", "azure-native:location",
})

# A name, an id, a size, a version, a zone, a CIDR block, a label: letters, digits (any script's: a full-width
# digit in a version is worth showing, and so is a space in "West Europe") and a few separators, no line break or
# tab, no scheme (`://`: a URL may carry a token), and no stretch that reads like random text (`_token_like`).
_NAME = re.compile(r"[-\w.:/@%#*+= ]{1,200}")
# Stretches of base64 and hex, the alphabets access keys, API tokens, webhook paths and private keys are written in.
_RUN = re.compile(r"[A-Za-z0-9+/=]+")
MAX_QUOTED_NUMBER = 10  # characters: any size or count a stack holds; a longer number is described


def _token_like(run: str) -> bool:
    """Random text switches between lower case, upper case and digits at most characters (base64 about 6 times in
    10, hex about 5); the names and ids a stack holds are short between separators (`Standard_NC24ads_A100_v4`,
    the 17 hex digits of an EC2 id) or switch rarely (`capacityReservationGroups`: 4 in 25). Measured on random
    tokens of the common shapes (hex, base64, URL-safe base64, `ghp_`, `xoxb-`), about 2 in 100 URL-safe ones, cut
    short by their `-` and `_`, pass as names: the allow-list of fields, not this test, is what keeps them out."""
    classes = [0 if c.islower() else 1 if c.isupper() else 2 for c in run if c.isalnum()]
    switches = sum(a != b for a, b in zip(classes, classes[1:]))
    return ((len(classes) >= 20 and switches >= 0.25 * len(classes))
            or (len(classes) >= 12 and len(set(classes)) == 3 and switches >= 0.3 * len(classes)))


def _visible(text: str) -> str:
    """Without format, control and separator characters other than the plain space."""
    if text.isprintable():  # false for any of those (and unassigned or private-use ones): the common case, at C speed
        return text
    return "".join(c for c in text if c == " " or unicodedata.category(c)[0] not in "CZ")


# A name holds at most 200 visible characters (`_NAME`); a longer string is not one, however many invisible ones it
# holds, and is not looked at character by character.
_LONGEST_NAME = 4 * 200


def name_like(text: str) -> bool:
    """Whether a string has the form of a name, id or size rather than of a credential. Invisible characters do not
    count: the problem that names them must still say which key holds them."""
    if len(text) > _LONGEST_NAME:
        return False
    return _name_like(text)


# A refused stack has every one of its values and keys asked about (`_hidden_values`), and the same names come back
# from stack to stack: the answer depends on the text alone.
@functools.lru_cache(maxsize=4096)
def _name_like(text: str) -> bool:
    text = _visible(text)
    return bool(_NAME.fullmatch(text)) and "://" not in text and not any(_token_like(run) for run in _RUN.findall(text))


def _steps(loc: Iterable) -> tuple[str, ...]:
    return tuple("*" if isinstance(part, int) else str(part) for part in loc)


@functools.lru_cache(maxsize=1024)
def _pattern_steps(pattern: str) -> tuple[str, ...]:
    return tuple(pattern.split("."))  # field names hold no dots; mapping keys (label keys) may, so `steps` is not split


def _matches(pattern: str, steps: tuple[str, ...], prefix: bool = False) -> bool:
    want = _pattern_steps(pattern)
    if prefix:
        steps = steps[:len(want)]
    return len(want) == len(steps) and all(w == "*" or w == h for w, h in zip(want, steps))


def quoted_field(loc: Iterable) -> bool:
    """Whether the field at `loc` (a pydantic location, indices as ints) holds values a message may quote."""
    return _quoted_steps(_steps(loc))


# Each refused value's field is matched against every pattern of QUOTED_FIELDS, and the same fields come back from
# stack to stack: the answer depends on the steps alone (as `_secret_steps`).
@functools.lru_cache(maxsize=4096)
def _quoted_steps(steps: tuple[str, ...]) -> bool:
    return any(_matches(pattern, steps) for pattern in QUOTED_FIELDS)


def quotable(loc: Iterable, value: Any) -> bool:
    """Whether a message may quote `value`, found at `loc`: the field is on the allow-list and the value looks like
    what such a field holds."""
    return quoted_field(loc) and _safe_form(value)


def kind(value: Any) -> str:
    """A value described by its type and length, without any of its contents."""
    def count(n: int, one: str, many: str) -> str:
        return f"{n:,} {one if n == 1 else many}"

    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        try:
            return f"a number of {count(len(str(abs(value))), 'digit', 'digits')}"
        except ValueError:  # more digits than Python converts
            return "a number of more than 4,300 digits"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return f"a string of {count(len(value), 'character', 'characters')}" if value else "an empty string"
    if isinstance(value, dict):
        return f"a mapping of {count(len(value), 'key', 'keys')}" if value else "an empty mapping"
    if isinstance(value, (list, tuple)):
        return f"a list of {count(len(value), 'item', 'items')}" if value else "an empty list"
    return f"a value of type {type(value).__name__}"


def close_matches(word: str, possibilities: Iterable[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """`difflib.get_close_matches`, without reading a word too long to come close to any possibility. difflib first
    indexes every character of the word (a second for a megabyte), yet a ratio is at most 2·min(a, b) / (a + b),
    below `cutoff` once the word is longer than the longest possibility times (2 - cutoff) / cutoff."""
    import difflib

    possibilities = list(possibilities)
    longest = max(map(len, possibilities), default=0)
    if len(word) * cutoff > longest * (2 - cutoff):
        return []
    return difflib.get_close_matches(word, possibilities, n=n, cutoff=cutoff)


def shown(loc: Iterable, value: Any) -> str:
    """`value` as a message about the field at `loc` may show it: quoted (`describe`) where `quotable`, otherwise
    its type and length."""
    return describe(value) if quotable(loc, value) else kind(value)


def shown_wrong_type(loc: Iterable, value: Any, words: Iterable[str] = ()) -> str:
    """A value its field does not take at all (text where a boolean, a number or one of a few words belongs), as a
    message may show it. Being refused, it may be anything, a pasted token as easily as a typo; so it is quoted
    only in the form that cannot be a credential: null, a boolean, a number of at most `MAX_QUOTED_NUMBER`
    characters, or one of the field's own `words`; anything else is described by its type and length, however
    much it looks like a name."""
    if isinstance(value, str):
        safe = value in set(words)
    else:
        safe = value is None or isinstance(value, (bool, int, float)) and _safe_form(value)
    return describe(value) if safe and quoted_field(loc) else kind(value)


# Shorter strings are not worth hiding (no credential is this short) and would match ordinary words of messages.
_MIN_HIDDEN = 6
# A message that quotes a value shortened (`describe` keeps the first 57 characters, the reader's `_short` 37) still
# starts with at least this much of it; a shorter stretch in common with a message is a coincidence (a webhook URL
# and the path `health.alerts.slack.webhook` share "s.slack.").
_PREFIX = 16


# Fields that hold credentials, or sit where a credential is pasted by mistake: every value in them is hidden, whatever
# its form. Elsewhere a value is hidden when it does not look like a name (`name_like`); a name-like value of a field
# that is not on QUOTED_FIELDS is described where a message is written (`shown`), and hiding it again here would
# also cut example text such as "an AWS region such as eu-central-1" out of a message.
SECRET_FIELDS = ("teams.*.alerts", "health.alerts", "monitoring.smtp", "aws:accessKey", "aws:secretKey", "aws:token", "gcp:credentials",
                 "gcp:accessToken", "azure-native:clientSecret", "azure-native:clientId", "azure-native:tenantId",
                 "azure-native:subscriptionId")


def _secret_field(loc: tuple) -> bool:
    return _secret_steps(_steps(loc), SECRET_FIELDS)


@functools.lru_cache(maxsize=4096)
def _secret_steps(steps: tuple[str, ...], fields: tuple[str, ...]) -> bool:
    return any(_matches(pattern, steps, prefix=True) for pattern in fields)


def _safe_form(value: Any) -> bool:
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, (int, float)):
        return len(f"{value!r}") <= MAX_QUOTED_NUMBER
    return isinstance(value, str) and name_like(value)


def _child_field(steps: tuple[str, ...], step: Any) -> tuple[tuple[str, ...] | None, bool]:
    """The `_steps` of the child at `step` of a field whose path is `steps` and not secret, and whether the child's
    is. A path is followed only while some SECRET_FIELDS pattern may still match it; below a secret field, and below
    a field no pattern goes through (`pools`, the bulk of a stack), the answer is the parent's and the path is no
    longer needed (None)."""
    child = (*steps, "*" if isinstance(step, int) else str(step))
    secret, going_on = _secret_prefix(child)
    return (child if going_on and not secret else None), secret


# Keyed by a path of at most a few steps, as `_secret_steps` is: the walk asks once per field near the top.
@functools.lru_cache(maxsize=4096)
def _secret_prefix(steps: tuple[str, ...]) -> tuple[bool, bool]:
    """Whether `steps` is in a secret field, and whether a longer SECRET_FIELDS pattern starts with them (so a field
    below may be one)."""
    def starts(want: tuple[str, ...]) -> bool:
        return len(want) > len(steps) and all(w == "*" or w == h for w, h in zip(want, steps))

    return _secret_steps(steps, SECRET_FIELDS), any(starts(_pattern_steps(pattern)) for pattern in SECRET_FIELDS)


def _hidden_values(config: Any) -> list[tuple[str, str]]:
    """Every value and key of a stack file's config that no message may quote: (text as found, description)."""
    out: list[tuple[str, str]] = []
    _hidden_below(config, (), False, out)
    return out


def _hidden_below(node: Any, steps: tuple[str, ...] | None, secret: bool, out: list[tuple[str, str]]) -> None:
    """`_hidden_values` of `node`, whose path is `steps` (None once no field below can turn secret) and lies in a
    secret field or not. The order is that of a depth-first walk: a mapping's keys, then its values and a list's
    items last first; which description a text found twice gets depends on it (`_Hider`). Strings, the most common
    node, are looked at in their parent's loop, and each node's field is worked out from its parent's (`_child_field`),
    not from its whole path: every refused stack is walked whole. The depth is the stack's, which the reader bounds."""
    if isinstance(node, str):
        if len(node) >= _MIN_HIDDEN and (secret or not name_like(node)):  # a string's `_safe_form` is `name_like`
            out.append((node, f"<{kind(node)}, not shown>"))
    elif isinstance(node, dict):
        for key in node:
            if isinstance(key, str) and len(key) >= _MIN_HIDDEN and not name_like(key):
                out.append((key, f"<{kind(key)}>"))
        for key, child in reversed(node.items()):
            if steps is None:
                below = None, secret
            else:
                # Top-level keys are namespaced (gpupools:pools); the models' paths start after the namespace.
                below = _child_field(steps, str(key).partition(":")[2] if not steps and str(key).startswith("gpupools:") else key)
            if isinstance(child, str):
                if len(child) >= _MIN_HIDDEN and (below[1] or not name_like(child)):
                    out.append((child, f"<{kind(child)}, not shown>"))
            else:
                _hidden_below(child, *below, out)
    elif isinstance(node, list):
        below = (None, secret) if steps is None else _child_field(steps, 0)  # every item is at the same field (`*`)
        for child in reversed(node):
            if isinstance(child, str):
                if len(child) >= _MIN_HIDDEN and (below[1] or not name_like(child)):
                    out.append((child, f"<{kind(child)}, not shown>"))
            else:
                _hidden_below(child, *below, out)
    elif isinstance(node, (int, float)) and not isinstance(node, bool) and (secret or not _safe_form(node)):
        text = f"{node!r}" if isinstance(node, float) else describe(node)
        if len(text) >= _MIN_HIDDEN:
            out.append((text, f"<{kind(node)}, not shown>"))


def _spellings(text: str) -> set[str]:
    """How a message may spell a value: as it is, escaped as Python's repr or JSON does, or escaped to one line."""
    forms = {text, repr(text)[1:-1], json.dumps(text)[1:-1], text.encode("unicode_escape").decode("ascii", "replace")}
    # The escaped spellings hold none of the characters `_ONE_LINE` escapes; only the value itself may.
    return forms | {text.translate(_ONE_LINE)} if not text.isprintable() and _BREAKS.search(text) else forms


_BREAKS = re.compile(f"[{re.escape(''.join(map(chr, _ONE_LINE)))}]")


class _Hider:
    """Finds, in a message, each hidden value in any of its spellings, whole or shortened (its first `_PREFIX` or more
    characters, as `describe` and the reader quote long values), and replaces it, with its quotes and any "...", by
    the value's description.

    Linear in the message: the message is read once, left to right. At each position two lookups say whether a
    spelling may start there: the next `_PREFIX` characters among the first `_PREFIX` of the long spellings, the next
    `_MIN_HIDDEN` among the first `_MIN_HIDDEN` of the short ones (found whole only, not inside a longer word). How far
    a long spelling goes on matching is measured with slices of doubling length, so a match costs the characters it
    covers (at C speed) and the reading resumes after it; spellings sharing a start are kept sorted and narrowed by
    bisection, so many of them cost no more than one. A value of a megabyte in a message of a megabyte costs a few
    milliseconds, where trying every spelling at every position cost minutes."""

    def __init__(self, hidden: list[tuple[str, str]]):
        self.short: dict[str, str] = {}  # a whole spelling shorter than _PREFIX -> its description
        long: dict[str, dict[str, str]] = {}  # first _PREFIX characters -> {spelling: description}
        for text, description in hidden:
            for form in _spellings(text):
                if len(form) < _PREFIX:
                    self.short.setdefault(form, description)
                else:
                    long.setdefault(form[:_PREFIX], {}).setdefault(form, description)
        self.long = {head: sorted(forms.items()) for head, forms in long.items()}
        self.short_heads = {form[:_MIN_HIDDEN] for form in self.short}
        self.short_lengths = sorted({len(form) for form in self.short}, reverse=True)
        # Every spelling starts with one of these; a message holding none (nearly every one: messages describe the
        # values they may not quote) is left as it is after a few searches at C speed, not read position by position.
        self.heads = self.short_heads | {head[:_MIN_HIDDEN] for head in self.long}

    def _spans(self, message: str) -> list[tuple[int, int, str]]:
        spans: list[tuple[int, int, str]] = []
        at, size = 0, len(message)
        while at <= size - _MIN_HIDDEN:
            end, description = at, ""
            bucket = self.long.get(message[at:at + _PREFIX])
            if bucket is not None:
                end, description = _longest(message, at, bucket)
            elif message[at:at + _MIN_HIDDEN] in self.short_heads and not (at and _word(message[at - 1])):
                for length in self.short_lengths:  # longest first
                    form = message[at:at + length]
                    if len(form) == length and form in self.short and not (at + length < size and _word(message[at + length])):
                        end, description = at + length, self.short[form]
                        break
                # A long value that starts inside this short one goes on after it: the short one ends where it starts.
                end = next((inner for inner in range(at + 1, end) if message[inner:inner + _PREFIX] in self.long), end)
            if end > at:
                spans.append((at, end, description))
                at = end
            else:
                at += 1
        return spans

    def __call__(self, message: str) -> str:
        if not any(head in message for head in self.heads):
            return message
        out, done = [], 0
        for start, end, description in self._spans(message):
            if message[end:end + 3] == "...":
                end += 3
            if start > done and end < len(message) and message[start - 1] == message[end] and message[end] in "'\"":
                start, end = start - 1, end + 1
            out += [message[done:start], description]
            done = end
        out.append(message[done:])
        return "".join(out)


def _word(char: str) -> bool:
    """A character that continues a word: a short value found next to one is part of a longer word, not the value."""
    return char.isascii() and char.isalnum()


def _longest(message: str, at: int, forms: list[tuple[str, str]]) -> tuple[int, str]:
    """Where the longest match at `at` of any of `forms` (sorted, all sharing the message's next `_PREFIX` characters)
    ends, and that spelling's description. Bisection narrows the forms to those sharing twice as many characters
    until one is left or none shares the next stretch; the longest match is then that one's or, among the rest, one
    of the two the message's text would sort between."""
    lo, hi, known = 0, len(forms), _PREFIX
    while hi - lo > 1:
        width = known * 2
        head = message[at:at + width]
        first = bisect.bisect_left(forms, head, lo, hi, key=lambda f: f[0][:width])
        last = bisect.bisect_right(forms, head, first, hi, key=lambda f: f[0][:width])
        if first == last or len(head) < width:
            candidates = [i for i in (first - 1, first) if lo <= i < hi]
            break
        lo, hi, known = first, last, width
    else:
        candidates = [lo]
    best = max(candidates, key=lambda i: _common(message, at, forms[i][0], known))
    return at + _common(message, at, forms[best][0], known), forms[best][1]


def _common(message: str, at: int, form: str, known: int) -> int:
    """How many characters of `form` the message holds from `at` on, knowing the first `known` match: slices of
    doubling length, then halving, so the cost is that of comparing the characters that match."""
    limit = min(len(form), len(message) - at)
    good, step = known, max(known, 1)
    while good < limit:
        probe = min(limit, good + step)
        if message[at + good:at + probe] != form[good:probe]:
            bad = probe  # the first difference lies in (good, bad]
            while bad - good > 1:
                middle = (good + bad) // 2
                if message[at + good:at + middle] == form[good:middle]:
                    good = middle
                else:
                    bad = middle
            return good
        good, step = probe, step * 2
    return good


def redact(problems: list[Problem], config: Any) -> list[Problem]:
    """The problems of one stack file with every value of it that a message may not quote (see `quotable`)
    replaced by its description, in paths and messages alike."""
    hide = _Hider(_hidden_values(config))
    return [replace(p, path=hide(p.path), message=hide(p.message)) for p in problems]


def describe(value: Any, limit: int = 60, as_json: bool = False) -> str:
    """A value as a message quotes it, at most `limit` characters: as JSON, but a string alone as Python's repr
    unless `as_json` (messages about JSON files quote JSON).

    Shortened while it is written, never after: a value from a hostile file may be huge, shared many times
    over (YAML aliases) or of a type JSON cannot spell, and the message must cost the same either way.
    """
    out: list[str] = []
    _write(value, out, [limit + 1], top=not as_json)
    text = "".join(out)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _write(value: Any, out: list[str], budget: list[int], top: bool = False) -> None:
    def put(text: str) -> None:
        out.append(text[:max(budget[0], 0)])
        budget[0] -= len(text)

    if budget[0] <= 0:
        return
    if isinstance(value, str):
        head = value[:budget[0] + 2]
        put(repr(head) if top else json.dumps(head))
    elif value is None or isinstance(value, (bool, float)):
        put(json.dumps(value))
    elif isinstance(value, int):
        try:
            put(str(value))
        except ValueError:  # more digits than Python converts
            put(f"<an integer of about {value.bit_length() * 30103 // 100000} digits>")
    elif isinstance(value, (list, tuple, dict)):
        mapping = isinstance(value, dict)
        put("{" if mapping else "[")
        for i, entry in enumerate(value.items() if mapping else value):
            if budget[0] <= 0:
                return
            if i:
                put(", ")
            if mapping:
                key, entry = entry
                _write(key if isinstance(key, str) else describe(key, budget[0] + 2), out, budget)
                put(": ")
            _write(entry, out, budget)
        put("}" if mapping else "]")
    else:
        put(f"<{type(value).__name__}>")
